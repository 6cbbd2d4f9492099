// The one error-checking helper for CUDA runtime calls: a failure becomes a commtool::Error
// that names the call, the device and CUDA's own words, with the exit code that fits.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "probes/base/error.hpp"

namespace commtool::cuda {

// Exit code for a CUDA failure: no driver or device is "the environment lacks it" (3); the rest
// are failures of the run, reported as such (also 3: the GPU could not do what was asked).
ExitCode exit_code_for(cudaError_t err);

// CUDA's name and words for an error, and what it means where they mislead: with no NVIDIA
// kernel driver loaded at all, CUDA says "driver version is insufficient". Whether a driver is
// loaded is whether `driver_version_file` exists (a parameter for the tests).
std::string describe(cudaError_t err,
                     const char* driver_version_file = "/proc/driver/nvidia/version");

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_error(err, call, file, line);
}

}  // namespace commtool::cuda

// Wraps a CUDA runtime call: CUDA_TRY(cudaMalloc(&p, n));
#define CUDA_TRY(call) ::commtool::cuda::check((call), #call, __FILE__, __LINE__)
