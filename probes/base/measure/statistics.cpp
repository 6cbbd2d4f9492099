#include "probes/base/measure/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace commtool::measure {

std::vector<double> slowest_per_operation(const std::vector<std::vector<double>>& rank_us) {
  std::vector<double> out;
  for (const auto& rank : rank_us) {
    if (out.size() < rank.size()) out.resize(rank.size(), 0.0);
    for (size_t i = 0; i < rank.size(); ++i)
      out[i] = std::max(out[i], rank[i]);
  }
  return out;
}

Summary summarize(std::vector<double> samples) {
  Summary s;
  s.n = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  if (n > 1) {
    double sq = 0;
    for (double x : samples)
      sq += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(n - 1));
  }
  s.cv = s.mean != 0 ? s.stddev / s.mean : 0;
  // Nearest rank: the smallest sample with at least 99% of samples at or below it.
  size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n)));
  s.p99 = samples[std::clamp<size_t>(rank, 1, n) - 1];
  return s;
}

}  // namespace commtool::measure
