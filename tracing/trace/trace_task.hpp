// The worker side of `commtool trace`: the task "trace" runs one rank's collectives (an
// untraced pass, then a pass under CUPTI, then the --stream-scope samples) and returns its
// RankRun, records included, to the launcher (tracing/trace/trace_plan.hpp).
#pragma once

namespace commtool::tracing {

inline constexpr const char* kTraceTask = "trace";

void register_trace_tasks();

}  // namespace commtool::tracing
