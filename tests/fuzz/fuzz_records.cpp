// A saved run's records-rank<R>.txt (and the records a worker's result carries): parsed, and
// what the reader accepts must come back unchanged through the writer and the reader again.
#include <cstdio>
#include <cstdlib>

#include "fuzz_common.hpp"
#include "tracing/trace/record_io.hpp"

using namespace commtool::tracing;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  commtool::fuzz::expect_error_or_value([&] {
    RecordSet records = parse_records(text, "fuzz.txt");
    const std::string written = serialize_records(records);
    try {
      const std::string again = serialize_records(parse_records(written, "rewritten"));
      if (again != written) {
        std::fprintf(stderr, "records changed on a second write:\n%s\n---\n%s\n", written.c_str(),
                     again.c_str());
        std::abort();
      }
    } catch (const commtool::Error& e) {
      std::fprintf(stderr, "the reader refuses what the writer wrote: %s\n", e.what());
      std::abort();
    }
  });
  return 0;
}
