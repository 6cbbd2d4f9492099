// The lines of a `commtool record` recording (record_line.hpp), one per input line: each is
// not JSON (nullopt), a commtool::Error, or a record line that comes back unchanged through
// the plugin's writer and the reader again. parse_line's fast reader must agree with its slow
// one on every line: it either declines or returns exactly the slow reader's value, never a line
// the slow reader refuses (with an error or as not JSON); and it must take every line the
// writer wrote without escapes.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "tracing/profiler/record_line.hpp"

using namespace commtool::nccl_profiler;

namespace {

[[noreturn]] void disagree(std::string_view line, const char* what, const std::string& slow) {
  std::fprintf(stderr, "the fast and the slow reader disagree: %s\n%.*s\nslow reader: %s\n", what,
               static_cast<int>(line.size()), line.data(), slow.c_str());
  std::abort();
}

// The fast reader against the slow one on `line`.
void check_fast_reader(std::string_view line) {
  std::optional<RecordLine> fast;
  try {
    fast = detail::parse_line_fast(line);
  } catch (...) {
    disagree(line, "the fast reader threw", "-");
  }
  if (!fast) return;  // declined: parse_line asks the slow reader
  std::optional<RecordLine> slow;
  try {
    slow = detail::parse_line_slow(line);
  } catch (const commtool::Error& e) {
    disagree(line, "the fast reader took a line the slow one refuses", e.what());
  }
  if (!slow) disagree(line, "the fast reader took a line that is not JSON", "not JSON");
  if (*slow != *fast) {
    disagree(line, "they read different values",
             to_line(*slow) + "\nfast reader: " + to_line(*fast));
  }
}

// The writer escapes with '\\' only; a line without one and without bytes past ASCII is the
// plugin's plain form, which the fast reader exists to take.
bool plain(const std::string& written) {
  for (char c : written) {
    if (c == '\\' || static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    check_fast_reader(line);
    commtool::fuzz::expect_error_or_value([&] {
      const std::optional<RecordLine> parsed = parse_line(line);
      if (!parsed) return;
      const std::string written = to_line(*parsed);
      check_fast_reader(written);
      // record --cupti's rare state line is the slow reader's by design (record_line_keys.hpp).
      const bool slow_by_design = std::holds_alternative<CuptiLine>(*parsed);
      if (plain(written) && !slow_by_design && detail::parse_line_fast(written) != parsed) {
        std::fprintf(stderr, "the fast reader declined a plain line the writer wrote:\n%s\n",
                     written.c_str());
        std::abort();
      }
      std::optional<RecordLine> again;
      try {
        again = parse_line(written);
      } catch (const commtool::Error& e) {
        std::fprintf(stderr, "the reader refuses what the writer wrote: %s\n%s\n", e.what(),
                     written.c_str());
        std::abort();
      }
      if (!again || *again != *parsed) {
        std::fprintf(stderr, "a line changed on its way through the writer:\n%.*s\n%s\n",
                     static_cast<int>(line.size()), line.data(), written.c_str());
        std::abort();
      }
    });
  }
  return 0;
}
