#include "probes/base/runtime_versions.hpp"

#include <cuda_runtime_api.h>  // CUDART_VERSION
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>

#include "probes/base/dynlib.hpp"
#include "probes/base/error.hpp"
#include "probes/base/nccl/nccl_library.hpp"
#include "probes/base/nvml_session.hpp"

namespace commtool {

namespace {

std::string cuda_version_string(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// The NCCL commtool itself would use (COMMTOOL_NCCL_LIBRARY honoured), or why none is usable.
std::string nccl_version() {
  try {
    nccl::Library lib;
    return fmt::format("{} ({})", lib.version_string(), lib.path());
  } catch (const Error& e) {
    return std::string("not usable: ") + e.what();
  }
}

std::string cupti_version() {
  // libcupti's static initialiser allocates 72 KiB it never frees; unloading the library would
  // leave that unreachable (LeakSanitizer reports it), so it stays mapped.
  DynamicLibrary lib(cuda_library_candidates("libcupti.so.13"), RTLD_NODELETE);
  if (!lib) lib = DynamicLibrary(cuda_library_candidates("libcupti.so"), RTLD_NODELETE);
  if (!lib) return "not found (" + lib.error() + ")";
  using GetVersion = int (*)(uint32_t*);
  auto get = lib.symbol<GetVersion>("cuptiGetVersion");
  uint32_t api = 0;
  if (get == nullptr || get(&api) != 0) return "found, but cuptiGetVersion failed";
  return fmt::format("API version {} ({})", api, lib.path_of(reinterpret_cast<void*>(get)));
}

// cuDriverGetVersion needs no cuInit: it only reports what libcuda.so.1 supports. -1: no
// libcuda.so.1; 0: it did not answer.
int cuda_driver_code() {
  DynamicLibrary lib({"libcuda.so.1"});
  if (!lib) return -1;
  using GetVersion = int (*)(int*);
  auto get = lib.symbol<GetVersion>("cuDriverGetVersion");
  int version = 0;
  if (get == nullptr || get(&version) != 0 || version <= 0) return 0;
  return version;
}

std::string cuda_driver_version() {
  const int code = cuda_driver_code();
  if (code < 0) return "not found (no libcuda.so.1: no NVIDIA driver)";
  if (code == 0) return "libcuda.so.1 found, but cuDriverGetVersion failed";
  return cuda_version_string(code);
}

std::string nvidia_driver_version() {
  const nvml::Session session;
  if (!session.started()) return "not found (" + session.why_not() + ")";
  using Version = nvml::Return (*)(char*, unsigned);
  const auto version = session.symbol<Version>("nvmlSystemGetDriverVersion");
  char text[96] = {};
  if (!version || version(text, sizeof text) != nvml::kSuccess) {
    return "NVML started, but the driver version is unreadable";
  }
  return text;
}

}  // namespace

RuntimeVersions query_runtime_versions() {
  RuntimeVersions v;
  // The runtime is linked in, so its version is the one compiled against; asking cudart would
  // initialise it for nothing.
  v.cuda_runtime = cuda_version_string(CUDART_VERSION) + " (linked statically)";
  v.cuda_driver = cuda_driver_version();
  v.nvidia_driver = nvidia_driver_version();
  v.nccl = nccl_version();
  v.cupti = cupti_version();
  return v;
}

std::string cuda_driver_api_version() {
  const int code = cuda_driver_code();
  return code > 0 ? cuda_version_string(code) : "";
}

std::string nccl_library_version() {
  try {
    return nccl::Library().version_string();
  } catch (const Error&) {
    return "";
  }
}

}  // namespace commtool
