// From a TraceRun (measured now, or loaded by `commtool report DIR`) to the figures the report
// prints. Pure: the same run gives the same report on any machine.
//
// Per size: the collective's time (CUDA events around it on the NCCL stream, every rank's
// every measured operation; across ranks an operation takes as long as its slowest rank),
// algbw and busbw from the median, what NCCL chose, and the traced/untraced ratio. Per size and
// completion mode: the completion split (host enqueue, stream dependency, kernel, exposed wait)
// from the traced pass.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "probes/base/workers/placement.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::tracing {

// How NCCL ran the operations of one size, as commtool's profiler plugin recorded them.
struct NcclWay {
  std::string algo;   // NCCL's name: "RING", "TREE"; empty for point-to-point
  std::string proto;  // "LL", "LL128", "SIMPLE"
  int channels = 0;
  int operations = 0;  // how many operations, over every rank, ran this way
  auto operator<=>(const NcclWay&) const = default;
};

struct NcclChoice {
  std::vector<NcclWay> ways;  // empty: unknown
  std::string unknown_why;    // why not known ("not loaded: ..."), when `ways` is empty
  bool known() const { return !ways.empty(); }
};

// "RING/SIMPLE, 4 ch"; several ways "RING/LL, 1 ch x3; RING/SIMPLE, 2 ch x2"; point-to-point
// "p2p, 2 ch"; unknown "unknown (why)", or "unknown" without a reason.
std::string to_string(const NcclChoice& c);

struct SizeRow {
  uint64_t bytes = 0;
  uint64_t count = 0;        // elements, as the NCCL call was given
  measure::Summary time_us;  // the pass that was traced when there was one
  double algbw_gbps = 0;     // from the median time
  double busbw_gbps = 0;
  uint64_t wrong_elements = 0;
  NcclChoice nccl_choice;
  // Tracing's cost, when both passes ran: median traced / median untraced time, and the
  // difference of the median host calls.
  std::optional<double> traced_over_untraced;
  std::optional<double> host_call_delta_us;
  std::optional<measure::Summary> untraced_time_us;
  // nccl-tests' statistic, when batches ran: each batch's time over its operations, averaged
  // over the ranks (nccl-tests' default), summarised over the batches; busbw from its median.
  std::optional<measure::Summary> batch_us;
  std::optional<double> batch_busbw_gbps;
};

struct SplitRow {
  uint64_t bytes = 0;
  CompletionMode mode = CompletionMode::kSync;
  int poll_ms = 0;
  measure::Summary host_call_us;  // host enqueue
  measure::Summary host_wait_us;  // the completion step on the host (none for sync)
  bool host_wait_polls = false;   // host_wait_us includes sleeps: host time, not GPU time
  measure::Summary stream_dependency_us;
  std::optional<double> host_over_dependency;  // (host call + wait) / stream dependency
  int complete = 0;                            // operations complete when the host's wait returned
  int operations = 0;
  measure::Summary kernel_us;
  measure::Summary exposed_wait_us;
  measure::Summary input_wait_us;
  // Across ranks (empty at one rank): per operation, the last rank's kernel start minus the
  // first's; per rank, its median lag behind the first (tracing/trace/attribution.hpp, start_lags).
  measure::Summary start_spread_us;
  std::vector<double> rank_start_lag_us;
};

struct ScopeRow {
  CompletionMode mode = CompletionMode::kAsyncWait;
  int poll_ms = 0;
  int samples = 0;
  int b_first = 0;  // B's unordered marker finished before A's
  int complete_at_wait_return = 0;
  measure::Summary host_wait_us;
  measure::Summary b_before_a_us;
};

struct TraceReport {
  RunMeta meta;
  bool saved = false;                       // re-analysed from a saved run (commtool report)
  std::vector<std::string> saved_warnings;  // what loading it left out (TraceRun::warnings)
  workers::PlacementSummary placement;      // from the ranks' GPUs: shared GPU runs are labelled
  std::vector<std::string> gpus;            // "GPU0 0000:00:06.0 NVIDIA H200" by rank
  std::vector<SizeRow> sizes;
  std::vector<SplitRow> splits;  // empty when CUPTI was off
  std::vector<ScopeRow> scope;
  std::vector<std::string> plugin_status;  // distinct statuses over ranks
  std::vector<std::string> clock_notes;
  std::vector<std::string> warnings;  // saved_warnings, then attribution's with the rank
  // What to do about the warnings: one next step per kind of warning there is (a record file
  // cut short, CUPTI records missing or dropped), in that order; empty without warnings.
  std::vector<std::string> advice;
  uint64_t records = 0;  // CUPTI records analysed
};

TraceReport analyse(const TraceRun& run);

}  // namespace commtool::tracing
