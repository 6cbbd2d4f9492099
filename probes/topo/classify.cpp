#include "probes/topo/classify.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "probes/topo/findings.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::topo {

std::string label(PathClass p) {
  switch (p) {
    case PathClass::kSelf:
      return "X";
    case PathClass::kNvLink:
      return "NV";
    case PathClass::kPix:
      return "PIX";
    case PathClass::kPxb:
      return "PXB";
    case PathClass::kPhb:
      return "PHB";
    case PathClass::kNode:
      return "NODE";
    case PathClass::kSys:
      return "SYS";
  }
  return "?";
}

std::string label(const Connection& c) {
  if (c.path == PathClass::kNvLink) return "NV" + std::to_string(c.nvlinks);
  return label(c.path);
}

std::string describe(PathClass p) {
  switch (p) {
    case PathClass::kSelf:
      return "Self";
    case PathClass::kNvLink:
      return "Connection traversing a bonded set of # NVLinks";
    case PathClass::kPix:
      return "Connection traversing at most a single PCIe bridge (switch)";
    case PathClass::kPxb:
      return "Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
             "Bridge)";
    case PathClass::kPhb:
      return "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)";
    case PathClass::kNode:
      return "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
             "within a NUMA node";
    case PathClass::kSys:
      return "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
             "(e.g., QPI/UPI)";
  }
  return "?";
}

namespace {

// Where an endpoint hangs in the PCIe tree: its root complex and the switches above it,
// nearest first.
struct Placement {
  std::string root;
  int numa_node = kUnknownNuma;
  std::vector<std::string> hops;
};

constexpr int kMaxTreeDepth = 64;  // guards against a parent loop in a hand-written file

Placement placement_of(const Topology& topo, const std::string& bdf,
                       const std::string& root_if_no_bdf = {}) {
  Placement p;
  const PciNode* node = bdf.empty() ? nullptr : topo.find_pci(bdf);
  if (node == nullptr) {
    p.root = root_if_no_bdf;
  } else {
    p.root = node->root_complex;
    p.numa_node = node->numa_node;
    std::vector<std::string> bridges;
    for (std::string up = node->parent_bdf; !up.empty() && bridges.size() < kMaxTreeDepth;) {
      bridges.push_back(up);
      const PciNode* parent = topo.find_pci(up);
      up = parent ? parent->parent_bdf : std::string();
    }
    // NCCL's sysfs walk keeps every second bridge: a switch's downstream port and its upstream
    // port are one hop.
    for (size_t i = topo.pci_hops_collapsed ? 0 : 1; i < bridges.size();
         i += topo.pci_hops_collapsed ? 1 : 2) {
      p.hops.push_back(bridges[i]);
    }
  }
  if (const RootComplex* rc = topo.find_root(p.root); rc && rc->numa_node != kUnknownNuma) {
    p.numa_node = rc->numa_node;
  }
  return p;
}

Connection classify(const Placement& a, const Placement& b) {
  Connection c;
  if (a.root.empty() || b.root.empty()) {
    c.path = PathClass::kSys;  // not in the tree: assume the farthest
    return c;
  }
  if (a.root == b.root) {
    for (size_t ia = 0; ia < a.hops.size(); ++ia) {
      auto it = std::find(b.hops.begin(), b.hops.end(), a.hops[ia]);
      if (it != b.hops.end()) {
        size_t switches = ia + static_cast<size_t>(it - b.hops.begin()) + 1;
        c.path = switches == 1 ? PathClass::kPix : PathClass::kPxb;
        return c;
      }
    }
    c.path = PathClass::kPhb;
    return c;
  }
  if (a.numa_node == kUnknownNuma || b.numa_node == kUnknownNuma) {
    c.path = PathClass::kNode;
    c.numa_assumed = true;
    return c;
  }
  c.path = a.numa_node == b.numa_node ? PathClass::kNode : PathClass::kSys;
  return c;
}

int count_active_links(const Gpu& g, NvLinkPeer peer, const std::string& peer_bdf = {}) {
  return static_cast<int>(std::count_if(g.nvlinks.begin(), g.nvlinks.end(), [&](const NvLink& l) {
    return l.active && l.peer == peer && (peer_bdf.empty() || l.peer_bdf == peer_bdf);
  }));
}

Placement placement_of(const Topology& topo, const Nic& nic) {
  return placement_of(topo, nic.bdf, nic.root_complex);
}

}  // namespace

Connection classify_pcie(const Topology& topo, const std::string& bdf_a, const std::string& bdf_b) {
  if (bdf_a == bdf_b) return Connection{PathClass::kSelf, 0, false};
  return classify(placement_of(topo, bdf_a), placement_of(topo, bdf_b));
}

namespace {

uint16_t link_count(int n) {
  return static_cast<uint16_t>(std::min(n, 0xffff));
}

// NVLink between two GPUs, if any: direct links of a to b, else both on the NVSwitch fabric.
std::optional<Connection> nvlink_between(const Gpu& a, const Gpu& b, int a_switch, int b_switch) {
  if (int direct = count_active_links(a, NvLinkPeer::kGpu, b.bdf); direct > 0) {
    return Connection{PathClass::kNvLink, link_count(direct), false};
  }
  if (a_switch > 0 && b_switch > 0) {
    return Connection{PathClass::kNvLink, link_count(std::min(a_switch, b_switch)), false};
  }
  return std::nullopt;
}

}  // namespace

Connection classify_gpus(const Topology& topo, const Gpu& a, const Gpu& b) {
  if (a.bdf == b.bdf) return Connection{PathClass::kSelf, 0, false};
  if (auto nv = nvlink_between(a, b, count_active_links(a, NvLinkPeer::kNvSwitch),
                               count_active_links(b, NvLinkPeer::kNvSwitch))) {
    return *nv;
  }
  return classify_pcie(topo, a.bdf, b.bdf);
}

namespace {

ConnectionMatrix build_matrix(const Topology& topo) {
  ConnectionMatrix m;
  std::vector<Placement> places;
  for (const Gpu& g : topo.gpus) {
    m.labels.push_back("GPU" + std::to_string(g.index));
    places.push_back(placement_of(topo, g.bdf));
  }
  for (const Nic& n : topo.nics) {
    m.labels.push_back("NIC" + std::to_string(n.index));
    places.push_back(placement_of(topo, n));
  }
  // Placements and NVSwitch link counts once per endpoint, not once per pair.
  const size_t gpus = topo.gpus.size();
  std::vector<int> to_switch;
  for (const Gpu& g : topo.gpus)
    to_switch.push_back(count_active_links(g, NvLinkPeer::kNvSwitch));
  // The PCIe path is symmetric, so each pair is classified once; NVLink is counted from each
  // end, since the two ends may disagree (a link up at one end only).
  m.cells.assign(places.size(), std::vector<Connection>(places.size()));
  for (size_t r = 0; r < places.size(); ++r) {
    m.cells[r][r] = Connection{PathClass::kSelf, 0, false};
    for (size_t c = r + 1; c < places.size(); ++c) {
      const Connection pcie = classify(places[r], places[c]);
      m.cells[r][c] = pcie;
      m.cells[c][r] = pcie;
      if (r < gpus && c < gpus) {
        if (auto nv = nvlink_between(topo.gpus[r], topo.gpus[c], to_switch[r], to_switch[c]))
          m.cells[r][c] = *nv;
        if (auto nv = nvlink_between(topo.gpus[c], topo.gpus[r], to_switch[c], to_switch[r]))
          m.cells[c][r] = *nv;
      }
    }
  }
  return m;
}

// NCCL gives each GPU the NICs on its best path (ties broken by port rate), and spreads GPUs
// that share the same best set over it round-robin in GPU order.
std::vector<NicPairing> pair_nics(const Topology& topo, const ConnectionMatrix& m) {
  std::vector<NicPairing> out;
  const size_t gpus = topo.gpus.size();
  std::map<std::vector<int>, int> group_next;  // candidate set -> next slot
  for (size_t g = 0; g < gpus; ++g) {
    NicPairing p;
    p.gpu = topo.gpus[g].index;
    std::vector<int> best;
    for (size_t n = 0; n < topo.nics.size(); ++n) {
      const Connection& c = m.cells[g][gpus + n];
      if (best.empty() || c.path < m.cells[g][gpus + static_cast<size_t>(best[0])].path) {
        best.assign(1, static_cast<int>(n));
      } else if (c.path == m.cells[g][gpus + static_cast<size_t>(best[0])].path) {
        best.push_back(static_cast<int>(n));
      }
    }
    if (!best.empty()) {
      double top_rate = 0;
      for (int n : best)
        top_rate = std::max(top_rate, topo.nics[static_cast<size_t>(n)].port_rate_gbps);
      std::erase_if(
          best, [&](int n) { return topo.nics[static_cast<size_t>(n)].port_rate_gbps < top_rate; });
      int slot = group_next[best]++;
      auto chosen = static_cast<size_t>(best[static_cast<size_t>(slot) % best.size()]);
      p.nic = topo.nics[chosen].index;
      p.path = m.cells[g][gpus + chosen];
    }
    out.push_back(p);
  }
  return out;
}

std::vector<GpuLinkRates> link_rates(const Topology& topo) {
  std::vector<GpuLinkRates> out;
  for (const Gpu& g : topo.gpus) {
    GpuLinkRates r;
    r.gpu = g.index;
    r.pcie_raw_gbps = pcie_raw_gbps(g.pcie.attainable_gen(), g.pcie.attainable_width());
    r.pcie_payload_gbps = pcie_payload_gbps(g.pcie.attainable_gen(), g.pcie.attainable_width());
    r.pcie_current_raw_gbps = pcie_raw_gbps(g.pcie.current_gen, g.pcie.current_width);
    for (const NvLink& l : g.nvlinks) {
      if (!l.active) continue;
      ++r.nvlink_active;
      r.nvlink_generation = std::max(r.nvlink_generation, l.generation);
    }
    r.nvlink_gbps = r.nvlink_active * nvlink_link_gbps(r.nvlink_generation);
    out.push_back(r);
  }
  return out;
}

}  // namespace

Analysis analyze(const Topology& topo) {
  Analysis a;
  a.matrix = build_matrix(topo);
  a.nic_pairing = pair_nics(topo, a.matrix);
  a.rates = link_rates(topo);
  a.p2p = p2p_verdicts(topo, a.matrix);
  a.p2p_summary = p2p_summary(topo);
  a.findings = find_problems(topo, a);
  return a;
}

MatrixSummary summarise_matrix(const ConnectionMatrix& m, size_t gpus) {
  using Key = std::pair<PathClass, uint16_t>;  // counted by value: 8 M pairs, no string each
  std::map<Key, size_t> gpu_pairs, gpu_nic_pairs;
  for (size_t r = 0; r < gpus && r < m.cells.size(); ++r) {
    for (size_t c = r + 1; c < m.cells[r].size(); ++c) {
      const Connection& cell = m.cells[r][c];
      ++(c < gpus ? gpu_pairs : gpu_nic_pairs)[{cell.path, cell.nvlinks}];
    }
  }
  auto listed = [](const std::map<Key, size_t>& counts) {
    std::vector<PathCount> out;
    for (const auto& [key, n] : counts)
      out.push_back({Connection{key.first, key.second, false}, n});
    return out;
  };
  return {listed(gpu_pairs), listed(gpu_nic_pairs)};
}

}  // namespace commtool::topo
