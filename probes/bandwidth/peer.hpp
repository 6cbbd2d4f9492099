// GPU<->GPU probes: in one process with peer access (--p2p), and between worker processes
// through CUDA IPC (--ipc), with the flag ping-pong an IPC all-reduce's barrier costs.
#pragma once

#include <vector>

#include "probes/bandwidth/copy_runner.hpp"
#include "probes/bandwidth/host_device.hpp"
#include "probes/bandwidth/measurement.hpp"

namespace commtool::workers {
class Communicator;
}

namespace commtool::probe {

struct PeerPair {
  int a = 0;  // GPU indices
  int b = 0;
};

// Bandwidth for every ordered pair CUDA allows P2P on: unidirectional (a writes into b's
// memory: the copy engine of a via cudaMemcpyPeerAsync, or a's SMs storing to peer memory) and
// bidirectional (a->b while b->a, each direction reported). Pairs CUDA refuses are listed in
// `refused` (their reason comes from the topology, in the launcher).
std::vector<Measurement> probe_p2p_bandwidth(const std::vector<GpuPlacement>& gpus, uint64_t bytes,
                                             const RunOptions& run, std::vector<PeerPair>* refused);

// SM pointer chase from a through b's memory, per ordered pair with P2P (and a == b: local).
std::vector<Measurement> probe_p2p_latency(const std::vector<GpuPlacement>& gpus,
                                           const LatencyOptions& options);

struct IpcOptions {
  uint64_t bytes = 512ull << 20;
  RunOptions run;
  int pingpong_rounds = 10000;
  int pingpong_repeats = 5;
};

// Runs in every worker of a group, one per GPU (or several on one GPU for tests): exchanges
// CUDA IPC handles, then for each ordered pair in turn the source rank copies into the
// destination's mapped buffer (CE and SM, alone and both ways at once) and each unordered pair
// plays flag ping-pong. Returns this rank's measurements (indices are ranks' GPU indices).
std::vector<Measurement> probe_ipc(workers::Communicator& comm, const GpuPlacement& gpu,
                                   const IpcOptions& options);

}  // namespace commtool::probe
