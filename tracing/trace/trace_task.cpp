#include "tracing/trace/trace_task.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/base/nccl/communicator.hpp"
#include "probes/base/workers/worker.hpp"
#include "tracing/collectives/nccl_worker.hpp"
#include "tracing/cupti/cupti_tracer.hpp"
#include "tracing/trace/collective_runner.hpp"
#include "tracing/trace/record_io.hpp"

namespace commtool::tracing {

namespace {

using nlohmann::json;

struct ModeSetting {
  CompletionMode mode;
  int poll_ms;
};

struct TaskOptions {
  CollectiveSpec spec;
  std::vector<uint64_t> sizes;
  std::vector<ModeSetting> modes;
  int iters = 0;
  int warmup = 0;
  bool cupti = true;
  bool untraced_pass = true;
  int batches = 0;
  int scope_samples = 0;  // 0: no --stream-scope
  uint64_t scope_sleep_ns = 0;
  uint64_t scope_bytes = 0;
  nccl::CommMode comm_mode = nccl::CommMode::kBlocking;
  std::optional<Fault> fault;
  std::string plugin;        // the profiler plugin's path; empty: not found
  std::string profiler_out;  // where this rank's plugin writes
  std::string bus_id;
};

TaskOptions options_from(const json& t, int rank) {
  TaskOptions o;
  o.spec.collective = *parse_collective(t.at("collective").get<std::string>());
  o.spec.dtype = *parse_data_type(t.at("dtype").get<std::string>());
  o.spec.op = *parse_reduce_op(t.at("op").get<std::string>());
  o.spec.inplace = t.at("inplace").get<bool>();
  o.spec.root = t.at("root").get<int>();
  o.spec.check = t.at("check").get<bool>();
  o.sizes = t.at("sizes").get<std::vector<uint64_t>>();
  for (const json& m : t.at("modes")) {
    o.modes.push_back(
        {*parse_completion_mode(m.at("mode").get<std::string>()), m.at("poll_ms").get<int>()});
  }
  o.iters = t.at("iters").get<int>();
  o.warmup = t.at("warmup").get<int>();
  o.cupti = t.at("cupti").get<bool>();
  o.untraced_pass = t.at("untraced_pass").get<bool>();
  o.batches = t.at("batches").get<int>();
  o.scope_samples = t.at("scope_samples").get<int>();
  o.scope_sleep_ns = t.at("scope_sleep_ns").get<uint64_t>();
  o.scope_bytes = t.at("scope_bytes").get<uint64_t>();
  o.comm_mode = *nccl::parse_comm_mode(t.at("comm").get<std::string>());
  o.fault = fault_from_json(t.at("fault"));
  o.plugin = t.at("plugin").get<std::string>();
  const std::string dir = t.at("profiler_dir").get<std::string>();
  if (!dir.empty()) o.profiler_out = fmt::format("{}/profiler-rank{}.jsonl", dir, rank);
  o.bus_id = t.at("gpus").at(static_cast<size_t>(rank)).at("bus_id").get<std::string>();
  return o;
}

// NCCL reads these when it loads and initialises; the user's own settings win.
void prepare_environment(const TaskOptions& o) {
  if (!o.plugin.empty() && !o.profiler_out.empty()) {
    setenv("NCCL_PROFILER_PLUGIN", o.plugin.c_str(), 1);
    setenv("COMMTOOL_PROFILER_OUT", o.profiler_out.c_str(), 1);
  }
  // NCCL's NVTX ranges reach CUPTI only when CUPTI is the NVTX injection library.
  if (o.cupti) setenv("NVTX_INJECTION64_PATH", CuptiTracer::library_path().c_str(), 0);
  keep_nvlink_multicast_off();
}

std::vector<nccl_profiler::CollectiveRecord> read_profiler_records(const std::string& path) {
  std::vector<nccl_profiler::CollectiveRecord> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (auto r = nccl_profiler::parse_json_line(line)) out.push_back(std::move(*r));
  }
  return out;
}

std::string plugin_status(const TaskOptions& o, bool file_exists, size_t records, int nranks) {
  if (o.plugin.empty()) return "not found: the profiler plugin is not installed beside commtool";
  if (!file_exists) {
    return "not loaded: NCCL did not load " + o.plugin + " (NCCL_PROFILER_PLUGIN)";
  }
  if (records == 0 && nranks == 1) {
    return "loaded; NCCL ran no collective kernel at one rank (it copies), so it chose no "
           "algorithm or protocol";
  }
  return "loaded";
}

[[noreturn]] void wrong_data(int rank, const TaskOptions& o, uint64_t seq, uint64_t bytes,
                             const std::string& mode, uint64_t wrong) {
  throw Error(ExitCode::kVerification,
              fmt::format("rank {}: {} #{} ({} bytes, {}): {} wrong element(s) in the output", rank,
                          to_string(o.spec.collective), seq, bytes, mode, wrong));
}

// The task's steps, for the progress line the launcher shows: each size and mode of each pass,
// each size's batches, each mode's stream-scope samples.
class Steps {
 public:
  Steps(workers::Progress& progress, int total) : progress_(progress), total_(total) {}
  void begin(const std::string& what) { progress_.step(done_++, total_, what); }
  ~Steps() { progress_.step(total_, total_, "done"); }

 private:
  workers::Progress& progress_;
  int total_;
  int done_ = 0;
};

std::string step_name(const char* pass, const TaskOptions& o, uint64_t bytes, CompletionMode mode) {
  return fmt::format("{} {} {} {}", pass, to_string(o.spec.collective),
                     measure::format_byte_size(bytes), to_string(mode));
}

// One pass over every size and mode. The barrier before each operation starts the ranks
// together and shows the launcher that this worker is making progress.
void run_pass(workers::WorkerContext& ctx, CollectiveRunner& runner, const TaskOptions& o,
              bool traced, const OperationMark& ids, uint64_t& seq, RankRun& out,
              std::vector<OperationMark>& marks, Steps& steps) {
  for (uint64_t bytes : o.sizes) {
    for (const ModeSetting& m : o.modes) {
      steps.begin(step_name(traced ? "traced" : "untraced", o, bytes, m.mode));
      for (int i = 0; i < o.warmup + o.iters; ++i) {
        ctx.comm.barrier();
        OperationMark mark = ids;
        OperationSample s = runner.run(bytes, m.mode, m.poll_ms, seq++, mark);
        s.traced = traced;
        if (s.wrong_elements > 0) {
          wrong_data(ctx.rank, o, s.seq, bytes, to_string(m.mode), s.wrong_elements);
        }
        if (i < o.warmup) continue;
        out.samples.push_back(s);
        if (traced) marks.push_back(mark);
      }
    }
  }
}

// nccl-tests' statistic: per size, batches of `iters` operations back to back (untraced).
void run_batches(workers::WorkerContext& ctx, CollectiveRunner& runner, const TaskOptions& o,
                 uint64_t& seq, RankRun& out, Steps& steps) {
  for (uint64_t bytes : o.sizes) {
    if (o.batches > 0) {
      steps.begin(fmt::format("batches {} {}", to_string(o.spec.collective),
                              measure::format_byte_size(bytes)));
    }
    for (int b = 0; b < o.batches; ++b) {
      ctx.comm.barrier();
      BatchSample s = runner.run_batch(bytes, o.iters, seq);
      seq += static_cast<uint64_t>(o.iters);
      if (s.wrong_elements > 0) {
        wrong_data(ctx.rank, o, s.first_seq + static_cast<uint64_t>(s.ops) - 1, bytes,
                   "the last of a batch", s.wrong_elements);
      }
      out.batches.push_back(s);
    }
  }
}

void run_scope(workers::WorkerContext& ctx, CollectiveRunner& runner, const TaskOptions& o,
               uint64_t& seq, RankRun& out, Steps& steps) {
  for (const ModeSetting& m : o.modes) {
    if (o.scope_samples > 0) steps.begin(fmt::format("stream scope {}", to_string(m.mode)));
    for (int i = 0; i < o.scope_samples; ++i) {
      ctx.comm.barrier();
      StreamScopeSample s =
          runner.run_scope(o.scope_bytes, m.mode, m.poll_ms, seq++, o.scope_sleep_ns);
      if (s.wrong_elements > 0) {
        wrong_data(ctx.rank, o, s.seq, o.scope_bytes, to_string(m.mode), s.wrong_elements);
      }
      out.scope.push_back(s);
    }
  }
}

json run_trace(workers::WorkerContext& ctx, const json& task) {
  const TaskOptions o = options_from(task, ctx.rank);
  prepare_environment(o);
  RankRun out;
  out.rank = ctx.rank;
  out.bus_id = o.bus_id;
  out.device = select_device(o.bus_id);
  cudaDeviceProp prop{};
  CUDA_TRY(cudaGetDeviceProperties(&prop, out.device));
  out.gpu_name = prop.name;
  out.host = host_name_here();

  nccl::Library lib;
  const ncclUniqueId id = shared_unique_id(ctx, lib);
  if (o.fault && o.fault->kind == FaultKind::kNoJoin && o.fault->rank == ctx.rank) {
    for (;;)
      pause();  // --inject-fault no-join: never joins; the launcher stops it
  }
  nccl::Communicator comm(lib, id, ctx.size, ctx.rank, ctx.timeout, o.comm_mode, &ctx.progress);
  uint64_t max_bytes = o.scope_samples > 0 ? o.scope_bytes : 0;
  for (uint64_t b : o.sizes)
    max_bytes = std::max(max_bytes, b);
  CollectiveRunner runner(lib, comm, ctx.size, o.spec, max_bytes, ctx.timeout, &ctx.progress,
                          o.fault);

  // Untraced first, before CUPTI records anything, so its figures carry no tracing cost.
  uint64_t seq = 0;
  std::vector<OperationMark> marks;
  const bool untraced = o.untraced_pass || !o.cupti;
  const int points = static_cast<int>(o.sizes.size() * o.modes.size());
  const int batch_steps = o.batches > 0 ? static_cast<int>(o.sizes.size()) : 0;
  const int scope_steps = o.scope_samples > 0 ? static_cast<int>(o.modes.size()) : 0;
  Steps steps(ctx.progress,
              (untraced ? points + batch_steps : 0) + (o.cupti ? points : 0) + scope_steps);
  if (untraced) {
    OperationMark ids;
    ids.thread = static_cast<uint32_t>(syscall(SYS_gettid));
    run_pass(ctx, runner, o, false, ids, seq, out, marks, steps);
    run_batches(ctx, runner, o, seq, out, steps);
  }
  if (o.cupti) {
    CuptiTracer tracer;
    const OperationMark ids = tracer.mark_ids(runner.handles());
    run_pass(ctx, runner, o, true, ids, seq, out, marks, steps);
    run_scope(ctx, runner, o, seq, out, steps);
    out.records = tracer.take();
    out.records.operations = std::move(marks);
    out.clock_note = tracer.clock_note();
  } else {
    run_scope(ctx, runner, o, seq, out, steps);
  }
  ctx.comm.barrier();
  // The plugin creates its file when NCCL initialises it: the file says it was loaded.
  const bool plugin_file = !o.profiler_out.empty() && access(o.profiler_out.c_str(), F_OK) == 0;
  if (plugin_file) out.nccl = read_profiler_records(o.profiler_out);
  out.plugin_status = plugin_status(o, plugin_file, out.nccl.size(), ctx.size);
  return to_json(out, /*with_records=*/true);
}

}  // namespace

void register_trace_tasks() {
  workers::register_task(kTraceTask, run_trace);
}

}  // namespace commtool::tracing
