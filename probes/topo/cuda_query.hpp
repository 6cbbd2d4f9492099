// CUDA's view of the GPUs: which ordinal is which bus id, compute capability, and P2P per
// ordered pair (cudaDeviceCanAccessPeer, cudaDeviceGetP2PAttribute). None of these calls
// creates a context, but the first one initialises the driver (cuInit), which costs ~190 ms on
// an H200 VM: four times all of `nvidia-smi topo -m`. So discovery asks CUDA only when it has
// something to say (cuda_needed), and does so on a thread while NVML is read.
#pragma once

#include <string>
#include <vector>

#include "probes/topo/topology.hpp"

namespace commtool::topo {

struct CudaDevice {
  int ordinal = 0;
  std::string bdf;
  int sm = 0;
  std::string name;
};

struct CudaPeer {
  std::string bdf_a;
  std::string bdf_b;
  bool can_access = false;
  int performance_rank = -1;
  bool native_atomics = false;
};

struct CudaFacts {
  bool ok = false;
  std::string error;  // why CUDA could not be asked, when !ok
  std::vector<CudaDevice> devices;
  std::vector<CudaPeer> peers;
};

// Talks to the driver. Never throws.
CudaFacts query_cuda();

// Whether CUDA has anything to add: not with exactly one GPU found and CUDA_VISIBLE_DEVICES
// unset (no pair for P2P, and the GPU is CUDA ordinal 0). With no GPU in sysfs it has: CUDA
// may still see some (a container without /sys/bus/pci).
bool cuda_needed(const Topology& topo, const char* cuda_visible_devices);

// Adds the facts to the model: ordinals, compute capability, P2P pairs; GPUs CUDA sees but
// sysfs did not are added without a place in the tree. Pure.
void merge_cuda(Topology& topo, const CudaFacts& facts);

}  // namespace commtool::topo
