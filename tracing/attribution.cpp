#include "tracing/attribution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace commtool::tracing {

namespace {

double us(uint64_t from, uint64_t to) {
  return to > from ? static_cast<double>(to - from) / 1e3 : 0.0;
}

// Indexes built once per run, so attribution is linear in the records (it must keep up with
// millions of records per second when re-analysing a saved run).
struct Index {
  std::map<uint32_t, std::vector<const GpuWork*>> by_correlation;
  std::map<uint32_t, std::vector<const GpuWork*>> by_stream;      // sorted by start
  std::map<uint32_t, std::vector<const ApiCall*>> api_by_thread;  // sorted by start
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const StreamWaitCall*>>
      waits;                                                       // stream, event
  std::map<uint32_t, std::vector<const EventCompletion*>> events;  // by event id, sorted

  explicit Index(const RecordSet& r) {
    for (const GpuWork& w : r.gpu) {
      by_correlation[w.correlation].push_back(&w);
      by_stream[w.stream].push_back(&w);
    }
    for (auto& [s, v] : by_stream) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    }
    for (const ApiCall& a : r.api)
      api_by_thread[a.thread].push_back(&a);
    for (auto& [t, v] : api_by_thread) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    }
    for (const StreamWaitCall& w : r.stream_waits)
      waits[{w.stream, w.event}].push_back(&w);
    for (const EventCompletion& e : r.events)
      events[e.event].push_back(&e);
    for (auto& [id, v] : events) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->device_ns < b->device_ns; });
    }
  }

  // An event is re-recorded every iteration under one id: these pick the completion that
  // belongs to the operation by where it must fall.
  const EventCompletion* event_last_at_or_before(uint32_t id, uint64_t t) const {
    auto it = events.find(id);
    if (it == events.end()) return nullptr;
    const EventCompletion* found = nullptr;
    for (const EventCompletion* e : it->second) {
      if (e->device_ns > t) break;
      found = e;
    }
    return found;
  }
  const EventCompletion* event_first_at_or_after(uint32_t id, uint64_t t) const {
    auto it = events.find(id);
    if (it == events.end()) return nullptr;
    for (const EventCompletion* e : it->second) {
      if (e->device_ns >= t) return e;
    }
    return nullptr;
  }

  // The stream-wait call for (stream, event) issued in [from, to] on the host.
  const StreamWaitCall* wait_between(uint32_t stream, uint32_t event, uint64_t from,
                                     uint64_t to) const {
    auto it = waits.find({stream, event});
    if (it == waits.end()) return nullptr;
    for (const StreamWaitCall* w : it->second) {
      if (w->start_ns >= from && w->start_ns <= to) return w;
    }
    return nullptr;
  }

  // When `stream` became free for new work at or after `t`: the end of the last GPU work on it
  // that started before t.
  uint64_t stream_free_at(uint32_t stream, uint64_t t) const {
    uint64_t free_at = t;
    auto it = by_stream.find(stream);
    if (it == by_stream.end()) return free_at;
    for (const GpuWork* w : it->second) {
      if (w->start_ns >= t) break;
      free_at = std::max(free_at, w->end_ns);
    }
    return free_at;
  }

  const GpuWork* first_work_after(uint32_t stream, uint64_t t) const {
    auto it = by_stream.find(stream);
    if (it == by_stream.end()) return nullptr;
    for (const GpuWork* w : it->second) {
      if (w->start_ns >= t) return w;
    }
    return nullptr;
  }
};

void attribute_one(const Index& ix, const OperationMark& op, OperationIntervals& out,
                   std::vector<std::string>& warnings) {
  out.seq = op.seq;
  out.host_enqueue_us = us(op.enqueue_start_ns, op.enqueue_end_ns);
  out.host_wait_us = us(op.wait_start_ns, op.wait_end_ns);
  out.host_wait_polls = op.wait_polls;
  auto missing = [&](const std::string& what) {
    warnings.push_back(fmt::format("operation {}: {}", op.seq, what));
  };

  // The collective's GPU work: everything queued on the NCCL stream by the API calls its
  // thread made during the enqueue (kernels; on one rank NCCL only copies).
  uint64_t first = UINT64_MAX, last = 0;
  if (auto it = ix.api_by_thread.find(op.thread); it != ix.api_by_thread.end()) {
    for (const ApiCall* call : it->second) {
      if (call->start_ns < op.enqueue_start_ns) continue;
      if (call->start_ns > op.enqueue_end_ns) break;
      auto work = ix.by_correlation.find(call->correlation);
      if (work == ix.by_correlation.end()) continue;
      for (const GpuWork* w : work->second) {
        if (w->stream != op.nccl_stream) continue;
        first = std::min(first, w->start_ns);
        last = std::max(last, w->end_ns);
        ++out.gpu_work_count;
      }
    }
  }
  if (out.gpu_work_count > 0) {
    out.kernel_us = us(first, last);
  } else {
    missing("no GPU work found on the NCCL stream (kernel or copy records missing)");
  }

  // The input was ready when its event completed; NCCL's work cannot start before that.
  const EventCompletion* input = ix.event_last_at_or_before(
      op.input_ready_event, out.gpu_work_count > 0 ? first : op.wait_end_ns);
  const StreamWaitCall* nccl_wait =
      ix.wait_between(op.nccl_stream, op.input_ready_event, op.enqueue_start_ns, op.enqueue_end_ns);
  if (input && nccl_wait) {
    uint64_t idle_from = ix.stream_free_at(op.nccl_stream, nccl_wait->end_ns);
    out.input_wait_us = us(idle_from, input->device_ns);
  } else {
    missing(input ? "no stream-wait record for the input-ready event"
                  : "no device timestamp for the input-ready event");
  }

  // The end event completes after the collective's last GPU work.
  const EventCompletion* end =
      ix.event_first_at_or_after(op.end_event, out.gpu_work_count > 0 ? last : op.enqueue_start_ns);
  if (!end) {
    missing("no device timestamp for the end event");
    return;
  }
  if (const StreamWaitCall* consumer_wait =
          ix.wait_between(op.consumer_stream, op.end_event, op.enqueue_start_ns, op.wait_end_ns)) {
    uint64_t idle_from = ix.stream_free_at(op.consumer_stream, consumer_wait->end_ns);
    out.exposed_wait_us = us(idle_from, end->device_ns);
  }
  out.complete_at_wait_return = op.complete_at_wait_return >= 0 ? op.complete_at_wait_return == 1
                                                                : end->device_ns <= op.wait_end_ns;
  const GpuWork* next = ix.first_work_after(op.consumer_stream, end->device_ns);
  if (input && next) out.stream_dependency_us = us(input->device_ns, next->start_ns);
}

}  // namespace

Attribution attribute(const RecordSet& records) {
  Attribution a;
  if (records.dropped_records > 0) {
    a.warnings.push_back(fmt::format(
        "CUPTI dropped {} activity records: intervals may be missing or short; give the run "
        "fewer iterations or larger activity buffers",
        records.dropped_records));
  }
  Index ix(records);
  std::vector<const OperationMark*> ops;
  for (const OperationMark& op : records.operations)
    ops.push_back(&op);
  std::sort(ops.begin(), ops.end(), [](auto* x, auto* y) { return x->seq < y->seq; });
  for (const OperationMark* op : ops) {
    a.operations.emplace_back();
    attribute_one(ix, *op, a.operations.back(), a.warnings);
  }
  return a;
}

}  // namespace commtool::tracing
