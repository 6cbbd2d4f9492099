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
  std::vector<uint64_t> sizes;
  for (uint64_t b = lo; b <= hi; b *= static_cast<uint64_t>(stepfactor)) {
    sizes.push_back(b);
    if (sizes.size() > 64) break;
  }
  return sizes;
}

}  // namespace commtool::cli
