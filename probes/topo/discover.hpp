// Where a Topology comes from: the live machine (sysfs + NVML + CUDA), a captured sysfs tree,
// or an NCCL topology file. The one entry point the CLI calls.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "probes/base/watchdog.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::topo {

struct DiscoverOptions {
  std::string nccl_xml;    // read this NCCL XML file instead of the machine
  std::string sysfs_root;  // read this captured sysfs tree instead of /sys
  // Called as each stage starts ("sysfs", "nvml", "cuda", "nccl-xml"), for timing and for a
  // watchdog to name what hung. String literals only.
  std::function<void(const char*)> on_stage;
  // false: never initialise CUDA in this process (the probe launcher, whose workers do the
  // CUDA work and can be killed when it hangs). P2P facts then stay unknown.
  bool ask_cuda = true;
};

Topology discover(const DiscoverOptions& options);

// discover() with each stage named to `watchdog` (NVML's and CUDA's as driver calls, which a
// sick GPU can hold forever), the GPUs of `devices` kept (empty: all), and with `timings` set,
// each stage's time written there as "topo: nvml took 3.1 ms". What `topo`, its cluster view and
// `doctor` start from.
Topology discover_watched(DiscoverOptions options, Watchdog& watchdog,
                          const std::vector<int>& devices, std::ostream* timings = nullptr);

// Keeps the GPUs whose index is listed (and the P2P facts between them). An index the
// topology lacks is bad input.
void select_gpus(Topology& topo, const std::vector<int>& indices);

// What a launcher (probe, trace, diagnose) starts from: the machine discovered without
// initialising CUDA in this process (its workers do the CUDA work and can be killed), the GPUs
// of `devices` kept (empty: all). Throws Error(kEnvironment) naming `command` when no GPU is
// left: "no NVIDIA GPU found: <command> needs one".
Topology discover_for_launcher(const std::vector<int>& devices, const std::string& command);

}  // namespace commtool::topo
