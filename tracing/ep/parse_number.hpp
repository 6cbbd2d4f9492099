// The one text-to-number rule diagnose ep's inputs share: --skew's parameters (ep_routing.cpp)
// and the fields of routing and placement files (routing_files.cpp). Kept in one place so a
// flag and a file accept numbers alike. Internal to tracing/ep/.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace commtool::tracing::ep_text {

// The whole of `text` as a number, or nullopt (from_chars: no locale, no leading '+').
template <class T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace commtool::tracing::ep_text
