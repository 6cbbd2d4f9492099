#include "probes/base/measure/memory_limit.hpp"

#include <fmt/format.h>

#include <limits>

#include "probes/base/error.hpp"

namespace commtool::measure {

namespace {
constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kSaturated : out;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? kSaturated : out;
}

std::string approx_byte_size(uint64_t bytes) {
  if (bytes == kSaturated) return "16 EiB or more";
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (unit < 5 && bytes >> (10 * (unit + 2)) != 0)
    ++unit;
  const int shift = 10 * (unit + 1);
  if (bytes % (uint64_t{1} << shift) == 0) return fmt::format("{} {}", bytes >> shift, units[unit]);
  return fmt::format("{:.1f} {}",
                     static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << shift),
                     units[unit]);
}

void check_memory(const std::string& field, const std::string& value, uint64_t bytes,
                  uint64_t limit, const std::string& what) {
  if (bytes <= limit) return;
  throw bad_value(field, value,
                  fmt::format("{} would need {}; the limit is {}", what, approx_byte_size(bytes),
                              approx_byte_size(limit)));
}

}  // namespace commtool::measure
