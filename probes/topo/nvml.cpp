#include "probes/topo/nvml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "probes/base/dynlib.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::topo {

namespace {

// --- The declarations we rely on (NVML public API, stable since R450) ---
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;
constexpr unsigned NVML_FEATURE_ENABLED = 1;
enum nvmlIntNvLinkDeviceType_t : int {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 2,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xff,
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
};

struct Nvml {
  DynamicLibrary lib{{"libnvidia-ml.so.1"}};
  nvmlReturn_t (*init)() = lib.symbol<decltype(init)>("nvmlInit_v2");
  nvmlReturn_t (*shutdown)() = lib.symbol<decltype(shutdown)>("nvmlShutdown");
  const char* (*error_string)(nvmlReturn_t) = lib.symbol<decltype(error_string)>("nvmlErrorString");
  nvmlReturn_t (*driver_version)(char*, unsigned) =
      lib.symbol<decltype(driver_version)>("nvmlSystemGetDriverVersion");
  nvmlReturn_t (*handle_by_bus_id)(const char*, nvmlDevice_t*) =
      lib.symbol<decltype(handle_by_bus_id)>("nvmlDeviceGetHandleByPciBusId_v2");
  nvmlReturn_t (*name)(nvmlDevice_t, char*,
                       unsigned) = lib.symbol<decltype(name)>("nvmlDeviceGetName");
  nvmlReturn_t (*compute_capability)(nvmlDevice_t, int*, int*) =
      lib.symbol<decltype(compute_capability)>("nvmlDeviceGetCudaComputeCapability");
  nvmlReturn_t (*curr_gen)(nvmlDevice_t, unsigned*) =
      lib.symbol<decltype(curr_gen)>("nvmlDeviceGetCurrPcieLinkGeneration");
  nvmlReturn_t (*curr_width)(nvmlDevice_t, unsigned*) =
      lib.symbol<decltype(curr_width)>("nvmlDeviceGetCurrPcieLinkWidth");
  nvmlReturn_t (*max_gen)(nvmlDevice_t, unsigned*) =
      lib.symbol<decltype(max_gen)>("nvmlDeviceGetMaxPcieLinkGeneration");
  nvmlReturn_t (*max_width)(nvmlDevice_t, unsigned*) =
      lib.symbol<decltype(max_width)>("nvmlDeviceGetMaxPcieLinkWidth");
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, unsigned*) =
      lib.symbol<decltype(link_state)>("nvmlDeviceGetNvLinkState");
  nvmlReturn_t (*link_version)(nvmlDevice_t, unsigned, unsigned*) =
      lib.symbol<decltype(link_version)>("nvmlDeviceGetNvLinkVersion");
  nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) =
      lib.symbol<decltype(remote_pci)>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*) =
      lib.symbol<decltype(remote_type)>("nvmlDeviceGetNvLinkRemoteDeviceType");

  bool complete() const {
    return init && shutdown && error_string && handle_by_bus_id && name && link_state;
  }
  std::string why(nvmlReturn_t r) const {
    return error_string ? error_string(r) : fmt::format("NVML error {}", r);
  }
};

NvLinkPeer peer_kind(const Topology& topo, const std::string& bdf, const Nvml& nvml,
                     nvmlDevice_t dev, unsigned link) {
  nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
  if (nvml.remote_type && nvml.remote_type(dev, link, &type) == NVML_SUCCESS) {
    switch (type) {
      case NVML_NVLINK_DEVICE_TYPE_GPU:
        return NvLinkPeer::kGpu;
      case NVML_NVLINK_DEVICE_TYPE_SWITCH:
        return NvLinkPeer::kNvSwitch;
      case NVML_NVLINK_DEVICE_TYPE_IBMNPU:
        return NvLinkPeer::kCpu;
      default:
        break;
    }
  }
  // Older drivers lack the call: tell by what sits at the far end.
  if (topo.find_gpu_by_bdf(bdf)) return NvLinkPeer::kGpu;
  for (const NvSwitch& s : topo.nvswitches) {
    if (s.bdf == bdf) return NvLinkPeer::kNvSwitch;
  }
  return NvLinkPeer::kUnknown;
}

void read_nvlinks(const Nvml& nvml, nvmlDevice_t dev, Topology& topo, Gpu& gpu) {
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    unsigned state = 0;
    if (nvml.link_state(dev, link, &state) != NVML_SUCCESS) continue;  // link does not exist
    NvLink l;
    l.link = static_cast<int>(link);
    l.active = state == NVML_FEATURE_ENABLED;
    unsigned version = 0;
    if (nvml.link_version && nvml.link_version(dev, link, &version) == NVML_SUCCESS) {
      l.nvml_version = static_cast<int>(version);
    }
    l.generation = nvlink_generation_for_sm(gpu.sm);
    nvmlPciInfo_t remote{};
    if (l.active && nvml.remote_pci && nvml.remote_pci(dev, link, &remote) == NVML_SUCCESS) {
      l.peer_bdf = canonical_bdf(remote.busId).value_or("");
      l.peer = peer_kind(topo, l.peer_bdf, nvml, dev, link);
      if (l.peer == NvLinkPeer::kNvSwitch && !l.peer_bdf.empty() &&
          std::none_of(topo.nvswitches.begin(), topo.nvswitches.end(),
                       [&](const NvSwitch& s) { return s.bdf == l.peer_bdf; })) {
        topo.nvswitches.push_back({l.peer_bdf});
      }
    }
    gpu.nvlinks.push_back(l);
  }
}

void read_pcie(const Nvml& nvml, nvmlDevice_t dev, PcieLink& link) {
  // sysfs is the primary source; NVML fills what a VM's sysfs leaves out.
  auto fill = [&](auto fn, int& field) {
    unsigned v = 0;
    if (field == 0 && fn && fn(dev, &v) == NVML_SUCCESS) field = static_cast<int>(v);
  };
  fill(nvml.curr_gen, link.current_gen);
  fill(nvml.curr_width, link.current_width);
  fill(nvml.max_gen, link.max_gen);
  fill(nvml.max_width, link.max_width);
}

}  // namespace

void enrich_with_nvml(Topology& topo) {
  Nvml nvml;
  if (!nvml.lib) {
    topo.nvml_error = "cannot load libnvidia-ml.so.1 (" + nvml.lib.error() + ")";
    topo.missing.push_back({"NVML", topo.nvml_error + ": no names, NVLink or driver version"});
    return;
  }
  if (!nvml.complete()) {
    topo.nvml_error =
        "libnvidia-ml.so.1 lacks entry points commtool needs (driver older than R450?)";
    topo.missing.push_back({"NVML", topo.nvml_error});
    return;
  }
  if (nvmlReturn_t r = nvml.init(); r != NVML_SUCCESS) {
    topo.nvml_error = "nvmlInit failed: " + nvml.why(r);
    topo.missing.push_back({"NVML", topo.nvml_error});
    return;
  }
  topo.nvml_available = true;
  char version[96] = {};
  if (nvml.driver_version && nvml.driver_version(version, sizeof version) == NVML_SUCCESS) {
    topo.driver_version = version;
  }
  for (Gpu& gpu : topo.gpus) {
    nvmlDevice_t dev = nullptr;
    if (nvmlReturn_t r = nvml.handle_by_bus_id(gpu.bdf.c_str(), &dev); r != NVML_SUCCESS) {
      topo.missing.push_back({"NVML data for " + gpu.bdf, nvml.why(r)});
      continue;
    }
    char name[96] = {};
    if (nvml.name(dev, name, sizeof name) == NVML_SUCCESS) gpu.name = name;
    int major = 0, minor = 0;
    if (nvml.compute_capability && nvml.compute_capability(dev, &major, &minor) == NVML_SUCCESS) {
      gpu.sm = major * 10 + minor;
    }
    read_pcie(nvml, dev, gpu.pcie);
    read_nvlinks(nvml, dev, topo, gpu);
    gpu.nvlinks_known = true;
  }
  nvml.shutdown();
}

}  // namespace commtool::topo
