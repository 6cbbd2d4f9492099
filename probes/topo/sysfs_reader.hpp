// Reads the PCIe tree, GPUs and NICs from a sysfs tree: the live /sys, or a capture of another
// machine's (scripts/capture-sysfs.sh makes one; the tests use hand-built ones). It walks each
// device's realpath up through bridges to its root complex, as NCCL does.
#pragma once

#include <string>

#include "probes/topo/topology.hpp"

namespace commtool::topo {

struct SysfsOptions {
  std::string root = "/sys";
  // A root the user named must look like sysfs: a missing bus/pci/devices or a device without
  // its class file is bad input (exit 2). On the live /sys those are reported as missing.
  bool strict = false;
  std::string cpuinfo = "/proc/cpuinfo";  // read for the hypervisor flag; empty to skip
};

Topology read_sysfs(const SysfsOptions& options);

}  // namespace commtool::topo
