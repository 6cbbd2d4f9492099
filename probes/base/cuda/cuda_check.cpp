#include "probes/base/cuda/cuda_check.hpp"

#include <fmt/format.h>

#include <cstring>

namespace commtool::cuda {

ExitCode exit_code_for(cudaError_t err) {
  (void)err;
  return ExitCode::kEnvironment;
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);
  cudaGetLastError();  // clear a non-sticky error so that cleanup can run
  const char* base = std::strrchr(file, '/');
  throw Error(
      exit_code_for(err),
      fmt::format("CUDA error on GPU {}: {} returned {} ({}) at {}:{}", device, call,
                  cudaGetErrorName(err), cudaGetErrorString(err), base ? base + 1 : file, line));
}

}  // namespace commtool::cuda
