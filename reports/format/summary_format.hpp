// How every report writes a measure::Summary: one text cell and one JSON object, so that a
// median with its spread reads the same in every table and every document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "probes/base/measure/statistics.hpp"

namespace commtool::reports {

// "median [min-max]" in microseconds, one decimal below 100 and none from there; "-" when
// nothing was measured.
std::string median_spread_us(const measure::Summary& s);

// {n, median, min, max, p99, cv}; null when nothing was measured.
nlohmann::json summary_json(const measure::Summary& s);

}  // namespace commtool::reports
