// Words and small figures the ep analysis and its renderers both use. Internal to reports/ep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reports/ep/ep_report.hpp"

namespace commtool::reports::ep_words {

inline constexpr double kMiB = 1024.0 * 1024.0;
// A measured ratio within this of 1 is reported as no measurable difference: on the H200,
// identical exchanges measured in turns gave medians 0.91-1.04x apart over 20 operations.
inline constexpr double kNoise = 0.10;
// Rank imbalance (max/mean - 1 of received tokens) from which it is a warning, not a note: the
// busiest rank has a fifth more to receive, and compute, than the mean rank, and every other
// rank waits for it. Uniform routing of DeepSeek-V3's defaults gives about 0.01.
inline constexpr double kImbalanceWarning = 0.20;

std::string mib(uint64_t bytes);                      // "296.21"
std::string and_list(const std::vector<int>& v);      // "1, 2 and 3"
std::string expert_ranges(std::vector<int> experts);  // contiguous runs: "0-31", "3, 7-9"
std::vector<std::vector<int>> experts_by_rank(const tracing::Placement& p);
const ScenarioFigures* find(const EpDiagnosis& d, tracing::EpScenarioKind kind);  // or null
double ratio(const PhaseFigures& a, const PhaseFigures& b);  // a's median time over b's; 0: none

}  // namespace commtool::reports::ep_words
