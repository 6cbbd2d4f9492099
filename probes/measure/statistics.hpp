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

}  // namespace commtool::measure
