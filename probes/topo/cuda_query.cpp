#include "probes/topo/cuda_query.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>

#include "probes/base/cuda/cuda_check.hpp"

namespace commtool::topo {

namespace {

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, attr, device) == cudaSuccess ? value : 0;
}

}  // namespace

CudaFacts query_cuda() {
  CudaFacts facts;
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    facts.error = "cudaGetDeviceCount: " + cuda::describe(err);
    return facts;
  }
  facts.ok = true;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal) != cudaSuccess) continue;
    CudaDevice d;
    d.ordinal = ordinal;
    d.bdf = canonical_bdf(bus_id).value_or(bus_id);
    d.sm = attribute(cudaDevAttrComputeCapabilityMajor, ordinal) * 10 +
           attribute(cudaDevAttrComputeCapabilityMinor, ordinal);
    facts.devices.push_back(d);
  }
  for (const CudaDevice& a : facts.devices) {
    for (const CudaDevice& b : facts.devices) {
      if (a.ordinal == b.ordinal) continue;
      int can = 0, rank = -1, atomics = 0;
      if (cudaDeviceCanAccessPeer(&can, a.ordinal, b.ordinal) != cudaSuccess) continue;
      CudaPeer p{a.bdf, b.bdf, can != 0, -1, false};
      if (cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a.ordinal, b.ordinal) ==
          cudaSuccess) {
        p.performance_rank = rank;
      }
      if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a.ordinal,
                                    b.ordinal) == cudaSuccess) {
        p.native_atomics = atomics != 0;
      }
      facts.peers.push_back(p);
    }
  }
  cudaGetLastError();  // leave no error behind for whoever uses CUDA next in this process
  return facts;
}

bool cuda_needed(const Topology& topo, const char* cuda_visible_devices) {
  return topo.gpus.size() != 1 || cuda_visible_devices != nullptr;
}

void merge_cuda(Topology& topo, const CudaFacts& facts) {
  topo.cuda_queried = true;
  if (!facts.ok) {
    topo.cuda_error = facts.error;
    topo.missing.push_back({"CUDA", facts.error + ": no P2P facts"});
    return;
  }
  topo.cuda_available = true;
  for (const CudaDevice& d : facts.devices) {
    auto it = std::find_if(topo.gpus.begin(), topo.gpus.end(),
                           [&](const Gpu& g) { return g.bdf == d.bdf; });
    if (it == topo.gpus.end()) {
      Gpu g;
      g.bdf = d.bdf;
      topo.missing.push_back({"PCIe placement of " + d.bdf, "CUDA sees it, sysfs does not"});
      topo.gpus.push_back(g);
      it = topo.gpus.end() - 1;
    }
    it->cuda_ordinal = d.ordinal;
    if (d.sm > 0) it->sm = d.sm;
  }
  std::sort(topo.gpus.begin(), topo.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.bdf < b.bdf; });
  for (size_t i = 0; i < topo.gpus.size(); ++i)
    topo.gpus[i].index = static_cast<int>(i);
  topo.reindex();
  topo.p2p_queried = true;
  for (const CudaPeer& p : facts.peers) {
    const Gpu* a = topo.find_gpu_by_bdf(p.bdf_a);
    const Gpu* b = topo.find_gpu_by_bdf(p.bdf_b);
    if (a && b) {
      topo.p2p.push_back({a->index, b->index, p.can_access, p.performance_rank, p.native_atomics});
    }
  }
}

}  // namespace commtool::topo
