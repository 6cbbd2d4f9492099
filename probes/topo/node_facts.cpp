#include "probes/topo/node_facts.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace commtool::topo {

namespace {

std::string gpu_model(const Topology& topo, const Gpu& g) {
  if (!g.name.empty()) return g.name;
  const PciNode* node = topo.find_pci(g.bdf);
  return node != nullptr ? fmt::format("PCI device 0x{:04x}", node->device) : "unnamed GPU";
}

std::string nic_key(const Nic& n) {
  return n.bdf.empty() ? n.name : n.bdf;
}

}  // namespace

std::string describe(const NicFacts& nic) {
  if (nic.name.empty()) return nic.key;
  if (nic.key == nic.name) return nic.name;
  return fmt::format("{} ({})", nic.name, nic.key);
}

NodeFacts node_facts(const Topology& topo, const Analysis& analysis,
                     const StackVersions& versions) {
  NodeFacts f;
  for (size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& g = topo.gpus[i];
    GpuFacts gf;
    gf.bus_id = g.bdf;
    gf.model = gpu_model(topo, g);
    gf.numa_node = g.numa_node;
    gf.pcie_width = g.pcie.current_width;
    gf.pcie_max_gen = g.pcie.attainable_gen();
    gf.pcie_max_width = g.pcie.attainable_width();
    if (g.nvlinks_known) {
      gf.nvlinks_active = static_cast<int>(std::count_if(g.nvlinks.begin(), g.nvlinks.end(),
                                                         [](const NvLink& l) { return l.active; }));
    }
    // nic_pairing is built in the order of topo.gpus (classify.cpp).
    if (i < analysis.nic_pairing.size() && analysis.nic_pairing[i].nic >= 0) {
      const NicPairing& p = analysis.nic_pairing[i];
      gf.nic = nic_key(topo.nics[static_cast<size_t>(p.nic)]);
      gf.nic_path = label(p.path.path);
    }
    f.gpus.push_back(std::move(gf));
  }
  for (const Nic& n : topo.nics) {
    f.nics.push_back({nic_key(n), n.name, to_string(n.kind), n.port_rate_gbps, n.numa_node,
                      n.pcie.current_width});
  }
  std::sort(f.gpus.begin(), f.gpus.end(),
            [](const GpuFacts& a, const GpuFacts& b) { return a.bus_id < b.bus_id; });
  std::sort(f.nics.begin(), f.nics.end(),
            [](const NicFacts& a, const NicFacts& b) { return a.key < b.key; });
  f.nvswitches = static_cast<int>(topo.nvswitches.size());
  f.driver_version = topo.driver_version;
  f.cuda_version = versions.cuda;
  f.nccl_version = versions.nccl;
  return f;
}

}  // namespace commtool::topo

namespace commtool::topo {

std::string fingerprint(const NodeFacts& f) {
  // Every text field is written with its length first, so no two different lists of fields
  // can give the same string, whatever bytes the names hold.
  std::string out;
  auto text = [&](const std::string& s) { out += fmt::format("{}:{};", s.size(), s); };
  auto number = [&](auto v) { out += fmt::format("{};", v); };
  number(f.gpus.size());
  for (const GpuFacts& g : f.gpus) {
    text(g.bus_id);
    text(g.model);
    number(g.numa_node);
    number(g.pcie_width);
    number(g.pcie_max_gen);
    number(g.pcie_max_width);
    number(g.nvlinks_active);
    text(g.nic);
    text(g.nic_path);
  }
  number(f.nics.size());
  for (const NicFacts& n : f.nics) {
    text(n.key);
    text(n.name);
    text(n.kind);
    number(n.port_rate_gbps);
    number(n.numa_node);
    number(n.pcie_width);
  }
  number(f.nvswitches);
  text(f.driver_version);
  text(f.cuda_version);
  text(f.nccl_version);
  return out;
}

}  // namespace commtool::topo
