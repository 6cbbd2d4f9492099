#include <fmt/format.h>

#include "build_info.hpp"
#include "cli/commands.hpp"
#include "probes/base/runtime_versions.hpp"

namespace commtool::cli {

void print_version() {
  RuntimeVersions v = query_runtime_versions();
  fmt::print("commtool {} (git {}, built with CUDA toolkit {}.{})\n", build_info::kVersion,
             build_info::kGitCommit, build_info::kCudaToolkitMajor, build_info::kCudaToolkitMinor);
  fmt::print("CUDA runtime:  {}\n", v.cuda_runtime);
  fmt::print("CUDA driver:   {}\n", v.cuda_driver);
  fmt::print("NVIDIA driver: {}\n", v.nvidia_driver);
  fmt::print("NCCL:          {}\n", v.nccl);
  fmt::print("CUPTI:         {}\n", v.cupti);
}

}  // namespace commtool::cli
