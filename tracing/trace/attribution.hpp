// Turns one run's records into per-operation intervals, keeping the completion levels of
// tracing/trace/trace_run.hpp apart: what the host saw (enqueue, the wait call) is never labelled
// GPU time, and a host interval that contains polling sleeps says so. Pure: tests feed it synthetic
// record streams.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tracing/cupti/records.hpp"

namespace commtool::tracing {

struct OperationIntervals {
  uint64_t seq = 0;
  double host_enqueue_us = 0;    // host call that queued the collective
  double host_wait_us = 0;       // the completion step on the host (sync, poll loop, ...)
  bool host_wait_polls = false;  // host_wait_us includes sleeps between polls: not GPU time
  // GPU intervals; empty when a record they need is missing (see warnings).
  std::optional<double> input_wait_us;    // NCCL stream idle, waiting for the input-ready event
  std::optional<double> kernel_us;        // first to last GPU work of the collective
  std::optional<double> exposed_wait_us;  // consumer stream idle, waiting for the end event
  std::optional<double> stream_dependency_us;  // input ready -> consumer's first GPU work after
  int gpu_work_count = 0;                      // kernels + copies attributed to the collective
  std::optional<uint64_t> kernel_start_ns;     // when the first of them started (the timeline
                                               // of the records: CLOCK_MONOTONIC)
  bool launched_by_other_thread = false;  // some of it was launched by another host thread than
                                          // the enqueue's: NCCL's own, for a non-blocking
                                          // communicator's group
  std::optional<bool> complete_at_wait_return;
};

struct Attribution {
  std::vector<OperationIntervals> operations;  // in seq order
  std::vector<std::string> warnings;           // missing records, dropped records
};

Attribution attribute(const RecordSet& records);

// One operation across ranks: when each rank's GPU work started (kernel_start_ns, by rank;
// empty where a rank's records lack it) as lags behind the first rank to start, and the spread
// from first to last. The ranks' records share CLOCK_MONOTONIC, so these compare across ranks;
// a rank that starts late holds every peer's kernel up. Nullopt when no rank has a start.
struct StartLags {
  double spread_us = 0;
  std::vector<std::optional<double>> lag_us;  // by rank
};
std::optional<StartLags> start_lags(const std::vector<std::optional<uint64_t>>& start_ns);

}  // namespace commtool::tracing
