// What every harness shares: the one rule a reader of outside input must keep. Bad input ends in
// commtool::Error (BadValue is one); anything else that escapes (another exception, a crash, a
// sanitizer report, a hang, runaway memory) is a finding and libFuzzer stops on it.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "probes/base/error.hpp"

namespace commtool::fuzz {

// Runs `read`; a commtool::Error is the expected answer to bad input. Returns whether it ran
// through without one.
template <class Read>
bool expect_error_or_value(Read&& read) {
  try {
    std::forward<Read>(read)();
    return true;
  } catch (const commtool::Error&) {
    return false;
  }
}

// The input as text.
inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Splits `text` at every `separator` into at least `parts` pieces (missing ones are empty), so
// one input can carry several fields: a harness's corpus stays plain text.
inline std::vector<std::string> split_fields(std::string_view text, char separator, size_t parts) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos || out.size() + 1 == parts) {
      out.emplace_back(text.substr(start));
      break;
    }
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  while (out.size() < parts)
    out.emplace_back();
  return out;
}

// A directory of this process's own under $TMPDIR (for harnesses whose reader reads files),
// removed when the fuzzer exits normally. One per process: the first call's prefix names it.
inline const std::filesystem::path& scratch_dir(const char* prefix) {
  static const std::filesystem::path* dir = [prefix] {
    std::string pattern =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    });
    return new std::filesystem::path(pattern);  // never freed: the exit handler needs it
  }();
  return *dir;
}

}  // namespace commtool::fuzz
