// Runs of consecutive integers written short: ranks, CPUs, experts ("0-3,8,10-12"). Every list of
// ranks or indices commtool prints goes through here, so a large job's verdict stays one line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace commtool {

struct RunsStyle {
  std::string_view separator = ",";  // between runs: "," (the kernel's cpulist) or ", "
  bool pair_as_run = true;           // two in a row: "3-4", or "3,4" with the separator
};

// The values sorted, duplicates dropped, runs of two or more consecutive ones as "first-last".
// Empty for none.
std::string int_runs(std::vector<int> values, RunsStyle style = {});

}  // namespace commtool
