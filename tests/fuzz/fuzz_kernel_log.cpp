// Kernel logs (probes/health/kernel_log.hpp) as doctor and a saved log give them: any bytes,
// every prefix form; the scan must never crash and never keep more than its bound.
#include "fuzz_common.hpp"
#include "probes/health/kernel_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  const commtool::health::KernelLogScan scan = commtool::health::scan_kernel_log(text);
  if (scan.events.size() > commtool::health::kMaxXidEvents) __builtin_trap();
  for (const auto& e : scan.events) {
    if (e.detail.size() > 400 || e.xid <= 0) __builtin_trap();
    (void)commtool::health::same_gpu(e, "0000:01:00.0");
  }
  return 0;
}
