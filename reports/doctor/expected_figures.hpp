// What a GPU model should give, for doctor's "is this number normal?": the PCIe link it trains
// at, its NVLinks and their rate per direction, and the all-reduce bus bandwidth of eight of them
// in one node as nccl-tests reports it. Each figure carries its source; a figure no public
// measurement gives is derived and says how, or is left out (0).
#pragma once

#include <string>
#include <vector>

namespace commtool::reports::doctor {

struct ModelFigures {
  std::string model;               // "H100 SXM"
  std::vector<std::string> names;  // substrings of NVML's name that mean this model
  int pcie_gen = 0;
  int pcie_width = 0;
  int nvlinks = 0;                       // links per GPU; 0: none (or a bridge, see nvlink_note)
  double nvlink_gbps_per_direction = 0;  // all links together, GB/s; 0 none
  double allreduce_busbw_8 = 0;          // nccl-tests all_reduce_perf busbw at 8 GPUs, large sizes
  std::string pcie_source;
  std::string nvlink_source;
  std::string allreduce_source;  // "" when allreduce_busbw_8 is 0: why not given
};

// The table: H100 SXM, H100 NVL, H100 PCIe, H200 NVL, H200, A100 SXM4, B200, L40S; the first
// row whose name NVML's contains is the model, so the PCIe forms come before their SXM kin.
const std::vector<ModelFigures>& model_figures();

// The row for a GPU named `nvml_name` ("NVIDIA H100 80GB HBM3"), or nullptr.
const ModelFigures* figures_for(const std::string& nvml_name);

}  // namespace commtool::reports::doctor
