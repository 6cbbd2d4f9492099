// Reading a file a user names (a routing or placement file, an NCCL topology file, a saved
// run's files): only a regular file, and only up to a stated size, read whole. A character
// device (/dev/zero), a FIFO or a directory where a file is expected is refused with exit 2
// before anything is read, so an endless input cannot exhaust memory.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace commtool::files {

// The largest input commtool reads whole: far above any real routing file, topology file or
// saved run's metadata (a saved run's records file of 20 million records is about 1.5 GiB).
inline constexpr uint64_t kMaxInputBytes = 4ull << 30;

// The file's bytes. Throws usage_error naming the path: missing or unreadable, not a regular
// file (saying what it is), larger than `max_bytes` (saying both sizes).
std::string read_input_file(const std::string& path, uint64_t max_bytes = kMaxInputBytes);

// How deep a JSON document commtool reads may nest: every format it reads needs fewer than 8
// levels; far deeper input is refused as it is parsed, before anything walks it recursively
// (printing, comparing or freeing a value nested 100,000 deep overflows the stack).
inline constexpr int kMaxJsonDepth = 64;

// `text` parsed as JSON. Throws nlohmann::json::parse_error for malformed text (the callers say
// which file), and usage_error naming `source` for nesting deeper than kMaxJsonDepth and for a
// number beyond a double's range (1e400).
nlohmann::json parse_json_bounded(const std::string& text, const std::string& source);

}  // namespace commtool::files
