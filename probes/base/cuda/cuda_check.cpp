#include "probes/base/cuda/cuda_check.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstring>

namespace commtool::cuda {

ExitCode exit_code_for(cudaError_t err) {
  (void)err;
  return ExitCode::kEnvironment;
}

std::string describe(cudaError_t err, const char* driver_version_file) {
  std::string text = fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
  if (err == cudaErrorInsufficientDriver) {
    bool loaded = ::access(driver_version_file, F_OK) == 0;
    text += loaded ? ": the loaded NVIDIA driver is older than this CUDA runtime; "
                     "/proc/driver/nvidia/version names it"
                   : ": no NVIDIA kernel driver is loaded (/proc/driver/nvidia/version is absent)";
  }
  return text;
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  int device = -1;
  cudaGetDevice(&device);
  cudaGetLastError();  // clear a non-sticky error so that cleanup can run
  const char* base = std::strrchr(file, '/');
  throw Error(exit_code_for(err),
              fmt::format("CUDA error on GPU {}: {} returned {} at {}:{}", device, call,
                          describe(err), base ? base + 1 : file, line));
}

}  // namespace commtool::cuda
