// `commtool diagnose ep --placement FILE`: an expert-to-rank map (JSON or CSV). The expert and
// rank counts come from the command line; here from the input's first two bytes (1 to 256
// experts, 1 to 16 ranks), the file is the rest.
#include "fuzz_common.hpp"
#include "tracing/ep/ep_routing.hpp"

using namespace commtool::tracing;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int experts = 1 + data[0];
  const int ranks = 1 + data[1] % 16;
  const std::string text = commtool::fuzz::text_of(data + 2, size - 2);
  commtool::fuzz::expect_error_or_value([&] { parse_placement(text, "fuzz.csv", experts, ranks); });
  return 0;
}
