#include "probes/topo/findings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "probes/base/tool_packages.hpp"
#include "probes/topo/finding_rules.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::topo {

namespace {

using rules::gpu_name;

std::string nic_name(const Nic& n) {
  return n.name.empty() ? "NIC" + std::to_string(n.index) : n.name;
}

const Nic* find_nic(const Topology& topo, int index) {
  for (const Nic& n : topo.nics) {
    if (n.index == index) return &n;
  }
  return nullptr;
}

// Bridges between a device and its root complex that redirect peer requests upstream.
std::vector<std::string> acs_redirecting_bridges(const Topology& topo, const std::string& bdf) {
  std::vector<std::string> out;
  const PciNode* node = topo.find_pci(bdf);
  for (int depth = 0; node && !node->parent_bdf.empty() && depth < 64; ++depth) {
    node = topo.find_pci(node->parent_bdf);
    if (node && node->acs_p2p_redirect == 1) out.push_back(node->bdf);
  }
  return out;
}

}  // namespace

std::string p2p_refusal_reason(const Topology& topo, const Gpu& a, const Gpu& b,
                               const Connection& path) {
  if (path.path == PathClass::kSys) {
    return "the GPUs hang off different CPU sockets: the driver does not route PCIe "
           "peer-to-peer over the inter-socket link";
  }
  auto acs = acs_redirecting_bridges(topo, a.bdf);
  for (const auto& bridge : acs_redirecting_bridges(topo, b.bdf))
    acs.push_back(bridge);
  if (!acs.empty() && (path.path == PathClass::kPix || path.path == PathClass::kPxb)) {
    return fmt::format(
        "ACS P2P Request Redirect is enabled on bridge {}: peer requests are sent up to the "
        "root complex, which does not forward them (disable ACS on the switch ports)",
        acs.front());
  }
  if (topo.in_vm) {
    return "this is a virtual machine: the hypervisor does not expose peer-to-peer between "
           "passed-through GPUs";
  }
  if (path.path == PathClass::kNode) {
    return "the GPUs are under different PCIe root complexes: the chipset does not forward "
           "peer traffic between host bridges";
  }
  if (topo.iommu_groups > 0) {
    return fmt::format(
        "an IOMMU is active ({} groups): device-to-device DMA is translated and the driver "
        "disables P2P (boot with iommu=pt or turn off the IOMMU for these devices)",
        topo.iommu_groups);
  }
  return "the driver refuses P2P on this path (GPU model or driver policy)";
}

std::vector<P2pVerdict> p2p_verdicts(const Topology& topo, const ConnectionMatrix& m) {
  std::vector<P2pVerdict> out;
  // Unasked, every pair is unknown: p2p_summary says so once instead of once per pair.
  if (!topo.p2p_queried) return out;
  const size_t n = topo.gpus.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const Gpu& a = topo.gpus[i];
      const Gpu& b = topo.gpus[j];
      P2pVerdict v;
      v.gpu_a = a.index;
      v.gpu_b = b.index;
      // CUDA answers per ordered pair; a pair counts as usable only when both directions are.
      int answers = 0;
      bool both = true;
      for (const P2pPair& p : topo.p2p) {
        bool forward = p.gpu_a == a.index && p.gpu_b == b.index;
        bool backward = p.gpu_a == b.index && p.gpu_b == a.index;
        if (!forward && !backward) continue;
        ++answers;
        both = both && p.can_access;
        if (forward) {
          v.performance_rank = p.performance_rank;
          v.native_atomics = p.native_atomics;
        }
      }
      v.known = answers > 0;
      v.can_access = v.known && both;
      if (v.known && !v.can_access) v.reason = p2p_refusal_reason(topo, a, b, m.cells[i][j]);
      out.push_back(v);
    }
  }
  return out;
}

std::string p2p_summary(const Topology& topo) {
  if (topo.gpus.empty()) return "no GPU";
  if (topo.gpus.size() == 1) return "no peer: only one GPU, so there is no pair to connect";
  if (!topo.p2p_queried) return "unknown: CUDA was not asked (see Not available below)";
  return {};
}

namespace {

void pcie_findings(const Topology& topo, std::vector<Finding>& out) {
  for (const Gpu& g : topo.gpus) {
    const PcieLink& l = g.pcie;
    if (l.current_width > 0 && l.attainable_width() > 0 && l.current_width < l.attainable_width()) {
      out.push_back(
          {Severity::kWarning, "pcie-width-degraded",
           fmt::format("{} PCIe link trained to x{}, capable of x{}: host<->device "
                       "bandwidth is cut to {:.0f}%",
                       gpu_name(g), l.current_width, l.attainable_width(),
                       100.0 * l.current_width / l.attainable_width()),
           fmt::format(
               "current_link_width={} max_link_width={}{}", l.current_width, l.max_width,
               l.port_max_width ? fmt::format(" port max_link_width={}", l.port_max_width) : ""),
           "reseat the card or check the riser/slot; the link width does not drop at "
           "idle, so this is a hardware or BIOS problem"});
    }
    if (l.port_max_gen > 0 && l.max_gen > 0 && l.port_max_gen < l.max_gen) {
      out.push_back({Severity::kWarning, "pcie-slot-limits-gen",
                     fmt::format("{} supports PCIe Gen{} but its slot only Gen{}: the link "
                                 "cannot exceed {:.1f} GB/s per direction",
                                 gpu_name(g), l.max_gen, l.port_max_gen,
                                 pcie_raw_gbps(l.port_max_gen, l.attainable_width())),
                     fmt::format("device max_link_speed={}, upstream port max_link_speed={}",
                                 pcie_speed_string(l.max_gen), pcie_speed_string(l.port_max_gen)),
                     "move the GPU to a slot of its generation, or check the BIOS PCIe speed "
                     "setting"});
    }
    if (l.current_gen > 0 && l.attainable_gen() > 0 && l.current_gen < l.attainable_gen()) {
      out.push_back(
          {Severity::kNote, "pcie-gen-below-max",
           fmt::format("{} link runs at Gen{} now, capable of Gen{}: GPUs lower the "
                       "link generation when idle, so this is expected unless it "
                       "stays low under load",
                       gpu_name(g), l.current_gen, l.attainable_gen()),
           fmt::format("current_link_speed={} max_link_speed={}", pcie_speed_string(l.current_gen),
                       pcie_speed_string(l.attainable_gen())),
           fmt::format("read it again while a copy runs (`nvidia-smi -q -d PCIE` shows the "
                       "current generation; {})",
                       tools::kNvidiaSmi)});
    }
  }
}

void numa_unknown_findings(const Topology& topo, std::vector<Finding>& out) {
  for (const Gpu& g : topo.gpus) {
    if (g.numa_node != kUnknownNuma) continue;
    // Whether it matters depends on how many NUMA nodes there are, which may be unknown too.
    std::string consequence;
    Severity severity = Severity::kNote;
    if (topo.numa_node_count > 1) {
      severity = Severity::kWarning;
      consequence = fmt::format(
          ": with {} NUMA nodes, host memory and threads for it cannot be "
          "placed on its socket",
          topo.numa_node_count);
    } else if (topo.numa_node_count == 1) {
      consequence = ": the OS knows one NUMA node, so there is no placement to get wrong";
    } else {
      consequence =
          ": the number of NUMA nodes is unknown too, so whether placement matters "
          "cannot be told";
    }
    out.push_back(
        {severity, "numa-unknown",
         fmt::format("{} has no NUMA node (numa_node = -1){}", gpu_name(g), consequence),
         fmt::format("numa_node=-1, NUMA nodes on the machine: {}{}",
                     topo.numa_node_count > 0 ? std::to_string(topo.numa_node_count) : "unknown",
                     topo.in_vm ? ", hypervisor flag set (VM)" : ""),
         topo.in_vm ? "VMs often hide the NUMA layout; ask for a NUMA-aware instance type"
                    : "enable ACPI SRAT/NUMA in the BIOS"});
  }
}

// `far`: GPUs the stronger nic-farther-than-peers finding already names.
void nic_path_findings(const Topology& topo, const Analysis& a, const std::vector<int>& far,
                       std::vector<Finding>& out) {
  // nic_pairing is built in the order of topo.gpus.
  for (size_t k = 0; k < a.nic_pairing.size() && k < topo.gpus.size(); ++k) {
    const NicPairing& p = a.nic_pairing[k];
    const Nic* nic = find_nic(topo, p.nic);
    const Gpu& g = topo.gpus[k];
    if (nic == nullptr) continue;
    if (g.numa_node != kUnknownNuma && nic->numa_node != kUnknownNuma &&
        g.numa_node != nic->numa_node) {
      out.push_back({Severity::kWarning, "nic-numa-mismatch",
                     fmt::format("{} and its nearest NIC {} are on different NUMA nodes ({} vs "
                                 "{}): network traffic for this GPU crosses the inter-socket link",
                                 gpu_name(g), nic_name(*nic), g.numa_node, nic->numa_node),
                     fmt::format("path GPU{}-NIC{} is {}", g.index, nic->index, label(p.path)),
                     "put a NIC on the GPU's socket, or pin the rank's threads to the NIC's "
                     "NUMA node"});
    } else if (p.path.path >= PathClass::kPhb && is_rdma(nic->kind) &&
               std::find(far.begin(), far.end(), g.index) == far.end()) {
      // GPUDirect RDMA is a question only for an RDMA NIC: sockets always stage through host
      // memory, and the finding for GPUs farther than their peers already says this.
      out.push_back({Severity::kNote, "nic-behind-cpu",
                     fmt::format("{}'s nearest NIC {} is reached through the CPU ({}): NCCL "
                                 "uses GPUDirect RDMA only up to PXB by default",
                                 gpu_name(g), nic_name(*nic), label(p.path)),
                     fmt::format("path GPU{}-NIC{} is {}, NIC kind {}", g.index, nic->index,
                                 label(p.path), to_string(nic->kind)),
                     "expect network traffic to be staged through host memory; "
                     "NCCL_NET_GDR_LEVEL=PHB allows GPUDirect RDMA over this path"});
    }
  }
}

// Pairs are summarised per cause, so that eight GPUs on two sockets give one line, not sixteen.
// At most this many pairs or GPUs are spelled out in one finding; the rest are counted.
constexpr size_t kListedInAFinding = 8;

std::string listed(const std::vector<std::string>& items, size_t total) {
  std::string out = fmt::format("{}", fmt::join(items, ", "));
  if (total > items.size()) out += fmt::format(" and {} more", total - items.size());
  return out;
}

void gpu_pair_findings(const Topology& topo, const Analysis& a, std::vector<Finding>& out) {
  const size_t n = topo.gpus.size();
  auto pair = [&](size_t i, size_t j) {
    return fmt::format("GPU{}-GPU{} {}", topo.gpus[i].index, topo.gpus[j].index,
                       label(a.matrix.cells[i][j]));
  };
  std::string nv_example, pcie_example;
  std::vector<std::string> cross_root_pairs;
  size_t cross_root_count = 0;
  std::set<std::string> roots_seen;
  std::vector<const PciNode*> nodes;
  for (const Gpu& g : topo.gpus)
    nodes.push_back(topo.find_pci(g.bdf));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const Connection& c = a.matrix.cells[i][j];
      if (c.path == PathClass::kNvLink) {
        if (nv_example.empty()) nv_example = pair(i, j);
        continue;
      }
      if (pcie_example.empty()) pcie_example = pair(i, j);
      const PciNode* pa = nodes[i];
      const PciNode* pb = nodes[j];
      if (pa && pb && pa->root_complex != pb->root_complex) {
        if (++cross_root_count > kListedInAFinding) continue;
        cross_root_pairs.push_back(pair(i, j));
        roots_seen.insert(fmt::format("GPU{} under {}", topo.gpus[i].index, pa->root_complex));
        roots_seen.insert(fmt::format("GPU{} under {}", topo.gpus[j].index, pb->root_complex));
      }
    }
  }
  if (cross_root_count > 0) {
    out.push_back({Severity::kWarning, "different-root-complexes",
                   fmt::format("{} GPU pair(s) without NVLink sit under different root "
                               "complexes: their traffic crosses the CPU ({})",
                               cross_root_count, listed(cross_root_pairs, cross_root_count)),
                   fmt::format("{}", fmt::join(roots_seen, ", ")),
                   "keep tightly coupled ranks on GPUs of one root complex or PCIe switch"});
  }
  if (!nv_example.empty() && !pcie_example.empty()) {
    out.push_back({Severity::kWarning, "mixed-link-types",
                   "some GPU pairs talk over NVLink and others over PCIe: a ring or tree runs "
                   "at the pace of its slowest link",
                   fmt::format("{}; {}", nv_example, pcie_example),
                   "restrict the job to GPUs that share NVLink (CUDA_VISIBLE_DEVICES)"});
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> refused;  // reason -> pairs
  for (const P2pVerdict& v : a.p2p) {
    if (!v.known || v.can_access) continue;
    auto it = std::find_if(refused.begin(), refused.end(),
                           [&](const auto& r) { return r.first == v.reason; });
    if (it == refused.end()) it = refused.insert(refused.end(), {v.reason, {}});
    it->second.push_back(fmt::format("GPU{}-GPU{}", v.gpu_a, v.gpu_b));
  }
  for (const auto& [reason, pairs] : refused) {
    std::vector<std::string> shown(pairs.begin(),
                                   pairs.begin() + std::min(pairs.size(), kListedInAFinding));
    out.push_back(
        {Severity::kWarning, "p2p-unavailable",
         fmt::format("P2P is off for {}: NCCL and CUDA-IPC traffic between them is "
                     "staged through host memory",
                     listed(shown, pairs.size())),
         "cudaDeviceCanAccessPeer = 0; likely reason: " + reason,
         fmt::format("remove the cause named in the evidence (`nvidia-smi topo -p2p r` shows the "
                     "driver's own view; {}); until then NCCL moves data between these GPUs "
                     "through host memory, at a fraction of P2P bandwidth",
                     tools::kNvidiaSmi)});
  }
}

void nvlink_findings(const Topology& topo, std::vector<Finding>& out) {
  for (const Gpu& g : topo.gpus) {
    if (g.nvlinks.empty()) continue;
    auto active =
        std::count_if(g.nvlinks.begin(), g.nvlinks.end(), [](const NvLink& l) { return l.active; });
    if (active == static_cast<long>(g.nvlinks.size())) continue;
    if (active == 0 && topo.gpus.size() == 1) continue;  // nothing to link to
    std::string down;
    for (const NvLink& l : g.nvlinks) {
      if (!l.active) down += (down.empty() ? "" : ",") + std::to_string(l.link);
    }
    out.push_back(
        {Severity::kWarning, "nvlink-inactive",
         fmt::format("{} has {} of {} NVLinks active: its NVLink bandwidth is cut to "
                     "{:.0f}%",
                     gpu_name(g), active, g.nvlinks.size(),
                     100.0 * static_cast<double>(active) / static_cast<double>(g.nvlinks.size())),
         "inactive links: " + down + " (NVML nvmlDeviceGetNvLinkState)",
         fmt::format("check `nvidia-smi nvlink -s -i {}` ({}) and the fabric manager; a down "
                     "link usually needs a node drain and service",
                     g.index, tools::kNvidiaSmi)});
  }
}

void network_findings(const Topology& topo, std::vector<Finding>& out) {
  if (topo.gpus.empty()) return;
  bool file = !topo.read_from_sysfs();
  if (topo.nics.empty()) {
    out.push_back({Severity::kNote, "no-nic",
                   "no network device on the PCIe tree: NCCL cannot run across nodes from here",
                   file ? "no <nic> element and no network-class <pci> (class 0x02) in the file"
                        : "no /sys/class/infiniband or /sys/class/net device with a PCI address",
                   file ? "fine for one node; for a view of the network, dump the topology on "
                          "the machine itself (NCCL_TOPO_DUMP_FILE=FILE with any NCCL job) or "
                          "read it live"
                        : fmt::format("fine for one node; to run across nodes, check the NICs "
                                      "are on the bus (`lspci | grep -i -e ethernet -e "
                                      "infiniband`, {}) and, in a container, passed in "
                                      "(--network host, --device /dev/infiniband)",
                                      tools::kPciutils)});
    return;
  }
  if (std::none_of(topo.nics.begin(), topo.nics.end(),
                   [](const Nic& n) { return is_rdma(n.kind); })) {
    out.push_back({Severity::kNote, "no-rdma-nic",
                   "no RDMA NIC (InfiniBand or RoCE): across nodes NCCL would use its socket "
                   "transport, staged through host memory at a fraction of RDMA bandwidth",
                   fmt::format("{} NIC(s), all plain Ethernet", topo.nics.size()),
                   "fine for one node; for multi-node training use an instance type or fabric "
                   "with RDMA"});
  }
}

}  // namespace

std::vector<Finding> find_problems(const Topology& topo, const Analysis& analysis) {
  std::vector<Finding> out;
  rules::driver_findings(topo, out);
  pcie_findings(topo, out);
  const std::vector<int> far = rules::gpus_with_farther_nic(topo, analysis);
  rules::peer_findings(topo, analysis, far, out);
  numa_unknown_findings(topo, out);
  nic_path_findings(topo, analysis, far, out);
  rules::nic_sharing_findings(topo, analysis, out);
  gpu_pair_findings(topo, analysis, out);
  nvlink_findings(topo, out);
  rules::nvlink_symmetry_findings(topo, out);
  network_findings(topo, out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& x, const Finding& y) {
    return x.severity == Severity::kWarning && y.severity != Severity::kWarning;
  });
  return out;
}

}  // namespace commtool::topo
