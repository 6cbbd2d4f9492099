// NVML, loaded with dlopen("libnvidia-ml.so.1") and declared here: the build machine has no
// nvml.h (NCCL does the same). Only the handful of entry points topo needs are declared; the
// layouts are those of NVML's public header since driver R450 (NVML_NVLINK_MAX_LINKS = 18).
#pragma once

#include "probes/topo/topology.hpp"

namespace commtool::topo {

// Adds what NVML knows to GPUs already found in sysfs: names, compute capability, PCIe link
// state when sysfs lacked it, NVLinks with their peers, and the driver version. Without NVML it
// records why in topo.missing and changes nothing else.
void enrich_with_nvml(Topology& topo);

}  // namespace commtool::topo
