// The worker side of `commtool diagnose ep`: the task "ep" runs this rank's part of every
// scenario's dispatch and combine exchanges (tracing/ep/ep_exchange.hpp) and returns the time of
// each measured operation. The launcher side is tracing/ep/ep_measure.hpp.
#pragma once

namespace commtool::tracing {

inline constexpr const char* kEpTask = "ep";

void register_ep_tasks();

}  // namespace commtool::tracing
