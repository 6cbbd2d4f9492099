#include "reports/ep/ep_words.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace commtool::reports::ep_words {

using tracing::EpScenarioKind;

std::string mib(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / kMiB);
}

std::string and_list(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += i + 1 == v.size() ? " and " : ", ";
    out += std::to_string(v[i]);
  }
  return out;
}

std::string expert_ranges(std::vector<int> experts) {
  std::sort(experts.begin(), experts.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < experts.size();) {
    size_t j = i;
    while (j + 1 < experts.size() && experts[j + 1] == experts[j] + 1)
      ++j;
    parts.push_back(i == j ? std::to_string(experts[i])
                           : fmt::format("{}-{}", experts[i], experts[j]));
    i = j + 1;
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<std::vector<int>> experts_by_rank(const tracing::Placement& p) {
  std::vector<std::vector<int>> out(static_cast<size_t>(p.ranks));
  for (size_t e = 0; e < p.holders.size(); ++e) {
    for (int r : p.holders[e])
      out[static_cast<size_t>(r)].push_back(static_cast<int>(e));
  }
  return out;
}

const ScenarioFigures* find(const EpDiagnosis& d, EpScenarioKind kind) {
  for (const ScenarioFigures& s : d.scenarios) {
    if (s.kind == kind) return &s;
  }
  return nullptr;
}

double ratio(const PhaseFigures& a, const PhaseFigures& b) {
  return b.time_us.median > 0 ? a.time_us.median / b.time_us.median : 0.0;
}

}  // namespace commtool::reports::ep_words
