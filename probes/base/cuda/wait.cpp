#include "probes/base/cuda/wait.hpp"

#include <fmt/format.h>

#include <thread>

#include "probes/base/cuda/cuda_check.hpp"

namespace commtool::cuda {

void wait_for_event(const Event& done, std::chrono::duration<double> timeout,
                    const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  cudaError_t state;
  while ((state = cudaEventQuery(done.get())) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(ExitCode::kTimeout,
                  fmt::format("{} did not finish within {:.1f} s", what, timeout.count()));
    }
    // 50 us: far below any figure's resolution, and it leaves a core to the other workers.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  CUDA_TRY(state);
}

}  // namespace commtool::cuda
