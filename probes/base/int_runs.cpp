#include "probes/base/int_runs.hpp"

#include <algorithm>

namespace commtool {

std::string int_runs(std::vector<int> values, RunsStyle style) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1)
      ++j;
    if (!out.empty()) out += style.separator;
    out += std::to_string(values[i]);
    if (j == i + 1 && !style.pair_as_run) {
      out += style.separator;
      out += std::to_string(values[j]);
    } else if (j > i) {
      out += '-';
      out += std::to_string(values[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace commtool
