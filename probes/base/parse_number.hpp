// The one text-to-number rule of what commtool reads: the whole text as a number, decimal, no
// locale, no leading '+' or blank. diagnose ep's --skew and its routing and placement files,
// NCCL topology files, launchers' variables and the kernel log accept numbers alike through it.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace commtool {

// The whole of `text` as a number, or nullopt (empty, other characters, out of T's range).
template <class T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace commtool
