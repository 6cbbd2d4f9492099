#include "probes/cuda/start_gate.hpp"

#include <atomic>

#include "probes/cuda/cuda_check.hpp"
#include "probes/cuda/kernels.cuh"

namespace commtool::cuda {

void StartGate::close() {
  *release() = 0;
  *gave_up() = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void StartGate::hold(cudaStream_t stream, uint64_t timeout_ns) {
  launch_spin_until_released(stream, release(), const_cast<int*>(gave_up()), timeout_ns);
  CUDA_TRY(cudaGetLastError());
}

void StartGate::open() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *release() = 1;
}

bool StartGate::timed_out() const {
  return *gave_up() != 0;
}

}  // namespace commtool::cuda
