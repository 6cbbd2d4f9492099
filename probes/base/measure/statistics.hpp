// Statistics of repeated measurements. Pure: the probes collect samples, this summarises them,
// reports print the summary with the statistic named.
#pragma once

#include <vector>

namespace commtool::measure {

struct Summary {
  int n = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 for n < 2
  double cv = 0;      // stddev / mean, as a fraction; 0 when mean is 0
  double p99 = 0;     // nearest-rank 99th percentile
};

// Empty input gives n = 0 and zeros.
Summary summarize(std::vector<double> samples);

// Per operation, the slowest rank's time, from each rank's own times of the same operations
// ([rank][operation]): a collective is as slow as its slowest rank. Ranks with fewer
// operations count only where they have them.
std::vector<double> slowest_per_operation(const std::vector<std::vector<double>>& rank_us);

}  // namespace commtool::measure
