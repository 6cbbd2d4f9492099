#include "probes/topo/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "probes/base/error.hpp"

namespace commtool::topo {

int PcieLink::attainable_gen() const {
  if (port_max_gen > 0 && max_gen > 0) return std::min(port_max_gen, max_gen);
  return max_gen;
}

int PcieLink::attainable_width() const {
  if (port_max_width > 0 && max_width > 0) return std::min(port_max_width, max_width);
  return max_width;
}

namespace {

// The element at the indexed position when the index is current for it, else a linear search.
template <typename T>
const T* lookup(const std::vector<T>& items, const std::unordered_map<std::string, size_t>& index,
                const std::string& bdf) {
  if (auto hit = index.find(bdf);
      hit != index.end() && hit->second < items.size() && items[hit->second].bdf == bdf) {
    return &items[hit->second];
  }
  auto it = std::find_if(items.begin(), items.end(), [&](const T& x) { return x.bdf == bdf; });
  return it == items.end() ? nullptr : &*it;
}

}  // namespace

void check_device_counts(const Topology& topo) {
  auto refuse = [&](size_t n, const char* what, size_t most) {
    throw usage_error(
        fmt::format("{}: {} {}; commtool reads topologies of at most {} {} (its "
                    "connection matrix grows with their square)",
                    excerpt(topo.source), n, what, most, what));
  };
  if (topo.gpus.size() > kMaxTopologyGpus) refuse(topo.gpus.size(), "GPUs", kMaxTopologyGpus);
  if (topo.nics.size() > kMaxTopologyNics) refuse(topo.nics.size(), "NICs", kMaxTopologyNics);
}

void Topology::reindex() {
  pci_index_.clear();
  gpu_index_.clear();
  for (size_t i = 0; i < pci.size(); ++i)
    pci_index_.emplace(pci[i].bdf, i);
  for (size_t i = 0; i < gpus.size(); ++i)
    gpu_index_.emplace(gpus[i].bdf, i);
}

const PciNode* Topology::find_pci(const std::string& bdf) const {
  return lookup(pci, pci_index_, bdf);
}

const RootComplex* Topology::find_root(const std::string& id) const {
  auto it = std::find_if(root_complexes.begin(), root_complexes.end(),
                         [&](const RootComplex& r) { return r.id == id; });
  return it == root_complexes.end() ? nullptr : &*it;
}

const Gpu* Topology::find_gpu_by_bdf(const std::string& bdf) const {
  return lookup(gpus, gpu_index_, bdf);
}

namespace {

bool parse_hex_field(const std::string& text, size_t max_digits, unsigned& value) {
  if (text.empty() || text.size() > max_digits) return false;
  value = 0;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    value = value * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c))
                                                   ? c - '0'
                                                   : std::tolower(c) - 'a' + 10);
  }
  return true;
}

}  // namespace

std::optional<std::string> canonical_bdf(const std::string& text) {
  // domain:bus:device.function, the domain optional (NVML pads it to 8 digits).
  std::string domain = "0", bus, dev, fn;
  auto last_colon = text.rfind(':');
  auto dot = text.rfind('.');
  if (last_colon == std::string::npos || dot == std::string::npos || dot < last_colon) {
    return std::nullopt;
  }
  dev = text.substr(last_colon + 1, dot - last_colon - 1);
  fn = text.substr(dot + 1);
  std::string head = text.substr(0, last_colon);
  auto first_colon = head.rfind(':');
  if (first_colon == std::string::npos) {
    bus = head;
  } else {
    domain = head.substr(0, first_colon);
    bus = head.substr(first_colon + 1);
  }
  unsigned d = 0, b = 0, s = 0, f = 0;
  if (!parse_hex_field(domain, 8, d) || d > 0xffff || !parse_hex_field(bus, 2, b) ||
      !parse_hex_field(dev, 2, s) || s > 0x1f || !parse_hex_field(fn, 1, f) || f > 7) {
    return std::nullopt;
  }
  char out[16];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", d, b, s, f);
  return std::string(out);
}

std::optional<std::vector<int>> parse_cpulist(const std::string& cpulist) {
  // Linux numbers at most 8192 CPUs (NR_CPUS on x86-64 with MAXSMP); a list reaching far past
  // that is not a CPU list, and expanding it would only exhaust memory.
  constexpr int kMaxCpuId = 65535;
  std::vector<int> cpus;
  std::stringstream ss(cpulist);
  for (std::string range; std::getline(ss, range, ',');) {
    int lo = 0, hi = 0;
    char dash = 0;
    std::stringstream rs(range);
    if (!(rs >> lo) || lo < 0 || lo > kMaxCpuId) return std::nullopt;
    if (rs >> dash) {
      if (dash != '-' || !(rs >> hi) || hi < lo || hi > kMaxCpuId) return std::nullopt;
    } else {
      hi = lo;
    }
    for (int c = lo; c <= hi; ++c)
      cpus.push_back(c);
  }
  return cpus;
}

std::string to_string(NicKind kind) {
  switch (kind) {
    case NicKind::kInfiniBand:
      return "InfiniBand";
    case NicKind::kRoce:
      return "RoCE";
    case NicKind::kEthernet:
      return "Ethernet";
    case NicKind::kRdma:
      return "RDMA";
  }
  return "?";
}

std::string to_string(NvLinkPeer peer) {
  switch (peer) {
    case NvLinkPeer::kGpu:
      return "GPU";
    case NvLinkPeer::kNvSwitch:
      return "NVSwitch";
    case NvLinkPeer::kCpu:
      return "CPU";
    case NvLinkPeer::kUnknown:
      return "unknown";
  }
  return "?";
}

}  // namespace commtool::topo
