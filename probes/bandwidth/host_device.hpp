// Host<->device probes of one GPU: bandwidth (--h2d) and latency (--latency). Run inside the
// worker that owns the GPU; expected rates are added by the launcher from the topology.
#pragma once

#include <string>
#include <vector>

#include "probes/bandwidth/copy_runner.hpp"
#include "probes/bandwidth/measurement.hpp"

namespace commtool::probe {

struct GpuPlacement {
  int index = 0;        // commtool's GPU index (PCI order), used in results
  int cuda_device = 0;  // the CUDA ordinal in this process
  int numa_node = -1;   // where pinned host memory goes; -1 unknown
  std::string cpus;     // cpulist the host thread is pinned to; empty: no pinning
};

// H2D, D2H, and both at once (each direction reported while the other runs), with the copy
// engine and with an SM copy kernel. Pinned host memory on the GPU's NUMA node.
std::vector<Measurement> probe_host_device_bandwidth(const GpuPlacement& gpu, uint64_t bytes,
                                                     const RunOptions& run);

struct LatencyOptions {
  int hops = 20000;  // dependent loads per pointer-chase sample
  int copies = 200;  // back-to-back small copies per sample (short: see StartGate)
  int repeats = 5;
  // 128-byte lines the host pointer chase cycles through: 4096 = 512 KiB, 128 pages of 4 KiB.
  size_t chain_lines = 4096;
  std::chrono::duration<double> timeout{60.0};
};

// Host round trip from the SMs (a pointer chase through pinned host memory, one dependent
// uncached load per hop) and the latency of a 4-byte copy-engine copy each way.
std::vector<Measurement> probe_host_device_latency(const GpuPlacement& gpu,
                                                   const LatencyOptions& options);

// Pins the calling thread to the CPUs of a sysfs cpulist ("0-15,32-47"). Returns false when
// the list is empty or the kernel refuses.
bool pin_thread_to_cpus(const std::string& cpulist);

}  // namespace commtool::probe
