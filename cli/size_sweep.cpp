#include "cli/size_sweep.hpp"

#include <fmt/format.h>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"

namespace commtool::cli {

std::vector<uint64_t> size_sweep(const std::string& minbytes, const std::string& maxbytes,
                                 int stepfactor) {
  const uint64_t lo = measure::parse_byte_size("--minbytes", minbytes);
  const uint64_t hi = measure::parse_byte_size("--maxbytes", maxbytes);
  if (lo == 0) throw usage_error(fmt::format("--minbytes {}: must be at least 1 byte", minbytes));
  if (lo > hi) {
    throw usage_error(fmt::format("--minbytes {} is above --maxbytes {}: the sweep would be empty",
                                  minbytes, maxbytes));
  }
  // Stops before the product passes hi, so it can never wrap around 2^64 (which made sizes of
  // 0 B); at most 64 steps, from 1 B by 2.
  const auto step = static_cast<uint64_t>(stepfactor);
  std::vector<uint64_t> sizes;
  for (uint64_t b = lo;; b *= step) {
    sizes.push_back(b);
    if (b > hi / step) break;
  }
  return sizes;
}

}  // namespace commtool::cli
