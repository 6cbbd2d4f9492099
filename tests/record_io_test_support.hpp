// What the saved-run format's test files share: records and samples compared field by field, so
// a field the format forgets fails, and an operation mark with every field set.
#pragma once

#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "tracing/trace/record_io.hpp"

namespace record_io_test {

using namespace commtool::tracing;

inline constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

inline auto fields(const GpuWork& w) {
  return std::tie(w.kind, w.stream, w.correlation, w.start_ns, w.end_ns, w.name);
}
inline auto fields(const ApiCall& a) {
  return std::tie(a.correlation, a.thread, a.start_ns, a.end_ns, a.name);
}
inline auto fields(const StreamWaitCall& w) {
  return std::tie(w.stream, w.event, w.start_ns, w.end_ns);
}
inline auto fields(const EventCompletion& e) {
  return std::tie(e.event, e.stream, e.device_ns);
}
inline auto fields(const OperationMark& o) {
  return std::tie(o.seq, o.thread, o.producer_stream, o.nccl_stream, o.consumer_stream,
                  o.input_ready_event, o.end_event, o.enqueue_start_ns, o.enqueue_end_ns,
                  o.wait_start_ns, o.wait_end_ns, o.wait_polls, o.complete_at_wait_return);
}
inline auto fields(const HostRange& h) {
  return std::tie(h.thread, h.start_ns, h.end_ns, h.domain, h.name);
}

inline auto fields(const OperationSample& s) {
  return std::tie(s.seq, s.bytes, s.mode, s.poll_ms, s.traced, s.time_us, s.host_call_us,
                  s.wrong_elements);
}
inline auto fields(const StreamScopeSample& s) {
  return std::tie(s.seq, s.mode, s.poll_ms, s.host_wait_us, s.complete_at_wait_return,
                  s.b_before_a_us, s.wrong_elements);
}
inline auto fields(const commtool::nccl_profiler::CollectiveRecord& c) {
  return std::tie(c.comm_id, c.rank, c.nranks, c.seq, c.func, c.count, c.datatype, c.algo, c.proto,
                  c.channels, c.warps, c.start_ns, c.stop_ns);
}

// Field by field, so a field the format forgets fails here.
template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (fields(a[i]) != fields(b[i])) return false;
  }
  return true;
}

inline bool same(const RecordSet& a, const RecordSet& b) {
  return same(a.gpu, b.gpu) && same(a.api, b.api) && same(a.stream_waits, b.stream_waits) &&
         same(a.events, b.events) && same(a.operations, b.operations) && same(a.ranges, b.ranges) &&
         a.dropped_records == b.dropped_records;
}

inline OperationMark mark(uint64_t seq, int complete, bool polls) {
  OperationMark o;
  o.seq = seq;
  o.thread = 2;
  o.producer_stream = 3;
  o.nccl_stream = 4;
  o.consumer_stream = 5;
  o.input_ready_event = 6;
  o.end_event = 7;
  o.enqueue_start_ns = 8;
  o.enqueue_end_ns = 9;
  o.wait_start_ns = 10;
  o.wait_end_ns = 11;
  o.wait_polls = polls;
  o.complete_at_wait_return = complete;
  return o;
}

}  // namespace record_io_test
