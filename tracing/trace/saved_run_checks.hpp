// What load_run refuses in a saved run beyond malformed text: values no run can have, ranks
// that do not add up, records that do not match run.json. A saved run is input a user may
// have edited, copied in part or joined, and a value that flowed into a median would give a
// report that looks like any other; so each is an Error(kUsage) naming the file (and line, or
// JSON key path), the field, the value (an excerpt) and what is accepted.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracing/trace/trace_run.hpp"

namespace commtool::tracing {

// run.json's values: sizes a run of its collective, type and rank count can have; counts and
// times that are finite and not negative; every sample's size among the run's sizes and its
// mode among its modes; no operation sampled twice on a rank. `file` names run.json.
void check_run_values(const TraceRun& run, const std::string& file);

// The ranks run.json lists must be 0 .. nranks-1, each once, and every records file in the
// directory (`records_files`: each records-rank<R>.txt's path and the rank R it names, -1 for
// a number no rank has) one of them.
void check_ranks(const TraceRun& run,
                 const std::vector<std::pair<std::string, long long>>& records_files,
                 const std::string& dir);

// One rank's records against its samples: with CUPTI on, every operation mark is of a traced
// sample, and every traced sample has its mark. `text` is the records file's text, `file` its
// name. When the file's last line was cut off (cut_line > 0) marks may be missing: returns the
// warning to show instead, naming file and line; returns "" when the file was whole.
std::string check_rank_records(const RankRun& rank, const RunMeta& meta, std::string_view text,
                               const std::string& file, size_t cut_line);

}  // namespace commtool::tracing
