// The one trim of a line read from a file: blanks (space, tab) at both ends, and the '\r' a
// CRLF file leaves at its end. The kernel-log reader and the thresholds file use it.
#pragma once

#include <string_view>

namespace commtool {

inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace commtool
