#include "reports/ep/ep_words.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "probes/base/int_runs.hpp"

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
  std::string runs = int_runs(std::move(experts), {.separator = ", "});
  return runs.empty() ? "-" : runs;
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

double imbalance_noise(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  if (!s.routing.per_token() || m.ranks.empty()) return 0;
  const auto ranks = static_cast<double>(m.ranks.size());
  const double tokens = ranks * static_cast<double>(s.routing.tokens_per_rank);
  double received = 0;
  for (const tracing::RankLoad& r : m.ranks)
    received += static_cast<double>(r.tokens_received);
  const double mean = received / ranks;
  if (mean <= 0 || tokens <= 0) return 0;
  const double p = std::min(1.0, mean / tokens);
  const double variance = tokens * p * (1 - p);
  const double l = std::log(ranks / kImbalanceNoiseOdds);
  const double t = l / 3 + std::sqrt(l * l / 9 + 2 * l * variance);
  return t / mean;
}

ExpertNoise expert_noise(const EpSetup& s) {
  ExpertNoise n;
  const double experts = s.config.experts;
  if (experts <= 0) return n;
  const double tokens = static_cast<double>(s.routing.tokens_per_rank) * s.config.ranks;
  n.mean = tokens * s.config.topk / experts;
  n.generated = s.routing.per_token();
  if (!n.generated) return n;
  const double p = std::min(1.0, s.config.topk / experts);
  const double l = std::log(experts / kImbalanceNoiseOdds);
  n.hot_above = tokens * p + l / 3 + std::sqrt(l * l / 9 + 2 * l * tokens * p * (1 - p));
  // Chernoff's bound for k > D, in logs: -D + k (1 + ln D - ln k); it is 1 at k = D and falls.
  const double expected_dead = experts * std::pow(1 - p, tokens);
  if (expected_dead > 0) {
    const double log_d = std::log(expected_dead), log_odds = std::log(kImbalanceNoiseOdds);
    for (int k = 1; k <= s.config.experts; ++k) {
      if (k > expected_dead && -expected_dead + k * (1 + log_d - std::log(k)) <= log_odds) break;
      n.dead_up_to = k;
    }
  }
  return n;
}

double ratio(const PhaseFigures& a, const PhaseFigures& b) {
  return b.time_us.median > 0 ? a.time_us.median / b.time_us.median : 0.0;
}

}  // namespace commtool::reports::ep_words
