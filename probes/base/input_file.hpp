// Reading a file a user names (a routing or placement file, an NCCL topology file, a saved
// run's files): only a regular file, and only up to a stated size, read whole. A character
// device (/dev/zero), a FIFO or a directory where a file is expected is refused with exit 2
// before anything is read, so an endless input cannot exhaust memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace commtool::files {

// The largest input commtool reads whole: far above any real routing file, topology file or
// saved run's metadata (a saved run's records file of 20 million records is about 1.5 GiB).
inline constexpr uint64_t kMaxInputBytes = 4ull << 30;

// The file's bytes. Throws usage_error naming the path: missing or unreadable, not a regular
// file (saying what it is), larger than `max_bytes` (saying both sizes).
std::string read_input_file(const std::string& path, uint64_t max_bytes = kMaxInputBytes);

// Whether anything is at path (a dangling link counts as nothing). Unlike
// std::filesystem::exists, which answers false when the lookup itself fails, a directory on the
// way that cannot be searched (mode 000, another user's) is an error naming the path and why:
// "missing" would send the user looking for a file that is there. Throws usage_error (exit 2:
// unreadable input).
bool input_exists(const std::string& path);

// A file another process is still appending to (a recording's procs/*.jsonl), read a piece at
// a time from where the last read stopped. Each read opens the file again and checks it as
// read_input_file does, so thousands of such files never hold thousands of descriptors, and a
// file replaced by something else is noticed.
class AppendedFile {
 public:
  explicit AppendedFile(std::string path, uint64_t max_bytes = kMaxInputBytes)
      : path_(std::move(path)), max_bytes_(max_bytes) {}

  // Appends to `out` at most `max_chunk` of the bytes written since the last call; returns how
  // many (0: nothing new). Throws usage_error naming the path: missing or unreadable, not a
  // regular file, larger than max_bytes, or shorter than what was already read (truncated).
  size_t read_more(std::string& out, size_t max_chunk);

  const std::string& path() const { return path_; }
  uint64_t offset() const { return offset_; }  // bytes read so far

 private:
  std::string path_;
  uint64_t max_bytes_;
  uint64_t offset_ = 0;
};

// How deep a JSON document commtool reads may nest: every format it reads needs fewer than 8
// levels; far deeper input is refused as it is parsed, before anything walks it recursively
// (printing, comparing or freeing a value nested 100,000 deep overflows the stack).
inline constexpr int kMaxJsonDepth = 64;

// `text` parsed as JSON. Throws nlohmann::json::parse_error for malformed text (the callers say
// which file), and usage_error naming `source` for nesting deeper than kMaxJsonDepth or a
// number no double holds (1e999: JSON has no infinity).
nlohmann::json parse_json_bounded(const std::string& text, const std::string& source);

// Whether nlohmann's get<T>() can turn `v` into T without undefined behaviour: a number for an
// arithmetic T only when it is in T's range (and whole for an integral T; nlohmann converts
// 4e30 into uint64_t with a plain cast), each element so for a std::vector<T>. Other types
// nlohmann checks itself (it throws on a string read as a bool).
template <class T>
bool json_fits(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    }
    if (!v.is_number_integer()) return false;
    const auto n = v.get<int64_t>();
    if constexpr (std::is_signed_v<T>) {
      return n >= std::numeric_limits<T>::min() && n <= std::numeric_limits<T>::max();
    } else {
      return n >= 0;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    return v.is_number() && std::isfinite(v.get<double>());
  } else if constexpr (requires { typename T::value_type; } &&
                       std::is_same_v<T, std::vector<typename T::value_type>>) {
    if (!v.is_array()) return false;
    for (const nlohmann::json& e : v) {
      if (!json_fits<typename T::value_type>(e)) return false;
    }
    return true;
  } else {
    return true;
  }
}

// j[key] of an object read from a file a user may have edited: a usage error naming the key
// when it is missing, or when `j` is no object.
const nlohmann::json& json_member(const nlohmann::json& j, const char* key);

// For formats read leniently (another tool's, whose keys drift between its releases): j[key],
// or null when `j` is no object or has no such key.
const nlohmann::json* find_member(const nlohmann::json& j, const char* key);

// j[key] as T where it is there and holds a T (a string for std::string; for a number, one
// json_fits says T holds), else none.
template <class T>
std::optional<T> member_as(const nlohmann::json& j, const char* key) {
  const nlohmann::json* v = find_member(j, key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (v == nullptr || !v->is_string()) return std::nullopt;
  } else {
    if (v == nullptr || !json_fits<T>(*v)) return std::nullopt;
  }
  return v->get<T>();
}

}  // namespace commtool::files
