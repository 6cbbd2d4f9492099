// The message-size sweep of trace and diagnose allreduce, as nccl-tests users give it: from
// -b to -e, multiplying by -f.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commtool::cli {

// Throws usage_error naming the value for a malformed size, 0, or min above max. Each size is
// the last times the factor and no size passes max, so none wraps around 2^64: at most 64
// sizes (1 B to 2^63 B by 2).
std::vector<uint64_t> size_sweep(const std::string& minbytes, const std::string& maxbytes,
                                 int stepfactor);

}  // namespace commtool::cli
