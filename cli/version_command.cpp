#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "build_info.hpp"
#include "cli/commands.hpp"
#include "probes/base/runtime_versions.hpp"

namespace commtool::cli {

namespace {

// The version document's schema; raised when a member changes meaning or goes.
constexpr int kVersionSchemaVersion = 1;

}  // namespace

void print_version(const GlobalOptions& global) {
  RuntimeVersions v = query_runtime_versions();
  const std::string toolkit =
      fmt::format("{}.{}", build_info::kCudaToolkitMajor, build_info::kCudaToolkitMinor);
  if (global.json) {
    const nlohmann::json doc = {{"schema_version", kVersionSchemaVersion},
                                {"commtool", build_info::kVersion},
                                {"git_commit", build_info::kGitCommit},
                                {"built_with_cuda_toolkit", toolkit},
                                {"cuda_runtime", v.cuda_runtime},
                                {"cuda_driver", v.cuda_driver},
                                {"nvidia_driver", v.nvidia_driver},
                                {"nccl", v.nccl},
                                {"cupti", v.cupti}};
    emit(global, doc.dump(2) + "\n");
    return;
  }
  std::string out = fmt::format("commtool {} (git {}, built with CUDA toolkit {})\n",
                                build_info::kVersion, build_info::kGitCommit, toolkit);
  out += fmt::format("CUDA runtime:  {}\n", v.cuda_runtime);
  out += fmt::format("CUDA driver:   {}\n", v.cuda_driver);
  out += fmt::format("NVIDIA driver: {}\n", v.nvidia_driver);
  out += fmt::format("NCCL:          {}\n", v.nccl);
  out += fmt::format("CUPTI:         {}\n", v.cupti);
  emit(global, out);
}

}  // namespace commtool::cli
