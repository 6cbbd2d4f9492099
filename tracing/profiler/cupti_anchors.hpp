// Which of CUPTI's GPU work records `record --cupti` writes. A training job queues thousands of
// kernels a second; the report needs only some of them:
//  - every NCCL kernel (the collective's own interval);
//  - around every stream wait and event record ("marks"), the work queued on that stream just
//    before the mark and just after it. The work before an event record is what the event
//    waits for (when the collective's input was ready, when its output is); the work around a
//    wait says when the waiting stream reached the wait and when it went on. From these alone
//    the report derives how long each stream sat waiting (reports/record/record_split.hpp).
// "Before" and "after" are by correlation id: CUPTI numbers host calls in the order they were
// made, so on one stream they order work and marks as they were queued.
//
// Records arrive in CUPTI's buffer order, not queue order: a kernel's record is made when it
// has run, a mark's when its host call returns. So the work after a mark may arrive first, and
// the work before it may arrive after the mark. Each stream keeps its last few works and its
// marks still waiting for their "after" work; whatever arrives is matched both ways. Memory is
// bounded: kHistory works and kMaxPendingMarks marks per stream, kMaxStreams streams.
//
// Pure logic, no CUPTI: the plugin's CUPTI layer feeds it, the unit tests drive it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>

#include "tracing/profiler/record_line.hpp"

namespace commtool::nccl_profiler {

// Whether CUPTI's name for a kernel is one of NCCL's: "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
// or "ncclKernel_..." as written, or as the mangled C++ name CUPTI reports
// ("_Z29ncclDevKernel_AllReduce_...").
bool is_nccl_kernel_name(const char* name);

class WorkAnchors {
 public:
  static constexpr size_t kHistory = 8;
  static constexpr size_t kMaxPendingMarks = 64;
  static constexpr size_t kMaxStreams = 1024;

  // Receives each work line to write, once.
  using Emit = std::function<void(const WorkLine&)>;
  explicit WorkAnchors(Emit emit) : emit_(std::move(emit)) {}

  // A GPU work record arrived.
  void work(const WorkLine& w);
  // A wait or an event record on `stream` arrived, queued with `correlation`.
  void mark(const StreamId& stream, uint32_t correlation);
  // No more records will come (the process exits, or CUPTI is given up): writes the work
  // before every mark still waiting for its "after" work.
  void finish();

 private:
  struct Seen {
    WorkLine line;
    bool written = false;
  };
  struct Stream {
    std::deque<Seen> history;      // the last kHistory works, by arrival
    std::deque<uint32_t> pending;  // marks whose "after" work has not arrived
  };

  void write(Seen& s);
  // The work of `st` queued last before `correlation` and first after it, among those kept.
  static Seen* before(Stream& st, uint32_t correlation);
  static Seen* after(Stream& st, uint32_t correlation);
  Stream& stream(const StreamId& id);

  Emit emit_;
  std::map<StreamId, Stream> streams_;
};

}  // namespace commtool::nccl_profiler
