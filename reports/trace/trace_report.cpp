#include "reports/trace/trace_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "probes/base/measure/byte_size.hpp"
#include "reports/format/summary_format.hpp"
#include "reports/format/text_table.hpp"
#include "reports/trace/chrome_trace.hpp"

namespace commtool::reports {

using nlohmann::json;
using tracing::CompletionMode;

namespace {

std::string mode_name(CompletionMode m, int poll_ms) {
  if (m != CompletionMode::kBlockingWait) return tracing::to_string(m);
  return poll_ms > 0 ? fmt::format("blocking-wait {}ms poll", poll_ms) : "blocking-wait sync";
}

std::string or_unknown(const std::string& s) {
  return s.empty() ? "unknown" : s;
}

// "2026-12-03T18:46:02Z" as "2026-12-03 18:46 UTC"; anything else as written.
std::string utc_minute(const std::string& iso) {
  if (iso.size() == 20 && iso[10] == 'T' && iso[19] == 'Z') {
    return iso.substr(0, 10) + " " + iso.substr(11, 5) + " UTC";
  }
  return or_unknown(iso);
}

// A re-analysed run says first when, where and by what it was made, and what loading it left
// out, so that it is never read as a live run.
std::string saved_run_lines(const tracing::TraceReport& r) {
  const tracing::RunMeta& m = r.meta;
  std::string out = fmt::format("Saved run: {} on host {} by commtool {}", utc_minute(m.saved_at),
                                or_unknown(m.hostname), or_unknown(m.commtool_version));
  if (!m.started_at.empty()) out += fmt::format("; run started {}", utc_minute(m.started_at));
  out += "\n";
  for (const std::string& w : r.saved_warnings)
    out += "WARNING: " + w + "\n";
  return out + "\n";
}

std::string header(const tracing::TraceReport& r) {
  const tracing::RunMeta& m = r.meta;
  std::string out = r.saved ? saved_run_lines(r) : "";
  if (std::string label = workers::shared_gpu_label(r.placement); !label.empty()) {
    out += label + " Use it to check what NCCL ran and that every path works.\n\n";
  }
  out += fmt::format(
      "commtool trace {}: {} {}, {}{}, {} rank(s), {} communicator; NCCL {} ({}); {} measured "
      "operations per size and mode after {} warm-up\n",
      to_string(m.collective), to_string(m.dtype), to_string(m.op),
      m.inplace ? "in-place" : "out-of-place",
      (m.collective == tracing::Collective::kBroadcast ||
       m.collective == tracing::Collective::kReduce)
          ? fmt::format(", root {}", m.root)
          : "",
      m.nranks, nccl::to_string(m.comm), m.nccl_version, m.nccl_library, m.iters, m.warmup);
  for (const std::string& g : r.gpus)
    out += "  " + g + "\n";
  return out;
}

std::string tracing_cost(const tracing::SizeRow& row) {
  if (!row.traced_over_untraced) return "-";
  std::string s = fmt::format("x{:.3f}", *row.traced_over_untraced);
  if (row.host_call_delta_us) s += fmt::format(", host call {:+.1f} us", *row.host_call_delta_us);
  return s;
}

// The reason NCCL's choice is unknown is the same on every row; the plugin line says it once.
std::string choice_cell(const tracing::NcclChoice& choice) {
  return choice.known() ? to_string(choice) : "unknown (see NCCL profiler plugin below)";
}

std::string sizes_table(const tracing::TraceReport& r) {
  const bool batches = std::any_of(r.sizes.begin(), r.sizes.end(),
                                   [](const tracing::SizeRow& row) { return row.batch_us; });
  std::vector<std::string> head = {"size",       "count",  "time us",  "algbw GB/s",
                                   "busbw GB/s", "#wrong", "NCCL ran", "traced/untraced"};
  if (batches) head.insert(head.begin() + 5, {"batch us", "batch busbw"});
  TextTable t(head);
  for (const tracing::SizeRow& row : r.sizes) {
    std::vector<std::string> cells = {
        measure::format_byte_size(row.bytes),  std::to_string(row.count),
        median_spread_us(row.time_us),         fmt::format("{:.2f}", row.algbw_gbps),
        fmt::format("{:.2f}", row.busbw_gbps), std::to_string(row.wrong_elements),
        choice_cell(row.nccl_choice),          tracing_cost(row)};
    if (batches) {
      cells.insert(cells.begin() + 5,
                   {row.batch_us ? median_spread_us(*row.batch_us) : "-",
                    row.batch_busbw_gbps ? fmt::format("{:.2f}", *row.batch_busbw_gbps) : "-"});
    }
    t.add_row(cells);
  }
  std::string batch_note;
  if (batches) {
    batch_note = fmt::format(
        "; batch: nccl-tests' statistic, {} untraced batches of {} operations back to back per "
        "size, each batch's time over its operations averaged over the ranks, median "
        "[min-max] of the batches",
        r.meta.batches, r.meta.iters);
  }
  return fmt::format(
      "Collective (time: CUDA events around the collective on the NCCL stream, {}; median "
      "[min-max] of every measured operation, each taken at its slowest rank; busbw with "
      "nccl-tests' factor{})\n{}",
      r.meta.cupti ? "traced pass" : "untraced", batch_note, t.render());
}

std::string wait_cell(const tracing::SplitRow& row) {
  if (row.mode == CompletionMode::kSync) return "- (inside the call)";
  std::string s = median_spread_us(row.host_wait_us);
  return row.host_wait_polls ? s + " host, polling" : s;
}

std::string splits_table(const tracing::TraceReport& r) {
  TextTable t({"size", "mode", "host call us", "wait us", "stream dep us", "host/dep", "complete",
               "kernel us", "exposed wait us", "input wait us"});
  for (const tracing::SplitRow& row : r.splits) {
    t.add_row({measure::format_byte_size(row.bytes), mode_name(row.mode, row.poll_ms),
               median_spread_us(row.host_call_us), wait_cell(row),
               median_spread_us(row.stream_dependency_us),
               row.host_over_dependency ? fmt::format("{:.2f}", *row.host_over_dependency) : "-",
               fmt::format("{}/{}", row.complete, row.operations), median_spread_us(row.kernel_us),
               median_spread_us(row.exposed_wait_us), median_spread_us(row.input_wait_us)});
  }
  return "Completion split (traced pass; median [min-max]. Host call and wait: host clock. "
         "Stream dep: input-ready event to the consumer's first GPU work; kernel: the "
         "collective's first to last GPU work (copies at one rank); exposed wait: the consumer "
         "stream idle on the end event; input wait: the NCCL stream idle on the input-ready "
         "event. complete: operations already complete when the host's wait returned)\n" +
         t.render();
}

// When each rank's kernel started, against the first rank's, per size and mode (one clock,
// CLOCK_MONOTONIC, on every rank of this host). Past 16 ranks only the latest rank is named.
std::string start_lag_table(const tracing::TraceReport& r) {
  const size_t n = static_cast<size_t>(r.meta.nranks);
  std::vector<std::string> head = {"size", "mode", "start spread us"};
  const bool per_rank = n <= 16;
  if (per_rank) {
    for (size_t k = 0; k < n; ++k)
      head.push_back(fmt::format("rank {} lag", k));
  } else {
    head.push_back("latest rank (median lag us)");
  }
  TextTable t(head);
  for (const tracing::SplitRow& row : r.splits) {
    if (row.rank_start_lag_us.empty()) continue;
    std::vector<std::string> cells = {measure::format_byte_size(row.bytes),
                                      mode_name(row.mode, row.poll_ms),
                                      median_spread_us(row.start_spread_us)};
    if (per_rank) {
      for (double lag : row.rank_start_lag_us)
        cells.push_back(fmt::format("{:.1f}", lag));
    } else {
      auto latest = std::max_element(row.rank_start_lag_us.begin(), row.rank_start_lag_us.end());
      cells.push_back(
          fmt::format("rank {} ({:.1f})", latest - row.rank_start_lag_us.begin(), *latest));
    }
    t.add_row(cells);
  }
  return "Kernel start across ranks (traced pass; start spread: last rank's first GPU work minus "
         "the first rank's, median [min-max] over operations; lag: each rank's median behind "
         "the first, us)\n" +
         t.render();
}

std::string scope_meaning(const tracing::ScopeRow& row) {
  if (row.b_first == row.samples && row.complete_at_wait_return == 0) {
    return "the wait ordered stream A only: the host went on before the collective ended";
  }
  if (row.b_first == 0 && row.complete_at_wait_return == row.samples) {
    return "the host waited for the collective itself, so B came after it too";
  }
  return "mixed: see the counts";
}

std::string scope_table(const tracing::TraceReport& r) {
  TextTable t({"mode", "samples", "B before A", "host wait us", "complete at return",
               "B ahead of A us", "meaning"});
  for (const tracing::ScopeRow& row : r.scope) {
    t.add_row({mode_name(row.mode, row.poll_ms), std::to_string(row.samples),
               fmt::format("{}/{}", row.b_first, row.samples), median_spread_us(row.host_wait_us),
               fmt::format("{}/{}", row.complete_at_wait_return, row.samples),
               median_spread_us(row.b_before_a_us), scope_meaning(row)});
  }
  return fmt::format(
      "Stream scope ({} GPU sleep ahead of the input, {} collective; stream A waits on the "
      "collective's "
      "end event, stream B records a marker and waits on nothing; device times from CUDA "
      "events)\n{}",
      fmt::format("{:g} ms", r.meta.scope_sleep_ms), measure::format_byte_size(r.meta.scope_bytes),
      t.render());
}

template <typename T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json string_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json saved_run_json(const tracing::TraceReport& r) {
  if (!r.saved) return nullptr;
  return {{"saved_at", string_or_null(r.meta.saved_at)},
          {"hostname", string_or_null(r.meta.hostname)},
          {"commtool_version", string_or_null(r.meta.commtool_version)},
          {"started_at", string_or_null(r.meta.started_at)},
          {"warnings", r.saved_warnings}};
}

}  // namespace

std::string render_trace_text(const tracing::TraceReport& r) {
  std::string out = header(r) + "\n" + sizes_table(r);
  if (!r.splits.empty()) out += "\n" + splits_table(r);
  if (!r.splits.empty() && r.meta.nranks > 1) out += "\n" + start_lag_table(r);
  if (!r.scope.empty()) out += "\n" + scope_table(r);
  out += "\nNCCL profiler plugin: " + fmt::format("{}", fmt::join(r.plugin_status, "; ")) + "\n";
  if (!r.clock_notes.empty()) {
    out += fmt::format("Clocks: {}\n", fmt::join(r.clock_notes, "; "));
  }
  if (r.meta.cupti) out += fmt::format("CUPTI records analysed: {}\n", r.records);
  if (!r.warnings.empty()) {
    out += "Warnings\n";
    for (const std::string& w : r.warnings)
      out += "  - " + w + "\n";
    for (const std::string& a : r.advice)
      out += "  what to do: " + a + "\n";
  }
  return out;
}

json trace_to_json(const tracing::TraceReport& r) {
  json sizes = json::array();
  for (const tracing::SizeRow& row : r.sizes) {
    sizes.push_back({{"bytes", row.bytes},
                     {"count", row.count},
                     {"time_us", summary_json(row.time_us)},
                     {"algbw_gbps", row.algbw_gbps},
                     {"busbw_gbps", row.busbw_gbps},
                     {"wrong_elements", row.wrong_elements},
                     {"nccl_choice", to_string(row.nccl_choice)},
                     {"untraced_time_us",
                      row.untraced_time_us ? summary_json(*row.untraced_time_us) : json(nullptr)},
                     {"traced_over_untraced", optional_json(row.traced_over_untraced)},
                     {"host_call_delta_us", optional_json(row.host_call_delta_us)},
                     {"batch_us", row.batch_us ? summary_json(*row.batch_us) : json(nullptr)},
                     {"batch_busbw_gbps", optional_json(row.batch_busbw_gbps)}});
  }
  json splits = json::array();
  for (const tracing::SplitRow& row : r.splits) {
    splits.push_back(
        {{"bytes", row.bytes},
         {"mode", tracing::to_string(row.mode)},
         {"poll_ms", row.poll_ms},
         {"host_call_us", summary_json(row.host_call_us)},
         {"host_wait_us", summary_json(row.host_wait_us)},
         {"host_wait_polls", row.host_wait_polls},
         {"stream_dependency_us", summary_json(row.stream_dependency_us)},
         {"host_over_dependency", optional_json(row.host_over_dependency)},
         {"complete_at_wait_return", row.complete},
         {"operations", row.operations},
         {"kernel_us", summary_json(row.kernel_us)},
         {"exposed_wait_us", summary_json(row.exposed_wait_us)},
         {"input_wait_us", summary_json(row.input_wait_us)},
         {"start_spread_us",
          row.rank_start_lag_us.empty() ? json(nullptr) : summary_json(row.start_spread_us)},
         {"rank_start_lag_us", row.rank_start_lag_us}});
  }
  json scope = json::array();
  for (const tracing::ScopeRow& row : r.scope) {
    scope.push_back({{"mode", tracing::to_string(row.mode)},
                     {"poll_ms", row.poll_ms},
                     {"samples", row.samples},
                     {"b_before_a", row.b_first},
                     {"complete_at_wait_return", row.complete_at_wait_return},
                     {"host_wait_us", summary_json(row.host_wait_us)},
                     {"b_before_a_us", summary_json(row.b_before_a_us)}});
  }
  return {{"schema_version", 1},
          {"command", "trace"},
          {"collective", to_string(r.meta.collective)},
          {"dtype", to_string(r.meta.dtype)},
          {"op", to_string(r.meta.op)},
          {"inplace", r.meta.inplace},
          {"root", r.meta.root},
          {"nranks", r.meta.nranks},
          {"rank_placement", workers::to_json(r.placement)},
          {"comm", nccl::to_string(r.meta.comm)},
          {"iters", r.meta.iters},
          {"warmup", r.meta.warmup},
          {"batches", r.meta.batches},
          {"cupti", r.meta.cupti},
          {"nccl_version", r.meta.nccl_version},
          {"nccl_library", r.meta.nccl_library},
          {"commtool_version", string_or_null(r.meta.commtool_version)},
          {"started_at", string_or_null(r.meta.started_at)},
          {"hostname", string_or_null(r.meta.hostname)},
          {"saved_run", saved_run_json(r)},
          {"gpus", r.gpus},
          {"sizes", sizes},
          {"completion_split", splits},
          {"stream_scope", scope},
          {"plugin_status", r.plugin_status},
          {"clock_notes", r.clock_notes},
          {"records", r.records},
          {"warnings", r.warnings},
          {"advice", r.advice}};
}

json trace_run_to_chrome(const tracing::TraceRun& run) {
  std::vector<RankRecords> ranks;
  for (const tracing::RankRun& r : run.ranks)
    ranks.push_back({r.rank, &r.records});
  return chrome_trace(ranks);
}

}  // namespace commtool::reports
