#include "probes/topo/cuda_query.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>

namespace commtool::topo {

namespace {

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, attr, device) == cudaSuccess ? value : 0;
}

}  // namespace

void enrich_with_cuda(Topology& topo) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    topo.missing.push_back({"CUDA", fmt::format("cudaGetDeviceCount: {} ({}): no P2P facts",
                                                cudaGetErrorString(err), cudaGetErrorName(err))});
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return;
  }
  topo.cuda_available = true;
  std::vector<std::pair<int, Gpu*>> visible;  // CUDA ordinal -> GPU of the model
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal) != cudaSuccess) continue;
    std::string bdf = canonical_bdf(bus_id).value_or(bus_id);
    auto it = std::find_if(topo.gpus.begin(), topo.gpus.end(),
                           [&](const Gpu& g) { return g.bdf == bdf; });
    if (it == topo.gpus.end()) {
      // Visible to CUDA but absent from sysfs (a container without /sys/bus/pci): keep it,
      // with no place in the PCIe tree.
      Gpu g;
      g.bdf = bdf;
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) g.name = prop.name;
      topo.missing.push_back({"PCIe placement of " + bdf, "CUDA sees it, sysfs does not"});
      topo.gpus.push_back(g);
      it = topo.gpus.end() - 1;
    }
    it->cuda_ordinal = ordinal;
    it->sm = attribute(cudaDevAttrComputeCapabilityMajor, ordinal) * 10 +
             attribute(cudaDevAttrComputeCapabilityMinor, ordinal);
    visible.emplace_back(ordinal, nullptr);
  }
  std::sort(topo.gpus.begin(), topo.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.bdf < b.bdf; });
  for (size_t i = 0; i < topo.gpus.size(); ++i)
    topo.gpus[i].index = static_cast<int>(i);

  topo.p2p_queried = true;
  for (const Gpu& a : topo.gpus) {
    for (const Gpu& b : topo.gpus) {
      if (a.cuda_ordinal < 0 || b.cuda_ordinal < 0 || a.index == b.index) continue;
      P2pPair p;
      p.gpu_a = a.index;
      p.gpu_b = b.index;
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, a.cuda_ordinal, b.cuda_ordinal) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      p.can_access = can != 0;
      int rank = -1, atomics = 0;
      if (cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a.cuda_ordinal,
                                    b.cuda_ordinal) == cudaSuccess) {
        p.performance_rank = rank;
      }
      if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a.cuda_ordinal,
                                    b.cuda_ordinal) == cudaSuccess) {
        p.native_atomics = atomics != 0;
      }
      cudaGetLastError();
      topo.p2p.push_back(p);
    }
  }
}

}  // namespace commtool::topo
