#include "probes/topo/cluster.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "probes/base/int_runs.hpp"
#include "probes/base/tool_packages.hpp"

namespace commtool::topo {

namespace {

std::string or_unknown(const std::string& s) {
  return s.empty() ? "unknown" : s;
}

std::string gen_text(int gen) {
  return gen > 0 ? fmt::format("Gen{}", gen) : "unknown";
}

std::string width_text(int width) {
  return width > 0 ? fmt::format("x{}", width) : "unknown";
}

std::string numa_text(int numa) {
  return numa == kUnknownNuma ? "unknown" : std::to_string(numa);
}

std::string gpu_name(const GpuFacts& g) {
  return fmt::format("GPU {} ({})", g.bus_id, g.model);
}

// The command that reads a PCIe link's state as the kernel has it, with its package.
std::string lspci_link(const std::string& bus_id) {
  return fmt::format(
      "`lspci -vv -s {}` ({}; LnkCap is what it can do, LnkSta what it trained "
      "to)",
      bus_id, tools::kPciutils);
}

// Where NUMA placement differs between nodes of one kind, the BIOS does.
std::string numa_advice() {
  return fmt::format(
      "compare the BIOS NUMA settings (NPS, sub-NUMA clustering) of these nodes with the common "
      "ones'; `numactl -H` ({}) shows the layout",
      tools::kNumactl);
}

// How to look at a NIC's port: ibstat for RDMA devices, ethtool for plain Ethernet.
std::string port_check(const NicFacts& n) {
  const std::string name = n.name.empty() ? n.key : n.name;
  if (n.kind == "Ethernet") return fmt::format("`ethtool {}` ({})", name, tools::kEthtool);
  return fmt::format("`ibstat {}` ({}) or `ibv_devinfo -d {}` ({})", name, tools::kInfinibandDiags,
                     name, tools::kIbverbsUtils);
}

const NicFacts* find_nic(const NodeFacts& f, const std::string& key) {
  auto it =
      std::find_if(f.nics.begin(), f.nics.end(), [&](const NicFacts& n) { return n.key == key; });
  return it != f.nics.end() ? &*it : nullptr;
}

std::string pairing_text(const NodeFacts& f, const GpuFacts& g) {
  if (g.nic.empty()) return "no NIC";
  const NicFacts* nic = find_nic(f, g.nic);
  return fmt::format("{} through {}", nic != nullptr ? describe(*nic) : g.nic, g.nic_path);
}

// Items of two lists sorted by key, walked together: both(a, b), only_common(a), only_node(b).
template <typename T, typename Key, typename Both, typename OnlyCommon, typename OnlyNode>
void walk(const std::vector<T>& common, const std::vector<T>& node, Key key, Both both,
          OnlyCommon only_common, OnlyNode only_node) {
  std::map<std::string, const T*> here;
  for (const T& t : node)
    here.emplace(key(t), &t);
  for (const T& c : common) {
    auto it = here.find(key(c));
    if (it == here.end()) {
      only_common(c);
    } else {
      both(c, *it->second);
      here.erase(it);
    }
  }
  for (const T& n : node) {
    if (here.count(key(n))) only_node(n);
  }
}

void compare_link(const GpuFacts& c, const GpuFacts& n, std::vector<Difference>& out) {
  const std::string here = fmt::format("this node: {} now, {} {} at best", width_text(n.pcie_width),
                                       gen_text(n.pcie_max_gen), width_text(n.pcie_max_width));
  const std::string common =
      fmt::format("common configuration: {} now, {} {} at best", width_text(c.pcie_width),
                  gen_text(c.pcie_max_gen), width_text(c.pcie_max_width));
  const std::string evidence = here + "; " + common;
  if (n.pcie_width != c.pcie_width) {
    if (n.pcie_width == 0) {
      out.push_back({"pcie-link-down",
                     fmt::format("{}: PCIe link width unreadable or 0 (is the link down?) where "
                                 "the common configuration trains {}",
                                 gpu_name(n), width_text(c.pcie_width)),
                     evidence,
                     fmt::format("on these nodes read the link with {} and `dmesg` for Xid 79 "
                                 "(fallen off the bus); a link that stays down needs the GPU "
                                 "reseated or the node drained",
                                 lspci_link(n.bus_id))});
    } else if (c.pcie_width > 0 && n.pcie_width < c.pcie_width) {
      out.push_back({"pcie-width-below-common",
                     fmt::format("{}: PCIe link trained at {}, narrower than the common {}",
                                 gpu_name(n), width_text(n.pcie_width), width_text(c.pcie_width)),
                     evidence,
                     fmt::format("reseat GPU {} or its riser on these nodes (the width does not "
                                 "drop at idle); confirm with {}",
                                 n.bus_id, lspci_link(n.bus_id))});
    } else {
      out.push_back(
          {"pcie-width-differs",
           fmt::format("{}: PCIe link trained at {} where the common configuration has {}",
                       gpu_name(n), width_text(n.pcie_width), width_text(c.pcie_width)),
           evidence,
           fmt::format("read GPU {}'s link with {} on one of these nodes and on a common one: "
                       "the narrower is the one to reseat",
                       n.bus_id, lspci_link(n.bus_id))});
    }
  }
  if (n.pcie_max_gen != c.pcie_max_gen) {
    const bool below = n.pcie_max_gen > 0 && n.pcie_max_gen < c.pcie_max_gen;
    out.push_back(
        {below ? "pcie-gen-below-common" : "pcie-gen-differs",
         fmt::format("{}: PCIe reaches {} at best (GPU and slot together) where the "
                     "common configuration reaches {}",
                     gpu_name(n), gen_text(n.pcie_max_gen), gen_text(c.pcie_max_gen)),
         evidence,
         fmt::format("compare the BIOS PCIe speed setting of {} nodes with the others', "
                     "and the slot and riser of GPU {}: {}",
                     below ? "these" : "these and the common", n.bus_id, lspci_link(n.bus_id))});
  }
  if (n.pcie_max_width != c.pcie_max_width) {
    const bool below = n.pcie_max_width > 0 && n.pcie_max_width < c.pcie_max_width;
    out.push_back(
        {below ? "pcie-max-width-below-common" : "pcie-max-width-differs",
         fmt::format("{}: PCIe can train to {} at best (GPU and slot together) where "
                     "the common configuration can train to {}",
                     gpu_name(n), width_text(n.pcie_max_width), width_text(c.pcie_max_width)),
         evidence,
         fmt::format("GPU {} sits in a slot or riser with {} lanes than the common nodes': move "
                     "it or replace the riser; {} shows the slot's LnkCap",
                     n.bus_id, below ? "fewer" : "other", lspci_link(n.bus_id))});
  }
}

void compare_gpu(const NodeFacts& common, const NodeFacts& node, const GpuFacts& c,
                 const GpuFacts& n, std::vector<Difference>& out) {
  if (n.model != c.model) {
    out.push_back({"gpu-model-differs",
                   fmt::format("GPU {} is a {} where the common configuration has a {}", n.bus_id,
                               n.model, c.model),
                   fmt::format("this node: {}; common configuration: {}", n.model, c.model),
                   "keep a job on one GPU model (a collective runs at its slowest GPU): leave "
                   "these nodes out of the job's host list or give them a partition of their "
                   "own"});
  }
  compare_link(c, n, out);
  if (n.nvlinks_active != c.nvlinks_active && n.nvlinks_active >= 0 && c.nvlinks_active >= 0) {
    out.push_back({"nvlink-count-differs",
                   fmt::format("{}: {} NVLink(s) active where the common configuration has {}",
                               gpu_name(n), n.nvlinks_active, c.nvlinks_active),
                   fmt::format("active NVLinks: this node {}, common configuration {}",
                               n.nvlinks_active, c.nvlinks_active),
                   fmt::format("on these nodes `nvidia-smi nvlink -s -i {}` ({}) lists the links "
                               "down; check the fabric manager log; a link that stays down after "
                               "a GPU reset is a hardware ticket",
                               n.bus_id, tools::kNvidiaSmi)});
  }
  if (n.numa_node != c.numa_node) {
    out.push_back({"gpu-numa-differs",
                   fmt::format("{} is on NUMA node {} where the common configuration has it on {}",
                               gpu_name(n), numa_text(n.numa_node), numa_text(c.numa_node)),
                   fmt::format("NUMA node: this node {}, common configuration {}",
                               numa_text(n.numa_node), numa_text(c.numa_node)),
                   numa_advice()});
  }
  if (n.nic != c.nic || n.nic_path != c.nic_path) {
    out.push_back(
        {"nic-pairing-differs",
         fmt::format("{}: NCCL would pair it with {} where the common configuration pairs it "
                     "with {}",
                     gpu_name(n), pairing_text(node, n), pairing_text(common, c)),
         fmt::format("closest NIC by PCIe path (PIX nearest, SYS farthest): this node {}; common "
                     "configuration {}",
                     pairing_text(node, n), pairing_text(common, c)),
         c.nic.empty() ? std::string("check why these nodes have a NIC near this GPU where the "
                                     "common ones have none (the NIC differences above)")
                       : fmt::format("check that the NIC the common configuration pairs it with "
                                     "({}) is present and up on these nodes: {}",
                                     pairing_text(common, c),
                                     find_nic(common, c.nic) != nullptr
                                         ? port_check(*find_nic(common, c.nic))
                                         : fmt::format("`ibstat` ({})", tools::kInfinibandDiags))});
  }
}

void compare_nic(const NicFacts& c, const NicFacts& n, std::vector<Difference>& out) {
  const std::string name = "NIC " + describe(n);
  if (n.kind != c.kind) {
    out.push_back(
        {"nic-kind-differs",
         fmt::format("{} is {} where the common configuration has {}", name, n.kind, c.kind),
         fmt::format("link layer: this node {}, common configuration {}", n.kind, c.kind),
         fmt::format("set {}'s port back to {} (its firmware's link type, e.g. with NVIDIA's "
                     "mlxconfig) or check the switch port it is cabled to; {} shows the link layer",
                     describe(n), c.kind, port_check(n))});
  }
  if (n.port_rate_gbps != c.port_rate_gbps) {
    auto rate = [](double r) { return r > 0 ? fmt::format("{:g} Gbit/s", r) : "unknown"; };
    out.push_back({"nic-rate-differs",
                   fmt::format("{} runs at {} where the common configuration runs at {}", name,
                               rate(n.port_rate_gbps), rate(c.port_rate_gbps)),
                   fmt::format("port rate: this node {}, common configuration {}",
                               rate(n.port_rate_gbps), rate(c.port_rate_gbps)),
                   fmt::format("check {}'s cable, transceiver and switch port on these nodes: {} "
                               "shows the rate it trained to",
                               describe(n), port_check(n))});
  }
  if (n.pcie_width != c.pcie_width) {
    out.push_back({"nic-pcie-width-differs",
                   fmt::format("{}: PCIe link trained at {} where the common configuration has {}",
                               name, width_text(n.pcie_width), width_text(c.pcie_width)),
                   fmt::format("PCIe width now: this node {}, common configuration {}",
                               width_text(n.pcie_width), width_text(c.pcie_width)),
                   n.key == n.name ? fmt::format("reseat NIC {} or check its slot", describe(n))
                                   : fmt::format("reseat NIC {} or check its slot: {}", describe(n),
                                                 lspci_link(n.key))});
  }
  if (n.numa_node != c.numa_node) {
    out.push_back({"nic-numa-differs",
                   fmt::format("{} is on NUMA node {} where the common configuration has it on {}",
                               name, numa_text(n.numa_node), numa_text(c.numa_node)),
                   fmt::format("NUMA node: this node {}, common configuration {}",
                               numa_text(n.numa_node), numa_text(c.numa_node)),
                   numa_advice()});
  }
}

// How many GPUs of a node are paired with each NIC (by NicFacts::key), GPUs without one left out.
std::map<std::string, std::vector<const GpuFacts*>> gpus_per_nic(const NodeFacts& f) {
  std::map<std::string, std::vector<const GpuFacts*>> out;
  for (const GpuFacts& g : f.gpus) {
    if (!g.nic.empty()) out[g.nic].push_back(&g);
  }
  return out;
}

// "8 GPUs on 7 NICs (mlx5_0 carries 2)": how a node spreads its GPUs over its NICs.
std::string sharing_text(const NodeFacts& f) {
  const auto per_nic = gpus_per_nic(f);
  size_t paired = 0;
  std::string crowded;
  for (const auto& [key, gpus] : per_nic) {
    paired += gpus.size();
    if (gpus.size() < 2) continue;
    const NicFacts* nic = find_nic(f, key);
    crowded += fmt::format("{}{} carries {}", crowded.empty() ? "" : ", ",
                           nic != nullptr ? describe(*nic) : key, gpus.size());
  }
  return fmt::format("{} GPU(s) on {} NIC(s){}", paired, per_nic.size(),
                     crowded.empty() ? " (one each)" : " (" + crowded + ")");
}

// A NIC carrying another number of GPUs than the same GPUs' NICs carry in the common
// configuration: their share of the network differs, which per-GPU pairing alone does not say
// (a GPU keeping its own NIC while a neighbour falls back onto it has the same pairing).
void compare_nic_sharing(const NodeFacts& common, const NodeFacts& node,
                         std::vector<Difference>& out) {
  struct Share {
    size_t gpus = 0;  // on the GPU's NIC there
    double rate = 0;  // that NIC's rate; 0 unknown
  };
  std::map<std::string, Share> common_share;  // by bus id
  for (const auto& [key, gpus] : gpus_per_nic(common)) {
    const NicFacts* nic = find_nic(common, key);
    for (const GpuFacts* g : gpus)
      common_share[g->bus_id] = {gpus.size(), nic != nullptr ? nic->port_rate_gbps : 0};
  }
  const std::string evidence = fmt::format("GPUs per NIC: this node {}; common configuration {}",
                                           sharing_text(node), sharing_text(common));
  auto rate = [](double gbps) { return fmt::format("{:.1f} GB/s", gbps / 8); };
  for (const auto& [key, gpus] : gpus_per_nic(node)) {
    const size_t here = gpus.size();
    size_t there = 0;  // the most GPUs the common configuration puts on any of these GPUs' NICs
    double there_rate = 0;
    std::vector<std::string> bus_ids;
    for (const GpuFacts* g : gpus) {
      bus_ids.push_back(g->bus_id);
      auto it = common_share.find(g->bus_id);
      if (it == common_share.end()) continue;  // no NIC there, or no such GPU: said elsewhere
      if (it->second.gpus > there) {
        there = it->second.gpus;
        there_rate = it->second.rate;
      }
    }
    if (there == 0 || there == here) continue;
    const NicFacts* nic = find_nic(node, key);
    const std::string nic_name = nic != nullptr ? describe(*nic) : key;
    const double here_rate = nic != nullptr ? nic->port_rate_gbps : 0;
    const std::string gpus_text = fmt::format("{}", fmt::join(bus_ids, ", "));
    const std::string common_text = there == 1
                                        ? "each has a NIC of its own"
                                        : fmt::format("their NICs carry {} GPUs at most", there);
    std::string expect;
    if (here_rate > 0 && there_rate > 0) {
      expect =
          fmt::format(": across nodes each can expect {} where the common configuration gives {}",
                      rate(here_rate / static_cast<double>(here)),
                      rate(there_rate / static_cast<double>(there)));
    }
    out.push_back(
        {"nic-sharing-differs",
         here == 1 ? fmt::format("GPU {} has NIC {} to itself where the common "
                                 "configuration shares its NIC among {} GPUs{}",
                                 gpus_text, nic_name, there, expect)
                   : fmt::format("GPUs {} share NIC {}, {} to one, where in the common "
                                 "configuration {}{}",
                                 gpus_text, nic_name, here, common_text, expect),
         evidence,
         here > there
             ? fmt::format("a NIC these GPUs use elsewhere is missing or down on these "
                           "nodes (the NIC differences above say which): bring it back, "
                           "{}; until then these GPUs' ranks are the slow ones across "
                           "nodes",
                           "check with " + (nic != nullptr ? port_check(*nic)
                                                           : fmt::format("`ibstat` ({})",
                                                                         tools::kInfinibandDiags)))
             : "these nodes have more NICs for these GPUs than the common ones: check "
               "whether the common nodes lack one (run `commtool topo` on one of "
               "them)"});
  }
}

void compare_version(const char* code, const char* what, const std::string& common,
                     const std::string& node, const std::string& advice,
                     std::vector<Difference>& out) {
  if (common == node) return;
  out.push_back({code,
                 fmt::format("{} {} where the common configuration has {}", what, or_unknown(node),
                             or_unknown(common)),
                 fmt::format("{}: this node {}, common configuration {}", what, or_unknown(node),
                             or_unknown(common)),
                 advice});
}

}  // namespace

std::vector<Difference> differences(const NodeFacts& common, const NodeFacts& node) {
  std::vector<Difference> devices, links;
  const std::string gpu_counts = fmt::format("GPUs: this node {}, common configuration {}",
                                             node.gpus.size(), common.gpus.size());
  walk(
      common.gpus, node.gpus, [](const GpuFacts& g) { return g.bus_id; },
      [&](const GpuFacts& c, const GpuFacts& n) { compare_gpu(common, node, c, n, links); },
      [&](const GpuFacts& c) {
        devices.push_back(
            {"gpu-missing", fmt::format("{} is missing", gpu_name(c)), gpu_counts,
             fmt::format("on these nodes `lspci -d 10de: -s {}` ({}) says whether it is on the "
                         "bus and `dmesg` for Xid 79 or NVRM errors says why the driver lost it; "
                         "drain the nodes until it is back",
                         c.bus_id, tools::kPciutils)});
      },
      [&](const GpuFacts& n) {
        devices.push_back({"gpu-extra",
                           fmt::format("{} is not in the common configuration", gpu_name(n)),
                           gpu_counts,
                           fmt::format("check that the common nodes have not lost GPU {} (`lspci "
                                       "-d 10de:`, {}, on one of them); else these are nodes of "
                                       "another kind for another partition",
                                       n.bus_id, tools::kPciutils)});
      });
  const std::string nic_counts = fmt::format("NICs: this node {}, common configuration {}",
                                             node.nics.size(), common.nics.size());
  walk(
      common.nics, node.nics, [](const NicFacts& n) { return n.key; },
      [&](const NicFacts& c, const NicFacts& n) { compare_nic(c, n, links); },
      [&](const NicFacts& c) {
        devices.push_back(
            {"nic-missing", fmt::format("NIC {} ({}) is missing", describe(c), c.kind), nic_counts,
             fmt::format("on these nodes check whether the NIC is on the bus (`lspci`, {}) and "
                         "its driver loaded (`dmesg | grep -i mlx5` for Mellanox); on a node that "
                         "has it, {} shows what it should be",
                         tools::kPciutils, port_check(c))});
      },
      [&](const NicFacts& n) {
        devices.push_back(
            {"nic-extra",
             fmt::format("NIC {} ({}) is not in the common configuration", describe(n), n.kind),
             nic_counts,
             fmt::format("check that the common nodes have not lost it; if it is not meant for "
                         "NCCL, leave it out on these nodes with NCCL_IB_HCA=^{} (InfiniBand and "
                         "RoCE) or NCCL_SOCKET_IFNAME",
                         n.name.empty() ? n.key : n.name)});
      });
  compare_nic_sharing(common, node, links);
  if (node.nvswitches != common.nvswitches) {
    devices.push_back({"nvswitch-count-differs",
                       fmt::format("{} NVSwitch(es) where the common configuration has {}",
                                   node.nvswitches, common.nvswitches),
                       fmt::format("NVSwitches: this node {}, common configuration {}",
                                   node.nvswitches, common.nvswitches),
                       fmt::format("on these nodes check the fabric manager (`systemctl status "
                                   "nvidia-fabricmanager`, its log) and `nvidia-smi -q` ({}) for "
                                   "the GPUs' fabric state; a missing NVSwitch is a hardware "
                                   "ticket",
                                   tools::kNvidiaSmi)});
  }
  std::vector<Difference> out = std::move(devices);
  out.insert(out.end(), links.begin(), links.end());
  const std::string driver = fmt::format(
      "install the common NVIDIA driver ({}) on these nodes, or leave them out of the job "
      "until they have it",
      or_unknown(common.driver_version));
  compare_version("driver-version-differs", "NVIDIA driver", common.driver_version,
                  node.driver_version, driver, out);
  compare_version("cuda-version-differs", "CUDA driver API", common.cuda_version, node.cuda_version,
                  "the CUDA driver API comes with the NVIDIA driver: " + driver, out);
  compare_version("nccl-version-differs", "NCCL", common.nccl_version, node.nccl_version,
                  fmt::format("run one NCCL ({}) on every node: the job's container image or "
                              "LD_LIBRARY_PATH decides which libnccl.so.2 loads; ranks of "
                              "different NCCL versions may fail to connect or hang",
                              or_unknown(common.nccl_version)),
                  out);
  return out;
}

std::string rank_ranges(const std::vector<int>& ranks) {
  return int_runs(ranks);
}

size_t ClusterView::differing_nodes() const {
  size_t n = 0;
  for (size_t c = 1; c < configurations.size(); ++c)
    n += configurations[c].nodes.size();
  return n;
}

ClusterView compare_cluster(const std::vector<RankPayload>& ranks) {
  ClusterView view;
  view.ranks = static_cast<int>(ranks.size());

  // Ranks to nodes: one node per host, source and configuration.
  std::vector<std::string> prints;  // per rank
  std::unordered_map<std::string, size_t> node_of;
  std::unordered_map<std::string, int> nodes_per_host;
  std::vector<std::string> node_prints;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankPayload& p = ranks[r];
    std::string print = fingerprint(p.facts);
    const std::string key =
        fmt::format("{}:{};{}:{};{}", p.host.size(), p.host, p.source.size(), p.source, print);
    auto [it, added] = node_of.emplace(key, view.nodes.size());
    if (added) {
      view.nodes.push_back({p.host, p.host, p.source, {}, 0});
      node_prints.push_back(std::move(print));
      ++nodes_per_host[p.host];
    }
    view.nodes[it->second].ranks.push_back(static_cast<int>(r));
  }
  view.hosts = static_cast<int>(nodes_per_host.size());
  for (ClusterNode& n : view.nodes) {
    if (nodes_per_host[n.host] > 1) n.label = fmt::format("{}/{}", n.host, n.ranks.front());
  }

  // Nodes to configurations, in the order of their first node.
  std::unordered_map<std::string, size_t> config_of;
  std::vector<Configuration> configs;
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    auto [it, added] = config_of.emplace(node_prints[i], configs.size());
    if (added) {
      configs.push_back({ranks[static_cast<size_t>(view.nodes[i].ranks.front())].facts, {}, 0, {}});
    }
    configs[it->second].nodes.push_back(i);
    configs[it->second].ranks += static_cast<int>(view.nodes[i].ranks.size());
  }
  if (configs.empty()) return view;

  // The common one first (the earliest among equals, as the configurations are in node order).
  size_t common = 0;
  for (size_t c = 1; c < configs.size(); ++c) {
    const Configuration& a = configs[c];
    const Configuration& b = configs[common];
    if (a.nodes.size() > b.nodes.size() ||
        (a.nodes.size() == b.nodes.size() && a.ranks > b.ranks)) {
      common = c;
    }
  }
  std::rotate(configs.begin(), configs.begin() + static_cast<std::ptrdiff_t>(common),
              configs.begin() + static_cast<std::ptrdiff_t>(common) + 1);
  for (size_t c = 1; c < configs.size(); ++c)
    configs[c].differences = differences(configs[0].facts, configs[c].facts);
  for (size_t c = 0; c < configs.size(); ++c) {
    for (size_t n : configs[c].nodes)
      view.nodes[n].configuration = c;
  }
  view.configurations = std::move(configs);
  return view;
}

}  // namespace commtool::topo
