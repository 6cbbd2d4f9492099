// Like against like: a fault that leaves a GPU working but slower shows only next to its
// peers. GPUs of one model in one machine are expected to have the same link width and
// generation and the same NVLink count; every GPU should be as close to a NIC as the best.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "probes/base/tool_packages.hpp"
#include "probes/topo/finding_rules.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::topo::rules {

namespace {

// GPUs grouped by model: the PCI device id where the source has one, else the name.
std::vector<std::vector<const Gpu*>> same_model_groups(const Topology& topo) {
  std::map<std::string, std::vector<const Gpu*>> groups;
  for (const Gpu& g : topo.gpus) {
    const PciNode* node = topo.find_pci(g.bdf);
    std::string key = node && node->device ? fmt::format("{:04x}", node->device) : g.name;
    groups[key].push_back(&g);
  }
  std::vector<std::vector<const Gpu*>> out;
  for (auto& [key, gpus] : groups) {
    if (gpus.size() >= 2) out.push_back(std::move(gpus));
  }
  return out;
}

std::string names(const std::vector<const Gpu*>& gpus) {
  std::vector<std::string> out;
  for (const Gpu* g : gpus)
    out.push_back("GPU" + std::to_string(g->index));
  return fmt::format("{}", fmt::join(out, ","));
}

std::string link_text(int gen, int width) {
  return fmt::format("Gen{} x{}", gen, width);
}

// The link each GPU can train to (device and slot maxima), against the best of its model.
void pcie_peer_findings(const std::vector<const Gpu*>& gpus, std::vector<Finding>& out) {
  double best = 0;
  const Gpu* best_gpu = nullptr;
  for (const Gpu* g : gpus) {
    double rate = pcie_payload_gbps(g->pcie.attainable_gen(), g->pcie.attainable_width());
    if (rate > best) best = rate, best_gpu = g;
  }
  if (best_gpu == nullptr) return;
  std::vector<const Gpu*> at_best;
  for (const Gpu* g : gpus) {
    if (pcie_payload_gbps(g->pcie.attainable_gen(), g->pcie.attainable_width()) == best)
      at_best.push_back(g);
  }
  for (const Gpu* g : gpus) {
    const PcieLink& l = g->pcie;
    double rate = pcie_payload_gbps(l.attainable_gen(), l.attainable_width());
    if (rate <= 0 || rate >= best) continue;
    out.push_back(
        {Severity::kWarning, "pcie-link-below-peers",
         fmt::format(
             "{} can reach only {} where {} of the same model reach{} {}: its host<->device "
             "bandwidth is at most {:.0f}% of theirs",
             gpu_name(*g), link_text(l.attainable_gen(), l.attainable_width()), names(at_best),
             at_best.size() == 1 ? "es" : "",
             link_text(best_gpu->pcie.attainable_gen(), best_gpu->pcie.attainable_width()),
             100.0 * rate / best),
         fmt::format("{}: device max {}, slot max {}; {}: {}", gpu_name(*g),
                     link_text(l.max_gen, l.max_width),
                     l.port_max_gen > 0 ? link_text(l.port_max_gen, l.port_max_width) : "unknown",
                     names(at_best),
                     link_text(best_gpu->pcie.attainable_gen(), best_gpu->pcie.attainable_width())),
         "a narrower or older slot, riser or retimer than its peers': move the GPU or have the "
         "slot checked; the job runs at the pace of the slowest GPU"});
  }
}

long active_links(const Gpu& g) {
  return std::count_if(g.nvlinks.begin(), g.nvlinks.end(),
                       [](const NvLink& l) { return l.active; });
}

// Active NVLinks against the most of the model. A GPU that reports inactive links is already
// named by nvlink-inactive; this catches the ones whose missing links are simply absent (an
// NCCL file lists only what is up; NVML may not list a link that never trained).
void nvlink_peer_findings(const std::vector<const Gpu*>& gpus, std::vector<Finding>& out) {
  long most = 0;
  std::vector<const Gpu*> known;
  for (const Gpu* g : gpus) {
    if (!g->nvlinks_known) continue;
    known.push_back(g);
    most = std::max(most, active_links(*g));
  }
  if (most == 0) return;
  std::vector<const Gpu*> at_most;
  for (const Gpu* g : known) {
    if (active_links(*g) == most) at_most.push_back(g);
  }
  for (const Gpu* g : known) {
    long active = active_links(*g);
    bool reports_down = std::any_of(g->nvlinks.begin(), g->nvlinks.end(),
                                    [](const NvLink& l) { return !l.active; });
    if (active >= most || reports_down) continue;
    out.push_back(
        {Severity::kWarning, "nvlink-below-peers",
         fmt::format("{} has {} NVLink(s) up where {} of the same model have {}: its NVLink "
                     "bandwidth is {:.0f}% of theirs",
                     gpu_name(*g), active, names(at_most), most,
                     100.0 * static_cast<double>(active) / static_cast<double>(most)),
         fmt::format("active links: {} {}, {} {}", gpu_name(*g), active, names(at_most), most),
         fmt::format("check `nvidia-smi nvlink -s -i {}` ({}) and the fabric manager log; a link "
                     "that does not train usually needs the node drained and serviced",
                     g->index, tools::kNvidiaSmi)});
  }
}

std::string gpus_named(const std::vector<int>& indices) {
  std::vector<std::string> out;
  for (int i : indices)
    out.push_back("GPU" + std::to_string(i));
  return fmt::format("{}", fmt::join(out, ","));
}

}  // namespace

std::vector<int> gpus_with_farther_nic(const Topology& topo, const Analysis& a) {
  std::vector<int> out;
  if (topo.nics.empty()) return out;
  PathClass best = PathClass::kSys;
  for (const NicPairing& p : a.nic_pairing) {
    if (p.nic >= 0) best = std::min(best, p.path.path);
  }
  if (best >= PathClass::kPhb) return out;  // no GPU has a close NIC: nothing to compare with
  for (const NicPairing& p : a.nic_pairing) {
    if (p.nic >= 0 && p.path.path >= PathClass::kPhb) out.push_back(p.gpu);
  }
  return out;
}

void peer_findings(const Topology& topo, const Analysis& a, const std::vector<int>& far,
                   std::vector<Finding>& out) {
  for (const auto& gpus : same_model_groups(topo)) {
    pcie_peer_findings(gpus, out);
    nvlink_peer_findings(gpus, out);
  }
  if (far.empty()) return;
  std::vector<int> close;
  PathClass close_path = PathClass::kSys;
  std::string far_paths;
  for (const NicPairing& p : a.nic_pairing) {
    if (p.nic < 0) continue;
    bool is_far = std::find(far.begin(), far.end(), p.gpu) != far.end();
    if (!is_far) {
      close.push_back(p.gpu);
      close_path = std::min(close_path, p.path.path);
    } else {
      far_paths += fmt::format("{}GPU{}-NIC{} {}", far_paths.empty() ? "" : ", ", p.gpu, p.nic,
                               label(p.path));
    }
  }
  out.push_back({Severity::kWarning, "nic-farther-than-peers",
                 fmt::format("{} {} no NIC closer than the CPU, while {} {} one behind a PCIe "
                             "switch: their network traffic crosses the CPU and cannot use "
                             "GPUDirect RDMA by default",
                             gpus_named(far), far.size() == 1 ? "has" : "have", gpus_named(close),
                             close.size() == 1 ? "has" : "have"),
                 fmt::format("nearest NIC: {}; the others reach theirs at {} or closer", far_paths,
                             label(close_path)),
                 "if a NIC is missing or down on that switch, restore it; otherwise expect these "
                 "GPUs to be the slow ranks of an inter-node collective"});
}

void nic_sharing_findings(const Topology& topo, const Analysis& a, std::vector<Finding>& out) {
  std::map<int, std::vector<int>> gpus_on;  // Nic::index -> Gpu::index of the GPUs paired with it
  for (const NicPairing& p : a.nic_pairing) {
    if (p.nic >= 0) gpus_on[p.nic].push_back(p.gpu);
  }
  if (gpus_on.size() < 2) return;  // one NIC for every GPU: shared alike, nothing to compare
  size_t fewest = SIZE_MAX, most = 0;
  for (const auto& [nic, gpus] : gpus_on) {
    fewest = std::min(fewest, gpus.size());
    most = std::max(most, gpus.size());
  }
  if (most == fewest) return;
  auto nic_of = [&](int index) -> const Nic* {
    for (const Nic& n : topo.nics) {
      if (n.index == index) return &n;
    }
    return nullptr;
  };
  auto rate = [](double gbps) { return fmt::format("{:g} Gbit/s ({:.1f} GB/s)", gbps, gbps / 8); };
  // The GPUs on the most crowded NICs against all the others, each GPU's share of its NIC's
  // rate: the slowest share of the first against the best of the others; 0 when a rate is
  // unknown.
  std::vector<int> crowded, others;
  double crowded_share = -1, others_share = -1;
  bool rates_known = true;
  std::string evidence;
  for (const auto& [index, gpus] : gpus_on) {
    const Nic* nic = nic_of(index);
    const double nic_rate = nic != nullptr ? nic->port_rate_gbps : 0;
    const double share = nic_rate / static_cast<double>(gpus.size());
    rates_known = rates_known && nic_rate > 0;
    evidence += fmt::format(
        "{}{} ({}): {}", evidence.empty() ? "" : "; ",
        nic != nullptr && !nic->name.empty() ? nic->name : "NIC" + std::to_string(index),
        nic_rate > 0 ? fmt::format("{:g} Gbit/s", nic_rate) : "rate unknown", gpus_named(gpus));
    if (gpus.size() == most) {
      crowded.insert(crowded.end(), gpus.begin(), gpus.end());
      crowded_share = crowded_share < 0 ? share : std::min(crowded_share, share);
    } else {
      others.insert(others.end(), gpus.begin(), gpus.end());
      others_share = std::max(others_share, share);
    }
  }
  std::sort(crowded.begin(), crowded.end());
  std::sort(others.begin(), others.end());
  const std::string expect =
      rates_known
          ? fmt::format("each of them can expect {} across nodes, against {} for the others",
                        rate(crowded_share), rate(others_share))
          : fmt::format(
                "each of them can expect 1/{} of its NIC's bandwidth across nodes, "
                "against 1/{} for the best placed of the others",
                most, fewest);
  out.push_back(
      {Severity::kWarning, "nic-shared-unevenly",
       fmt::format("{} share their nearest NIC, {} GPUs to one, while {} {}: {}",
                   gpus_named(crowded), most, gpus_named(others),
                   fewest == 1 ? (others.size() == 1 ? "has one of its own" : "have one each")
                               : std::string("have fewer to one"),
                   expect),
       "GPUs paired with each NIC (the nearest, as NCCL pairs them): " + evidence,
       "in a collective across nodes these GPUs are the slow ranks: if a NIC is missing or down "
       "near them, restore it; otherwise give the node a NIC per GPU, or expect their ranks to "
       "set the pace"});
}

void nvlink_symmetry_findings(const Topology& topo, std::vector<Finding>& out) {
  std::map<std::pair<std::string, std::string>, int> links;  // (from, to) -> active GPU links
  for (const Gpu& g : topo.gpus) {
    for (const NvLink& l : g.nvlinks) {
      if (l.active && l.peer == NvLinkPeer::kGpu) ++links[{g.bdf, l.peer_bdf}];
    }
  }
  for (const auto& [pair, count] : links) {
    const auto& [from, to] = pair;
    const Gpu* a = topo.find_gpu_by_bdf(from);
    const Gpu* b = topo.find_gpu_by_bdf(to);
    // Live, a peer may be missing for innocent reasons (--devices kept only some GPUs; in a VM
    // NVML may name the peer by its host bus id): only a file is held to consistency.
    bool from_file = !topo.read_from_sysfs();
    if (b == nullptr && !from_file) continue;
    if (b == nullptr) {
      out.push_back({Severity::kWarning, "nvlink-peer-missing",
                     fmt::format("{} has {} NVLink(s) to {}, which is not a GPU of this topology: "
                                 "the peer is hidden, fell off the bus or the file is inconsistent",
                                 gpu_name(*a), count, to),
                     fmt::format("nvlink target {} from {}", to, from),
                     fmt::format("check `nvidia-smi -q` ({}) and `dmesg` for Xid 79 (GPU fallen "
                                 "off the bus); in a hand-edited topology file, fix the target",
                                 tools::kNvidiaSmi)});
      continue;
    }
    auto back = links.find({to, from});
    int reverse = back == links.end() ? 0 : back->second;
    if (reverse == count || (from > to && back != links.end())) continue;  // each pair once
    out.push_back({Severity::kWarning, "nvlink-asymmetric",
                   fmt::format("{} counts {} NVLink(s) to GPU{}, but GPU{} counts {} back: a link "
                               "is up at one end only, and the connection matrix is not symmetric",
                               gpu_name(*a), count, b->index, b->index, reverse),
                   fmt::format("{} -> {}: {}; {} -> {}: {}", from, to, count, to, from, reverse),
                   fmt::format("treat the pair as having the smaller count; `nvidia-smi nvlink "
                               "-s` on both GPUs ({}) shows which link is down",
                               tools::kNvidiaSmi)});
  }
}

}  // namespace commtool::topo::rules
