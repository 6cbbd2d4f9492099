// The lines of a `commtool record` recording (record_line.hpp), one per input line: each is
// not JSON (nullopt), a commtool::Error, or a record line that comes back unchanged through
// the plugin's writer and the reader again.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz_common.hpp"
#include "tracing/profiler/record_line.hpp"

using namespace commtool::nccl_profiler;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    commtool::fuzz::expect_error_or_value([&] {
      const std::optional<RecordLine> parsed = parse_line(line);
      if (!parsed) return;
      const std::string written = to_line(*parsed);
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
