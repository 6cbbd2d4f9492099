#include "reports/doctor/expected_figures.hpp"

namespace commtool::reports::doctor {

namespace {

// The ratio NCCL's maintainer gives for NVLink's protocol overhead on H100: "450GB/s is the line
// rate ... NCCL can get an effective NVLink bandwidth of 370GB/s" (NVIDIA/nccl-tests#212).
constexpr const char* kRingDerived =
    "derived: NVLink per direction x 370/450, the effective share NCCL's maintainer gives for "
    "H100 (NVIDIA/nccl-tests#212); no public 8-GPU measurement found";

}  // namespace

const std::vector<ModelFigures>& model_figures() {
  static const std::vector<ModelFigures> table = {
      {"H100 SXM",
       {"H100 80GB HBM3", "H100 SXM"},
       5,
       16,
       18,
       450,
       480,
       "NVIDIA H100 datasheet: PCIe Gen5 x16",
       "NVIDIA H100 datasheet: NVLink 900 GB/s (both directions), 18 NVLink4 links",
       "NVIDIA/nccl-tests#212: ~480 GB/s peak busbw at 8 GPUs with NVLink SHARP (370 without)"},
      {"H100 NVL",
       {"H100 NVL"},
       5,
       16,
       0,
       300,
       0,
       "NVIDIA H100 NVL datasheet: PCIe Gen5 x16",
       "NVIDIA H100 NVL datasheet: NVLink bridge 600 GB/s (both directions), between pairs",
       "not given: the bridge joins pairs, eight GPUs meet over PCIe"},
      {"H100 PCIe",
       {"H100 PCIe"},
       5,
       16,
       0,
       300,
       0,
       "NVIDIA H100 PCIe datasheet: PCIe Gen5 x16",
       "NVIDIA H100 PCIe datasheet: NVLink bridge 600 GB/s (both directions), between pairs; "
       "115 GB/s all-reduce busbw over one bridge (NVIDIA/nccl-tests#194)",
       "not given: the bridge joins pairs, eight GPUs meet over PCIe"},
      {"H200 NVL",
       {"H200 NVL"},
       5,
       16,
       0,
       0,
       0,
       "NVIDIA H200 NVL datasheet: PCIe Gen5 x16",
       "not given: its NVLink bridges (2 or 4 GPUs) are not in commtool's table",
       "not given: the bridges join 2 or 4 GPUs, eight meet over PCIe"},
      {"H200",
       {"H200"},
       5,
       16,
       18,
       450,
       475,
       "NVIDIA H200 datasheet: PCIe Gen5 x16",
       "NVIDIA H200 datasheet: NVLink 900 GB/s (both directions), 18 NVLink4 links",
       "NVIDIA/nccl-tests#272: 475 GB/s peak busbw, 8 H200 in one node (NCCL 2.20.3)"},
      {"A100 SXM4",
       {"A100-SXM4", "A100 SXM4"},
       4,
       16,
       12,
       300,
       300 * 370.0 / 450,
       "NVIDIA A100 datasheet: PCIe Gen4 x16",
       "NVIDIA A100 datasheet: NVLink 600 GB/s (both directions), 12 NVLink3 links",
       kRingDerived},
      {"B200",
       {"B200"},
       5,
       16,
       18,
       900,
       900 * 370.0 / 450,
       "NVIDIA HGX B200: PCIe Gen5 x16 to the host",
       "NVIDIA Blackwell datasheet: NVLink 1.8 TB/s (both directions), 18 NVLink5 links",
       kRingDerived},
      {"L40S",
       {"L40S"},
       4,
       16,
       0,
       0,
       0,
       "NVIDIA L40S datasheet: PCIe Gen4 x16",
       "NVIDIA L40S datasheet: no NVLink",
       "not given: PCIe only, the figure depends on the node's PCIe tree and CPUs"},
  };
  return table;
}

const ModelFigures* figures_for(const std::string& nvml_name) {
  for (const ModelFigures& m : model_figures()) {
    for (const std::string& n : m.names)
      if (nvml_name.find(n) != std::string::npos) return &m;
  }
  return nullptr;
}

}  // namespace commtool::reports::doctor
