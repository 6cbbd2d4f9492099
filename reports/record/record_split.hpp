// The split `record --cupti` adds to a recording's operations: what the plugin's CUPTI layer
// wrote for a process (record::CuptiActivity: GPU work, stream waits, event records) joined to
// the operations the plugin recorded, on the process's host clock.
//
// How long a stream sat waiting, from records alone. A stream wait W (stream S waits for event
// E, queued with correlation id c at host time t) waits for the latest record of E queued
// before it; that record R (on stream P) completes when the work queued on P just before R ends
// (`done`). S reaches W when the work queued on S just before W has ended, and no earlier than
// t; the work queued on S just after W starts once W is satisfied. So S sat waiting
//     max(0, min(after.start, done) - max(before.end, t))
// and not at all when E was complete before S got there. Work before and after is by
// correlation id on the stream: CUPTI numbers host calls in the order they were made.
//
// An operation's parts, once it is matched to CUPTI's NCCL kernel K (on NCCL's stream N):
//   kernel       K's interval as CUPTI recorded it;
//   input wait   what the waits queued on N just before K waited: NCCL's stream waiting for
//                the operation's input (PyTorch makes it wait for the producing stream);
//   exposed wait what the waits on other streams for an event recorded on N just after K
//                waited, summed over those streams: the job's own streams held up by the
//                collective (PyTorch's work.wait() and async_op=False).
// Host enqueue is the plugin's own (api and enqueue intervals).
//
// Matching. An operation whose GPU stamps map onto the host clock is matched to the NCCL
// kernel it overlaps most, within kMatchSlackNs (the plugin's mapping and CUPTI's differ by a
// few microseconds, measured); the operations of one group launch share their kernel. An
// operation without stamps, or recorded after the layer yielded CUPTI, has no split.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "tracing/record/recording.hpp"

namespace commtool::reports {

inline constexpr int64_t kMatchSlackNs = 50'000;

struct OperationSplit {
  nccl_profiler::Interval kernel;  // CUPTI's, host clock
  int64_t input_wait_ns = 0;
  int64_t exposed_wait_ns = 0;
  int exposed_waits = 0;  // stream waits on the operation's end
};

class CuptiSplit {
 public:
  explicit CuptiSplit(const record::CuptiActivity& activity);

  // The split of an operation whose GPU interval, mapped onto the host clock, is `gpu`.
  std::optional<OperationSplit> of(const nccl_profiler::Interval& gpu) const;

  size_t nccl_kernels() const { return kernels_.size(); }

 private:
  struct Kernel {
    nccl_profiler::Interval gpu;
    int64_t input_wait_ns = 0;
    int64_t exposed_wait_ns = 0;
    int exposed_waits = 0;
  };
  std::vector<Kernel> kernels_;  // NCCL kernels by start
};

// How long stream `wait` sat waiting, from the work around it and around the event record it
// waits for (the rule above); none when that record or its work is not in the recording.
struct WaitOutcome {
  nccl_profiler::WaitLine wait;
  int64_t waited_ns = 0;
  std::optional<nccl_profiler::WorkLine> producer;  // the work the event completes with
  std::optional<nccl_profiler::WorkLine> after;     // the waiting stream's next work
};
std::vector<WaitOutcome> resolve_waits(const record::CuptiActivity& activity);

}  // namespace commtool::reports
