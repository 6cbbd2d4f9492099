#include "probes/base/error.hpp"

#include <fmt/format.h>

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

}  // namespace commtool
