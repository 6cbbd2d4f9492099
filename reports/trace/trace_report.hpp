// `commtool trace` and `commtool report`: the analysed run as text tables and as JSON. Every
// interval is labelled with the clock it comes from; a host interval that contains polling
// sleeps says so.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tracing/trace/trace_analysis.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::reports {

std::string render_trace_text(const tracing::TraceReport& report);
nlohmann::json trace_to_json(const tracing::TraceReport& report);

// The Chrome/Perfetto trace of a run's records (reports/trace/chrome_trace.hpp), one process per
// rank.
nlohmann::json trace_run_to_chrome(const tracing::TraceRun& run);

}  // namespace commtool::reports
