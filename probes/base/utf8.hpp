// One UTF-8 decoder for every place that must tell well-formed text from bytes that are not:
// the message escaper (error.cpp) and the JSON lines the NCCL profiler plugin writes
// (tracing/profiler/record_line.cpp). Header-only, allocation-free: the plugin runs it on NCCL's
// threads and links nothing of probes/base but headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace commtool::utf8 {

struct Sequence {
  size_t length = 0;        // 0: no well-formed sequence starts here
  uint32_t code_point = 0;  // valid when length > 0
};

// The sequence at s[i] (i < s.size()): ASCII is one byte; a multi-byte sequence counts only when
// it is complete, of the shortest form, not a surrogate and at most U+10FFFF.
constexpr Sequence decode(std::string_view s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  if (lead < 0x80) return {1, lead};
  size_t length = 0;
  uint32_t code_point = 0;
  uint32_t smallest = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, code_point = lead & 0x1fu, smallest = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code_point = lead & 0x0fu, smallest = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code_point = lead & 0x07u, smallest = 0x10000;
  } else {
    return {};  // a continuation byte, or a lead no code point uses
  }
  if (i + length > s.size()) return {};
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(s[i + k]);
    if ((next & 0xc0) != 0x80) return {};
    code_point = (code_point << 6) | (next & 0x3fu);
  }
  const bool surrogate = code_point >= 0xd800 && code_point <= 0xdfff;
  if (code_point < smallest || code_point > 0x10ffff || surrogate) return {};
  return {length, code_point};
}

}  // namespace commtool::utf8
