#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "build_info.hpp"
#include "cli/commands.hpp"
#include "cli/size_sweep.hpp"
#include "cli/vocabulary.hpp"
#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/base/output_file.hpp"
#include "reports/trace/trace_report.hpp"
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/trace_analysis.hpp"
#include "tracing/trace/trace_plan.hpp"

namespace commtool::cli {

namespace fs = std::filesystem;

namespace {

// Every type NCCL reduces and commtool can check exactly (tracing/collectives/collective_data).
constexpr std::string_view kTraceTypes[] = {"int8",   "uint8", "int32", "uint32", "int64",
                                            "uint64", "half",  "float", "double", "bfloat16"};

struct TraceOptions {
  tracing::TraceRequest request;
  std::string collective;
  std::string minbytes = "8";
  std::string maxbytes = "256M";
  int stepfactor = 2;
  std::string dtype = "float";
  std::string op = "sum";
  int check = 1;
  std::string modes = "all";
  std::string poll_ms = "10";
  bool stream_scope = false;
  bool no_cupti = false;
  bool no_baseline = false;
  std::string trace_file;
  std::string save_dir;
  std::string fault;
};

// The entries of a comma-separated option value, each empty one refused by its position
// ("sync,," has an empty second and third entry; getline would drop the last silently).
std::vector<std::string> split_list(const std::string& option, const std::string& text) {
  std::vector<std::string> items;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (items.back().empty()) {
      throw usage_error(fmt::format("{} {}: entry {} is empty; give a comma-separated list", option,
                                    excerpt(text), items.size()));
    }
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::vector<int> poll_intervals(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_list("--poll-ms", text)) {
    int ms = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), ms);
    if (ec != std::errc() || end != item.data() + item.size() || ms < 0 || ms > 10000) {
      throw usage_error(fmt::format(
          "--poll-ms {}: {} is not a whole number of milliseconds from 0 (synchronize) to "
          "10000",
          excerpt(text), item == text ? "it" : "'" + excerpt(item) + "'"));
    }
    out.push_back(ms);
  }
  if (out.empty()) throw usage_error("--poll-ms: give at least one interval");
  return out;
}

// --mode sync,blocking-wait --poll-ms 10,0: blocking-wait runs once per interval.
std::vector<tracing::ModeRequest> modes(const TraceOptions& o) {
  using tracing::CompletionMode;
  std::vector<CompletionMode> chosen;
  for (const std::string& item : split_list("--mode", o.modes)) {
    if (item == "all") {
      chosen.insert(chosen.end(), {CompletionMode::kSync, CompletionMode::kAsyncWait,
                                   CompletionMode::kDeviceSync, CompletionMode::kBlockingWait});
    } else {
      const std::optional<CompletionMode> mode = tracing::parse_completion_mode(item);
      if (!mode) {
        throw usage_error(fmt::format("--mode {}: not a completion mode; accepted: {}, all",
                                      excerpt(item), tracing::kCompletionModeNames));
      }
      chosen.push_back(*mode);
    }
  }
  if (chosen.empty()) throw usage_error("--mode: give at least one mode (or all)");
  const std::vector<int> polls = poll_intervals(o.poll_ms);
  std::vector<tracing::ModeRequest> out;
  for (CompletionMode m : chosen) {
    if (m != CompletionMode::kBlockingWait) {
      out.push_back({m, 0});
      continue;
    }
    for (int p : polls)
      out.push_back({m, p});
  }
  return out;
}

tracing::TraceRequest build_request(const GlobalOptions& global, TraceOptions& o) {
  tracing::TraceRequest q = o.request;
  auto c = tracing::parse_collective(o.collective);
  if (!c) {
    throw usage_error(fmt::format(
        "collective '{}': not one commtool runs; accepted: allreduce, allgather, reducescatter, "
        "broadcast, reduce, alltoall, sendrecv",
        o.collective));
  }
  q.collective = *c;
  q.dtype = *tracing::parse_data_type(element_type(o.dtype, kTraceTypes));
  auto op = tracing::parse_reduce_op(o.op);
  if (!op) throw usage_error(fmt::format("--op {}: accepted: sum, prod, min, max, avg", o.op));
  q.op = *op;
  if (q.inplace && (q.collective == tracing::Collective::kAllToAll ||
                    q.collective == tracing::Collective::kSendRecv)) {
    throw usage_error(fmt::format("--inplace: {} has no in-place form here; drop --inplace",
                                  tracing::to_string(q.collective)));
  }
  q.sizes = size_sweep(o.minbytes, o.maxbytes, o.stepfactor);
  q.modes = modes(o);
  q.check = o.check != 0;
  q.cupti = !o.no_cupti;
  q.untraced_pass = !o.no_baseline;
  if (o.stream_scope && q.scope_samples == 0) {
    throw usage_error("--scope-samples 0: --stream-scope needs at least one sample");
  }
  if (!o.stream_scope) q.scope_samples = 0;
  if (o.stream_scope && q.scope_sleep_ms / 1e3 >= global.timeout_s) {
    throw usage_error(fmt::format(
        "--scope-sleep-ms {:g}: the GPU sleep must be shorter than --timeout {:g} s, which bounds "
        "every wait",
        q.scope_sleep_ms, global.timeout_s));
  }
  if (!o.trace_file.empty() && o.no_cupti) {
    throw usage_error("--trace needs CUPTI's records; drop --no-cupti");
  }
  q.devices = global.rank_devices;
  q.timeout_s = global.timeout_s;
  q.comm = global.comm_mode;
  if (!o.fault.empty()) q.fault = tracing::parse_fault(o.fault);
  return q;
}

int run_trace_command(const GlobalOptions& global, TraceOptions& o) {
  // Where the results go is checked first: a path that cannot or must not be written is
  // exit 2 whatever the machine has.
  if (!o.trace_file.empty()) files::check_writable(o.trace_file, "--trace");
  if (!o.save_dir.empty()) tracing::check_save_dir(o.save_dir);
  files::check_distinct(
      {{"--output", global.output}, {"--trace", o.trace_file}, {"--save", o.save_dir}});
  tracing::TraceRequest q = build_request(global, o);
  tracing::check_before_hardware(q, o.maxbytes);
  tracing::TraceRun run = tracing::run_trace(q);
  run.meta.commtool_version =
      fmt::format("{} (git {})", build_info::kVersion, build_info::kGitCommit);
  if (!o.save_dir.empty()) tracing::save_run(o.save_dir, run);
  return report_run(global, run, o.trace_file);
}

}  // namespace

int report_run(const GlobalOptions& global, const tracing::TraceRun& run,
               const std::string& trace_file) {
  if (!trace_file.empty()) {
    files::write_atomically(trace_file, reports::trace_run_to_chrome(run).dump() + "\n", "--trace");
  }
  tracing::TraceReport report = tracing::analyse(run);
  emit(global, global.json ? reports::trace_to_json(report).dump(2) + "\n"
                           : reports::render_trace_text(report));
  return 0;
}

Runner register_trace(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<TraceOptions>();
  tracing::TraceRequest& q = o->request;
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "Run an NCCL collective over a size sweep, check every result, and split each operation "
      "into host enqueue, stream wait and GPU time with CUPTI");
  cmd->add_option("collective", o->collective,
                  "allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv")
      ->type_name("COLLECTIVE")
      ->required();
  cmd->add_option("-b,--minbytes", o->minbytes,
                  "Smallest size (nccl-tests' size: the larger "
                  "buffer per rank)")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", o->maxbytes, "Largest size")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", o->stepfactor, "Multiply the size by this each step")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  cmd->add_option("-n,--iters", q.iters, "Measured operations per size and mode")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("-w,--warmup", q.warmup, "Unmeasured operations before them")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  cmd->add_option("--batches", q.batches,
                  "Untraced batches per size of --iters operations back to back, each timed as "
                  "one: nccl-tests' statistic, shown beside the per-operation median (none in "
                  "place or with --no-baseline; 0: none)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("-d,--dtype", o->dtype, element_type_help(kTraceTypes))
      ->type_name("TYPE")
      ->capture_default_str();
  cmd->add_option("-o,--op", o->op, "Reduction: sum, prod, min, max, avg")->capture_default_str();
  cmd->add_flag("--inplace", q.inplace, "Receive into the send buffer (NCCL's in-place form)");
  cmd->add_option("-r,--root", q.root, "Root rank of broadcast and reduce")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-c,--check", o->check, "Check every operation's output (1) or not (0)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  cmd->add_option("--mode", o->modes,
                  "How the host completes each collective: sync, async-wait, device-sync, "
                  "blocking-wait, or all (comma-separated list)")
      ->capture_default_str();
  cmd->add_option("--poll-ms", o->poll_ms,
                  "blocking-wait: milliseconds slept between event queries, 0 for a blocking "
                  "cudaEventSynchronize; a list (10,0) runs blocking-wait once per value")
      ->capture_default_str();
  cmd->add_flag("--stream-scope", o->stream_scope,
                "Also show that a wait on stream A does not order stream B (a long GPU sleep "
                "ahead of the collective)");
  q.scope_samples = 40;  // TraceRequest's 0 means off; --stream-scope turns it on
  cmd->add_option("--scope-samples", q.scope_samples, "Samples per mode for --stream-scope")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  cmd->add_option("--scope-sleep-ms", q.scope_sleep_ms, "GPU sleep ahead of each such sample")
      ->check(finite_number())
      ->check(CLI::Range(1.0, 60000.0))
      ->capture_default_str();
  cmd->add_flag("--no-cupti", o->no_cupti, "Run untraced: times only, no completion split");
  cmd->add_flag("--no-baseline", o->no_baseline,
                "Skip the untraced pass that prices tracing (traced/untraced column)");
  cmd->add_option("--trace", o->trace_file, "Write a Chrome/Perfetto trace (JSON) to FILE")
      ->check(non_empty_path())
      ->type_name("FILE");
  cmd->add_option("--save", o->save_dir,
                  "Save the records and run metadata in DIR, for commtool report")
      ->check(non_empty_path())
      ->type_name("DIR");
  cmd->add_option(
         "--inject-fault", o->fault,
         "Fire drill: make one rank die:R:S (killed mid-operation S), no-join:R (never "
         "joins), stall:R:S (its stream stalls before S) or mismatch:R:S (wrong count at S), "
         "to see commtool catch and name it (exit 5)")
      ->type_name("FAULT");
  return [&global, o] { return run_trace_command(global, *o); };
}

}  // namespace commtool::cli
