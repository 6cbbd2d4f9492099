// A gate that holds streams until the host opens it, so that work queued on several streams
// (or a long queue on one) starts at one moment and the events around it time the GPU, not
// the host's enqueue rate. Each held stream runs a one-thread spin kernel on a host word
// mapped into the device.
//
// Sharp edges: open the gate soon after queuing (the kernel gives up after its timeout and
// sets timed_out(), after which the timing is meaningless); never synchronise on a held stream
// before opening; and keep the queue behind the gate short (a few hundred operations), since a
// full CUDA work queue blocks the enqueueing host thread, which then never opens the gate.
// COMMTOOL_NO_START_GATE=1 (for compute-sanitizer, which serialises GPU work) disables it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "probes/base/cuda/memory.hpp"

namespace commtool::cuda {

class StartGate {
 public:
  StartGate() = default;

  void close();  // re-arm before holding streams for the next round
  void hold(cudaStream_t stream, uint64_t timeout_ns);  // queue the spin kernel
  void open();
  bool timed_out() const;

 private:
  PinnedHostBuffer words_{256, -1};
  volatile int* release() const { return static_cast<volatile int*>(words_.get()); }
  volatile int* gave_up() const { return static_cast<volatile int*>(words_.get()) + 32; }
};

}  // namespace commtool::cuda
