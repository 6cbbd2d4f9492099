#include "probes/topo/nvml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "probes/base/nvml_session.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::topo {

namespace {

using nvml::Device;
using nvml::kSuccess;
using nvml::Return;

// nvmlIntNvLinkDeviceType_t and nvmlPciInfo_t of NVML's public header.
enum NvLinkDeviceType : int {
  kNvLinkGpu = 0,
  kNvLinkIbmNpu = 1,
  kNvLinkSwitch = 2,
  kNvLinkUnknown = 0xff,
};
constexpr unsigned kFeatureEnabled = 1;  // kFeatureEnabled
struct PciInfo {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];  // "00000000:3B:00.0"
};

// The entry points topo uses, beside the session's.
struct TopoCalls {
  explicit TopoCalls(const nvml::Session& s) : session(s) {}
  const nvml::Session& session;
  Return (*driver_version)(char*, unsigned) =
      session.symbol<decltype(driver_version)>("nvmlSystemGetDriverVersion");
  Return (*name)(Device, char*, unsigned) = session.symbol<decltype(name)>("nvmlDeviceGetName");
  Return (*compute_capability)(Device, int*, int*) =
      session.symbol<decltype(compute_capability)>("nvmlDeviceGetCudaComputeCapability");
  Return (*curr_gen)(Device, unsigned*) =
      session.symbol<decltype(curr_gen)>("nvmlDeviceGetCurrPcieLinkGeneration");
  Return (*curr_width)(Device, unsigned*) =
      session.symbol<decltype(curr_width)>("nvmlDeviceGetCurrPcieLinkWidth");
  Return (*max_gen)(Device, unsigned*) =
      session.symbol<decltype(max_gen)>("nvmlDeviceGetMaxPcieLinkGeneration");
  Return (*max_width)(Device, unsigned*) =
      session.symbol<decltype(max_width)>("nvmlDeviceGetMaxPcieLinkWidth");
  Return (*link_state)(Device, unsigned, unsigned*) =
      session.symbol<decltype(link_state)>("nvmlDeviceGetNvLinkState");
  Return (*link_version)(Device, unsigned, unsigned*) =
      session.symbol<decltype(link_version)>("nvmlDeviceGetNvLinkVersion");
  Return (*remote_pci)(Device, unsigned, PciInfo*) =
      session.symbol<decltype(remote_pci)>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  Return (*remote_type)(Device, unsigned, NvLinkDeviceType*) =
      session.symbol<decltype(remote_type)>("nvmlDeviceGetNvLinkRemoteDeviceType");

  bool complete() const { return name && link_state; }
};

NvLinkPeer peer_kind(const Topology& topo, const std::string& bdf, const TopoCalls& nvml,
                     Device dev, unsigned link) {
  NvLinkDeviceType type = kNvLinkUnknown;
  if (nvml.remote_type && nvml.remote_type(dev, link, &type) == kSuccess) {
    switch (type) {
      case kNvLinkGpu:
        return NvLinkPeer::kGpu;
      case kNvLinkSwitch:
        return NvLinkPeer::kNvSwitch;
      case kNvLinkIbmNpu:
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

void read_nvlinks(const TopoCalls& nvml, Device dev, Topology& topo, Gpu& gpu) {
  for (unsigned link = 0; link < nvml::kMaxNvLinks; ++link) {
    unsigned state = 0;
    if (nvml.link_state(dev, link, &state) != kSuccess) continue;  // link does not exist
    NvLink l;
    l.link = static_cast<int>(link);
    l.active = state == kFeatureEnabled;
    unsigned version = 0;
    if (nvml.link_version && nvml.link_version(dev, link, &version) == kSuccess) {
      l.nvml_version = static_cast<int>(version);
    }
    l.generation = nvlink_generation_for_sm(gpu.sm);
    PciInfo remote{};
    if (l.active && nvml.remote_pci && nvml.remote_pci(dev, link, &remote) == kSuccess) {
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

void read_pcie(const TopoCalls& nvml, Device dev, PcieLink& link) {
  // sysfs is the primary source; NVML fills what a VM's sysfs leaves out.
  auto fill = [&](auto fn, int& field) {
    unsigned v = 0;
    if (field == 0 && fn && fn(dev, &v) == kSuccess) field = static_cast<int>(v);
  };
  fill(nvml.curr_gen, link.current_gen);
  fill(nvml.curr_width, link.current_width);
  fill(nvml.max_gen, link.max_gen);
  fill(nvml.max_width, link.max_width);
}

}  // namespace

void enrich_with_nvml(Topology& topo) {
  const nvml::Session session;
  if (!session.started()) {
    topo.nvml_error = session.why_not();
    topo.missing.push_back({"NVML", topo.nvml_error + ": no names, NVLink or driver version"});
    return;
  }
  const TopoCalls nvml(session);
  if (!nvml.complete()) {
    topo.nvml_error = session.library() +
                      " lacks nvmlDeviceGetName or nvmlDeviceGetNvLinkState (a driver older than "
                      "R450?)";
    topo.missing.push_back({"NVML", topo.nvml_error});
    return;
  }
  topo.nvml_available = true;
  char version[96] = {};
  if (nvml.driver_version && nvml.driver_version(version, sizeof version) == kSuccess) {
    topo.driver_version = version;
  }
  for (Gpu& gpu : topo.gpus) {
    Device dev = nullptr;
    if (Return r = session.device(gpu.bdf, &dev); r != kSuccess) {
      topo.missing.push_back({"NVML data for " + gpu.bdf, session.why(r)});
      continue;
    }
    char name[96] = {};
    if (nvml.name(dev, name, sizeof name) == kSuccess) gpu.name = name;
    int major = 0, minor = 0;
    if (nvml.compute_capability && nvml.compute_capability(dev, &major, &minor) == kSuccess) {
      gpu.sm = major * 10 + minor;
    }
    read_pcie(nvml, dev, gpu.pcie);
    read_nvlinks(nvml, dev, topo, gpu);
    gpu.nvlinks_known = true;
  }
}

}  // namespace commtool::topo
