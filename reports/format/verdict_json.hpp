// The cross-rank verdict (tracing/crossrank/crossrank.hpp) as JSON, the same in every report
// that gives one (a recording's, Flight Recorder dumps'): {"hang", "findings": [{"rule",
// "group", "group_name", "nranks", "position", "call", "ranks", "waiting",
// "waiting_since_wall_ns", "past", "sides", "field", "later_disagreements", "last_completed",
// "processes", "no_records", "text", "advice"}]}; unknowns are null. "advice" is the finding's
// next step (crossrank::finding_advice), as topo's findings carry theirs.
#pragma once

#include <nlohmann/json.hpp>

#include "tracing/crossrank/crossrank.hpp"

namespace commtool::reports {

nlohmann::json verdict_json(const crossrank::Job& job, const crossrank::Verdict& v);

}  // namespace commtool::reports
