// The launcher's half of `commtool probe`: reads the topology (without CUDA), decides which
// probes apply, runs them in worker processes, and sets every figure beside what its link
// should give. Never touches CUDA itself.
#pragma once

#include <string>
#include <vector>

#include "probes/bandwidth/measurement.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::probe {

struct ProbeRequest {
  bool h2d = false;
  bool p2p = false;
  bool ipc = false;
  bool latency = false;  // all four false: every probe that applies here
  uint64_t bytes = 512ull << 20;
  int iters = 20;   // copies per timed batch
  int batches = 5;  // timed batches: the median and spread are over them
  int warmup = 5;   // untimed copies before the first
  int pingpong_rounds = 10000;
  int chase_lines = 4096;  // hidden: lines of the latency probe's pointer chase
  double timeout_s = 60;
  std::vector<int> devices;  // GPU indices, each once; empty: all
  // The GPU of each IPC worker rank (--devices as listed: "0,0,0" is three ranks on GPU 0);
  // empty: one per GPU.
  std::vector<int> ipc_placement;
  std::string executable = "/proc/self/exe";
};

struct Skipped {
  std::string probe;   // "p2p", "ipc"
  std::string reason;  // "only one GPU: no pair to measure"
  bool asked = false;  // the user named this probe: exit code 3
};

struct RefusedPair {
  int a = 0;
  int b = 0;
  std::string reason;  // from the topology analysis
};

struct ProbeReport {
  topo::Topology topology;
  topo::Analysis analysis;
  ProbeRequest request;
  std::vector<Measurement> measurements;
  std::vector<Skipped> skipped;
  std::vector<RefusedPair> refused;
};

// What can be checked before the GPUs are found: the memory --size takes (two buffers per
// probe, per IPC rank on a GPU; two pinned host buffers for --h2d) against
// measure/memory_limit.hpp's limits. Throws BadValue (size). run_probes checks it first.
void check_probe_request(const ProbeRequest& request);

// Throws Error: kEnvironment without a GPU, the worker's code when a probe fails (4 for wrong
// data, 5 for a timeout or a dead worker).
ProbeReport run_probes(const ProbeRequest& request);

// What the link between two endpoints should give per direction (GB/s) and why; 0 when
// unknown. Pure, for tests: GPU<->host is the GPU's PCIe payload rate, GPU<->GPU the NVLink
// bundle between them, else the slower of the two GPUs' PCIe payload rates.
std::pair<double, std::string> expected_rate(const topo::Topology& topo,
                                             const topo::Analysis& analysis, int src, int dst);

// Why CUDA IPC cannot run over these ranks' GPUs ("GPU 0 and GPU 3 have no P2P, ..."), given
// the ordered pairs the P2P probe found refused; empty when nothing stands in the way.
std::string ipc_blocker(const std::vector<int>& placement,
                        const std::vector<std::pair<int, int>>& refused);

// Fills expected and expected_basis of every bandwidth measurement.
void set_expectations(const topo::Topology& topo, const topo::Analysis& analysis,
                      std::vector<Measurement>& measurements);

}  // namespace commtool::probe
