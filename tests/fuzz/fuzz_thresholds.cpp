// doctor's --thresholds file (probes/health/thresholds.hpp): any bytes either parse into
// thresholds that are all finite and non-negative, or are refused with exit 2 and a message
// that quotes no control character raw.
#include <cmath>

#include "fuzz_common.hpp"
#include "probes/base/error.hpp"
#include "probes/health/thresholds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  try {
    const commtool::health::Thresholds t = commtool::health::parse_thresholds(text, "fuzz.conf");
    for (const commtool::health::ThresholdInfo& i : commtool::health::describe(t)) {
      if (!std::isfinite(i.value) || i.value < 0) __builtin_trap();
    }
  } catch (const commtool::Error& e) {
    if (e.code() != commtool::ExitCode::kUsage) __builtin_trap();
    for (const char c : std::string(e.what()))
      if (static_cast<unsigned char>(c) < 0x20) __builtin_trap();
  }
  return 0;
}
