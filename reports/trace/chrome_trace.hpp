// Chrome/Perfetto trace JSON (the "Trace Event Format") of one run: a process per rank, a
// track for each host thread and each CUDA stream, an X event per API call, collective phase
// and GPU work, and a flow arrow from each event's completion to the work of the stream that
// waited for it. Timestamps in microseconds from the run's first record.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tracing/cupti/records.hpp"

namespace commtool::reports {

struct RankRecords {
  int rank = 0;
  const tracing::RecordSet* records = nullptr;
  // What each operation was, by seq ("routed dispatch"), for its host spans' names; an
  // operation without one is named by its seq alone.
  const std::map<uint64_t, std::string>* names = nullptr;
};

nlohmann::json chrome_trace(const std::vector<RankRecords>& ranks);

// The events of a trace being written, for every trace commtool writes (a run's records, a
// recording): names of processes and tracks, and spans, with timestamps in microseconds from
// `origin_ns`.
class TraceEvents {
 public:
  explicit TraceEvents(uint64_t origin_ns) : origin_(origin_ns) {}

  double us(uint64_t ns) const { return static_cast<double>(ns - origin_) / 1e3; }
  // A process's or a track's name ("process_name", "thread_name").
  void meta(int pid, uint64_t tid, const char* what, const std::string& name);
  void span(int pid, uint64_t tid, const std::string& name, const char* cat, uint64_t start_ns,
            uint64_t end_ns);
  void add(nlohmann::json event) { events_.push_back(std::move(event)); }
  // The document: {"traceEvents": [...], "displayTimeUnit": "ns"}.
  nlohmann::json finish() {
    return {{"traceEvents", std::move(events_)}, {"displayTimeUnit", "ns"}};
  }

 private:
  uint64_t origin_;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace commtool::reports
