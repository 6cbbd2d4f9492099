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

}  // namespace commtool::reports
