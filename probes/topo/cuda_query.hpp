// CUDA's view of the GPUs: which ordinal is which bus id, compute capability, and P2P per pair
// (cudaDeviceCanAccessPeer, cudaDeviceGetP2PAttribute). None of these calls creates a context,
// so topo stays fast and leaves the GPUs alone.
#pragma once

#include "probes/topo/topology.hpp"

namespace commtool::topo {

// Without a driver or a GPU it records why in topo.missing and returns.
void enrich_with_cuda(Topology& topo);

}  // namespace commtool::topo
