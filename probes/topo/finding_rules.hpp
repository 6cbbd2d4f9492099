// The rules behind find_problems, one function per family, so that each file reads as a list.
// Internal to probes/topo: callers use find_problems (findings.hpp).
#pragma once

#include <string>
#include <vector>

#include "probes/topo/classify.hpp"

namespace commtool::topo::rules {

std::string gpu_name(const Gpu& g);

// GPUs that CUDA, NVML or NCCL cannot use: none on the bus, none bound to the nvidia driver,
// NVML or CUDA failing while GPUs are there.
void driver_findings(const Topology& topo, std::vector<Finding>& out);

// Like against like within the machine: a GPU whose PCIe link, NVLink count or nearest NIC is
// worse than that of GPUs of the same model. `far`: gpus_with_farther_nic(topo, a).
void peer_findings(const Topology& topo, const Analysis& a, const std::vector<int>& far,
                   std::vector<Finding>& out);

// NVLinks that point at a GPU the topology lacks, or that two GPUs count differently.
void nvlink_symmetry_findings(const Topology& topo, std::vector<Finding>& out);

// GPUs that share their nearest NIC while other GPUs of the node have one to fewer sharers
// (two GPUs behind one switch with one NIC, every other GPU with its own): in a collective
// across nodes each GPU gets its NIC's rate divided by the GPUs on it, so the crowded ones are
// the slow ranks. A warning with the rate each GPU can expect.
void nic_sharing_findings(const Topology& topo, const Analysis& a, std::vector<Finding>& out);

// Indices (Gpu::index) of GPUs whose nearest NIC is farther than that of their peers; the
// general "NIC behind the CPU" note is not repeated for them.
std::vector<int> gpus_with_farther_nic(const Topology& topo, const Analysis& a);

}  // namespace commtool::topo::rules
