#include "probes/base/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "probes/base/utf8.hpp"

namespace commtool {

std::string excerpt(std::string_view text, size_t max_chars) {
  std::string out;
  size_t shown = 0;
  for (; shown < text.size() && out.size() < max_chars; ++shown) {
    const auto c = static_cast<unsigned char>(text[shown]);
    if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

namespace {

// The length of the UTF-8 sequence at text[i] (text[i] >= 0x80) when it is a well-formed one of
// a printable code point (not a C1 control, U+0080..U+009F, which terminals read as commands),
// else 0.
size_t printable_utf8(std::string_view text, size_t i) {
  const utf8::Sequence seq = utf8::decode(text, i);
  return seq.code_point >= 0x80 && seq.code_point <= 0x9f ? 0 : seq.length;
}

}  // namespace

std::string printable_message(std::string_view message, bool one_line) {
  std::string out;
  out.reserve(message.size());
  size_t word_start = 0;  // in `out`: where the current run of non-blank characters began
  size_t word_bytes = 0;  // of `message` in that run
  size_t i = 0;
  auto end_word = [&] {
    if (word_bytes > kMaxWordBytes) {
      // Cut the escaped run back to its first 80 characters of output.
      out.resize(word_start + std::min<size_t>(80, out.size() - word_start));
      // Not in the middle of a UTF-8 sequence: drop its continuation bytes, then its lead.
      while (out.size() > word_start && (static_cast<unsigned char>(out.back()) & 0xc0) == 0x80)
        out.pop_back();
      if (out.size() > word_start && static_cast<unsigned char>(out.back()) >= 0xc0) out.pop_back();
      out += fmt::format("... ({} bytes)", word_bytes);
    }
    word_bytes = 0;
  };
  while (i < message.size()) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c == ' ' || (c == '\n' && !one_line)) {
      end_word();
      out += static_cast<char>(c);
      word_start = out.size();
      ++i;
      continue;
    }
    size_t n = c >= 0x20 && c < 0x7f ? 1 : c >= 0x80 ? printable_utf8(message, i) : 0;
    if (word_bytes <= kMaxWordBytes) {
      if (n == 0) {
        out += fmt::format("\\x{:02x}", c);
      } else {
        out.append(message.substr(i, n));
      }
    }
    n = std::max<size_t>(n, 1);
    word_bytes += n;
    i += n;
  }
  end_word();
  return out;
}

}  // namespace commtool
