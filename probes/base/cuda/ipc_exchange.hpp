// A device buffer exported through CUDA IPC, and every other worker's buffer opened from its
// handle: the handles travel over the worker channel (one allgather), so after construction
// at(r) is rank r's buffer mapped into this process. Works between processes on one GPU too
// (seen on the H200), which is how the IPC paths are tested where only one GPU is lent.
//
// Sharp edges: every rank must construct it at the same point (the allgather is collective);
// peers' mappings are closed in the destructor, so a rank must not free its buffer while a
// peer may still read it (callers end with a barrier).
#pragma once

#include <vector>

#include "probes/base/workers/communicator.hpp"

namespace commtool::cuda {

class IpcExchange {
 public:
  IpcExchange(workers::Communicator& comm, void* local);
  ~IpcExchange();
  IpcExchange(const IpcExchange&) = delete;
  IpcExchange& operator=(const IpcExchange&) = delete;

  void* at(int rank) const { return peers_[static_cast<size_t>(rank)]; }
  int size() const { return static_cast<int>(peers_.size()); }

 private:
  int rank_;
  std::vector<void*> peers_;  // this rank's own buffer at its own index
};

}  // namespace commtool::cuda
