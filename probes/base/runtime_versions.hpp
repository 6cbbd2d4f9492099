// The versions of the GPU software stack commtool finds at run time, for --version and for the
// header of every report. Each is looked up without initialising the library behind it.
#pragma once

#include <string>

namespace commtool {

struct RuntimeVersions {
  std::string cuda_runtime;   // "13.0 (static)"
  std::string cuda_driver;    // "13.0" or "not found (...)"
  std::string nvidia_driver;  // "580.159.04" from NVML, or "not found (...)"
  std::string nccl;           // "2.28.3 (/lib/x86_64-linux-gnu/libnccl.so.2)" or "not found"
  std::string cupti;          // "API 130000 (/usr/local/cuda/lib64/libcupti.so.13)" or "not found"
};

RuntimeVersions query_runtime_versions();

// The bare versions, "" where there is none to find, for comparing nodes (topo under MPI):
// the CUDA driver API version ("13.0") and NCCL's ("2.28.3", the library commtool would load).
std::string cuda_driver_api_version();
std::string nccl_library_version();

}  // namespace commtool
