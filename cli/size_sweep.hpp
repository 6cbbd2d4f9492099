// The message-size sweep of trace and diagnose allreduce, as nccl-tests users give it: from
// -b to -e, multiplying by -f.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commtool::cli {

// Throws usage_error naming the value for a malformed size, 0, or min above max. At most 65
// sizes.
std::vector<uint64_t> size_sweep(const std::string& minbytes, const std::string& maxbytes,
                                 int stepfactor);

}  // namespace commtool::cli
