// --devices LIST: which GPUs a command uses.
#pragma once

#include <string>
#include <vector>

namespace commtool::cli {

// "all" -> {} (every GPU); "0,2,5", "0-3", "0-1,4" -> sorted unique indices. Anything else
// ("0,,3", "-1", "2-1", "x") throws usage_error naming the bad entry.
// allow_repeats keeps duplicates and order ("0,0,0": three ranks on GPU 0; "0-1,0-1": ranks
// on GPUs 0, 1, 0, 1).
std::vector<int> parse_device_list(const std::string& text, bool allow_repeats = false);

}  // namespace commtool::cli
