#include "probes/base/measure/byte_size.hpp"

#include <fmt/format.h>

#include <cctype>
#include <limits>

#include "probes/base/error.hpp"

namespace commtool::measure {

uint64_t parse_byte_size(const std::string& option, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return usage_error(
        fmt::format("{} {}: {}; expected a byte count such as 512MiB, 64K, 1G or "
                    "1048576",
                    option, text.empty() ? "''" : text, why));
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0) throw bad("no number");
  if (digits > 19) throw bad("too large");
  uint64_t value = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  uint64_t scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k")
    scale = 1ULL << 10;
  else if (unit == "M" || unit == "MiB")
    scale = 1ULL << 20;
  else if (unit == "G" || unit == "GiB")
    scale = 1ULL << 30;
  else if (unit == "KB" || unit == "kB")
    scale = 1000ULL;
  else if (unit == "MB")
    scale = 1000ULL * 1000;
  else if (unit == "GB")
    scale = 1000ULL * 1000 * 1000;
  else
    throw bad("unknown unit '" + unit + "'");
  if (value > std::numeric_limits<uint64_t>::max() / scale) throw bad("too large");
  return value * scale;
}

std::string format_byte_size(uint64_t bytes) {
  if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ULL << 10) && bytes % (1ULL << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace commtool::measure
