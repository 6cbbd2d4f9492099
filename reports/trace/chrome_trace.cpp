#include "reports/trace/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

namespace commtool::reports {

using nlohmann::json;
using tracing::RecordSet;

namespace {

// Stream tracks sit apart from host thread ids, which are small numbers in practice.
constexpr uint64_t kStreamTrackBase = 1ull << 32;

uint64_t earliest(const RecordSet& r) {
  uint64_t t = UINT64_MAX;
  for (const auto& w : r.gpu)
    t = std::min(t, w.start_ns);
  for (const auto& a : r.api)
    t = std::min(t, a.start_ns);
  for (const auto& op : r.operations)
    t = std::min(t, op.enqueue_start_ns);
  for (const auto& e : r.events)
    t = std::min(t, e.device_ns);
  return t;
}

std::string stream_name(const tracing::OperationMark* op, uint32_t stream) {
  if (op != nullptr) {
    if (stream == op->nccl_stream) return fmt::format("NCCL stream {}", stream);
    if (stream == op->producer_stream) return fmt::format("producer stream {}", stream);
    if (stream == op->consumer_stream) return fmt::format("consumer stream {}", stream);
  }
  return fmt::format("stream {}", stream);
}

class Writer {
 public:
  explicit Writer(uint64_t origin) : events_(origin) {}

  void rank(int pid, const RecordSet& r, const std::map<uint64_t, std::string>* names) {
    const tracing::OperationMark* op = r.operations.empty() ? nullptr : &r.operations.front();
    events_.meta(pid, 0, "process_name", fmt::format("rank {}", pid));
    std::set<uint64_t> tracks;
    for (const auto& a : r.api) {
      events_.span(pid, a.thread, a.name, "api", a.start_ns, a.end_ns);
      tracks.insert(a.thread);
    }
    for (const auto& range : r.ranges) {
      events_.span(
          pid, range.thread,
          range.domain.empty() ? range.name : fmt::format("{}: {}", range.domain, range.name),
          "nvtx", range.start_ns, range.end_ns);
      tracks.insert(range.thread);
    }
    for (const auto& o : r.operations) {
      std::string what = fmt::format("#{}", o.seq);
      if (names != nullptr) {
        if (auto it = names->find(o.seq); it != names->end()) what = it->second + " " + what;
      }
      events_.span(pid, o.thread, "enqueue " + what, "host", o.enqueue_start_ns, o.enqueue_end_ns);
      events_.span(
          pid, o.thread,
          fmt::format("wait {}{}", what, o.wait_polls ? " (host polling, not GPU time)" : ""),
          "host", o.wait_start_ns, o.wait_end_ns);
      tracks.insert(o.thread);
    }
    for (uint64_t t : tracks)
      events_.meta(pid, t, "thread_name", fmt::format("host thread {}", t));
    std::set<uint32_t> streams;
    for (const auto& w : r.gpu) {
      events_.span(pid, kStreamTrackBase + w.stream, w.name, "gpu", w.start_ns, w.end_ns);
      streams.insert(w.stream);
    }
    for (uint32_t s : streams)
      events_.meta(pid, kStreamTrackBase + s, "thread_name", stream_name(op, s));
    flows(pid, r);
  }

  json finish() { return events_.finish(); }

 private:
  // An arrow from an event's completion to the first work the waiting stream ran after its
  // wait call: that work could not start before the event completed, so the completion is the
  // latest one at or before it (events are re-recorded under one id every iteration). Both
  // lookups are binary searches: a run has tens of thousands of waits.
  void flows(int pid, const RecordSet& r) {
    std::map<uint32_t, std::vector<const tracing::GpuWork*>> by_stream;
    for (const auto& w : r.gpu)
      by_stream[w.stream].push_back(&w);
    for (auto& [s, v] : by_stream) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
    }
    std::map<uint32_t, std::vector<const tracing::EventCompletion*>> by_event;
    for (const auto& e : r.events)
      by_event[e.event].push_back(&e);
    for (auto& [id, v] : by_event) {
      std::sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->device_ns < b->device_ns; });
    }
    for (const auto& wait : r.stream_waits) {
      const auto& work = by_stream[wait.stream];
      auto next = std::lower_bound(work.begin(), work.end(), wait.end_ns,
                                   [](auto* w, uint64_t t) { return w->start_ns < t; });
      if (next == work.end()) continue;
      const auto& completions = by_event[wait.event];
      auto after = std::upper_bound(completions.begin(), completions.end(), (*next)->start_ns,
                                    [](uint64_t t, auto* e) { return t < e->device_ns; });
      if (after == completions.begin()) continue;
      const tracing::EventCompletion* done = *std::prev(after);
      const uint64_t id = ++flow_id_;
      const std::string name = fmt::format("event {}", wait.event);
      events_.add({{"ph", "s"},
                   {"id", id},
                   {"name", name},
                   {"cat", "dependency"},
                   {"pid", pid},
                   {"tid", kStreamTrackBase + done->stream},
                   {"ts", events_.us(done->device_ns)}});
      events_.add({{"ph", "f"},
                   {"bp", "e"},
                   {"id", id},
                   {"name", name},
                   {"cat", "dependency"},
                   {"pid", pid},
                   {"tid", kStreamTrackBase + wait.stream},
                   {"ts", events_.us((*next)->start_ns)}});
    }
  }

  TraceEvents events_;
  uint64_t flow_id_ = 0;
};

}  // namespace

void TraceEvents::meta(int pid, uint64_t tid, const char* what, const std::string& name) {
  events_.push_back(
      {{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
}

void TraceEvents::span(int pid, uint64_t tid, const std::string& name, const char* cat,
                       uint64_t start_ns, uint64_t end_ns) {
  events_.push_back(
      {{"ph", "X"},
       {"name", name},
       {"cat", cat},
       {"pid", pid},
       {"tid", tid},
       {"ts", us(start_ns)},
       {"dur", end_ns > start_ns ? static_cast<double>(end_ns - start_ns) / 1e3 : 0.0}});
}

json chrome_trace(const std::vector<RankRecords>& ranks) {
  uint64_t origin = UINT64_MAX;
  for (const RankRecords& r : ranks)
    origin = std::min(origin, earliest(*r.records));
  if (origin == UINT64_MAX) origin = 0;
  Writer w(origin);
  for (const RankRecords& r : ranks)
    w.rank(r.rank, *r.records, r.names);
  return w.finish();
}

}  // namespace commtool::reports
