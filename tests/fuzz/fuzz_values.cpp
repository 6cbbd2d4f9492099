// Values users type and short texts commtool reads, each through the parser the command uses:
// --devices, -b/-e/-f (the size sweep), --size, --skew, --fault, an NCCL cpumask, a sysfs
// cpulist, a PCI bus id, a PCIe link speed, a profiler plugin's record line. The first byte
// picks the parser, the rest is the text.
#include "cli/device_list.hpp"
#include "cli/size_sweep.hpp"
#include "fuzz_common.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/topo/link_rate.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "probes/topo/topology.hpp"
#include "tracing/ep/ep_routing.hpp"
#include "tracing/profiler/collective_record.hpp"
#include "tracing/trace/fault.hpp"

using commtool::fuzz::expect_error_or_value;

namespace {

void parse_one(uint8_t which, const std::string& text) {
  switch (which % 10) {
    case 0:
      expect_error_or_value([&] { commtool::cli::parse_device_list(text); });
      expect_error_or_value([&] { commtool::cli::parse_device_list(text, true); });
      return;
    case 1: {  // "MIN\nMAX\nFACTOR-BYTE"; the CLI holds -f to 2..1024
      auto f = commtool::fuzz::split_fields(text, '\n', 3);
      const int factor = 2 + (f[2].empty() ? 0 : static_cast<uint8_t>(f[2][0]) * 4);
      expect_error_or_value([&] { commtool::cli::size_sweep(f[0], f[1], factor); });
      return;
    }
    case 2:
      expect_error_or_value([&] { commtool::measure::parse_byte_size("--size", text); });
      return;
    case 3:
      expect_error_or_value([&] {
        commtool::tracing::Skew skew = commtool::tracing::parse_skew(text);
        commtool::tracing::to_string(skew);
        commtool::tracing::draw_probabilities(skew, 256);
      });
      return;
    case 4:
      expect_error_or_value([&] {
        auto fault = commtool::tracing::parse_fault(text);
        commtool::tracing::fault_from_json(commtool::tracing::to_json(fault));
      });
      return;
    case 5:
      expect_error_or_value([&] { commtool::topo::cpumask_to_cpulist(text); });
      return;
    case 6:
      commtool::topo::parse_cpulist(text);
      return;
    case 7:
      commtool::topo::canonical_bdf(text);
      return;
    case 8:
      commtool::topo::pcie_gen_from_speed(text);
      return;
    case 9:
      commtool::nccl_profiler::parse_json_line(text);
      return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  parse_one(data[0], commtool::fuzz::text_of(data + 1, size - 1));
  return 0;
}
