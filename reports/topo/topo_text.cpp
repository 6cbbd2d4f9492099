#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>

#include "probes/topo/link_rate.hpp"
#include "reports/format/text_table.hpp"
#include "reports/topo/topo_report.hpp"

namespace commtool::reports {

using namespace commtool::topo;

namespace {

// An unknown value is "-" in a table cell (kUnknownCell) and "unknown" in a sentence; JSON has
// null (topo_json.cpp). tests/test_reports.cpp holds every text renderer to it.
std::string or_dash(const std::string& s) {
  return s.empty() ? kUnknownCell : s;
}
std::string numa_text(int numa) {
  return numa == kUnknownNuma ? kUnknownCell : std::to_string(numa);
}

// "Gen5 x16"; a part unknown is "-" ("Gen- x16"), both unknown "-".
std::string link_text(int gen, int width) {
  if (gen <= 0 && width <= 0) return kUnknownCell;
  return fmt::format("Gen{} x{}", gen > 0 ? std::to_string(gen) : kUnknownCell,
                     width > 0 ? std::to_string(width) : kUnknownCell);
}

// A device in a line of the tree or the pairing: "GPU0 NVIDIA H100" or "GPU0 (name unknown)".
std::string named(const std::string& what, const std::string& name) {
  return name.empty() ? what + " (name unknown)" : what + " " + name;
}

std::string section(const std::string& title) {
  return "\n" + title + "\n";
}

std::string gpu_section(const Topology& topo, const Analysis& a) {
  if (topo.gpus.empty()) return section("GPUs") + "  none found\n";
  TextTable t({"GPU", "Bus id", "Name", "CUDA", "NUMA", "CPUs", "PCIe now", "PCIe max", "Port max",
               "Expected per direction"});
  for (size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& g = topo.gpus[i];
    const GpuLinkRates& r = a.rates[i];
    std::string expected = r.pcie_raw_gbps > 0 ? fmt::format("{:.1f} GB/s payload ({:.1f} raw)",
                                                             r.pcie_payload_gbps, r.pcie_raw_gbps)
                                               : kUnknownCell;
    t.add_row({std::to_string(g.index), g.bdf, or_dash(g.name),
               g.cuda_ordinal >= 0 ? std::to_string(g.cuda_ordinal) : "-", numa_text(g.numa_node),
               or_dash(g.cpu_affinity), link_text(g.pcie.current_gen, g.pcie.current_width),
               link_text(g.pcie.max_gen, g.pcie.max_width),
               g.pcie.port_max_gen > 0 ? link_text(g.pcie.port_max_gen, g.pcie.port_max_width)
                                       : kUnknownCell,
               expected});
  }
  return section("GPUs") + t.render() +
         "  PCIe now is the link state read now: GPUs lower the generation when idle, so it may "
         "be below the maximum.\n"
         "  Expected: PCIe payload rate at the attainable generation and width (MPS 256 B, TLP "
         "overhead removed).\n";
}

std::string nvlink_section(const Topology& topo, const Analysis& a) {
  std::string out = section("NVLink");
  if (!topo.nvml_available && topo.read_from_sysfs()) {
    return out + "  unknown: NVML is not available (see Not available)\n";
  }
  for (size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& g = topo.gpus[i];
    const GpuLinkRates& r = a.rates[i];
    if (!g.nvlinks_known) {
      out += fmt::format("  GPU{}: unknown (see Not available)\n", g.index);
      continue;
    }
    if (g.nvlinks.empty()) {
      out += fmt::format("  GPU{}: no NVLink\n", g.index);
      continue;
    }
    std::map<std::string, int> peers;
    for (const NvLink& l : g.nvlinks) {
      if (!l.active) continue;
      std::string peer = to_string(l.peer);
      if (l.peer == NvLinkPeer::kGpu) {
        const Gpu* pg = topo.find_gpu_by_bdf(l.peer_bdf);
        peer = pg ? "GPU" + std::to_string(pg->index) : "GPU " + l.peer_bdf;
      } else if (!l.peer_bdf.empty()) {
        peer += " " + l.peer_bdf;
      }
      ++peers[peer];
    }
    std::vector<std::string> peer_text;
    for (const auto& [peer, n] : peers)
      peer_text.push_back(fmt::format("{} x{}", peer, n));
    out += fmt::format(
        "  GPU{}: {} of {} links active, NVLink{}, {:.0f} GB/s per direction{}{}\n", g.index,
        r.nvlink_active, g.nvlinks.size(),
        r.nvlink_generation > 0 ? std::to_string(r.nvlink_generation) : " of unknown generation",
        r.nvlink_gbps, peer_text.empty() ? "" : "; to ",
        fmt::format("{}", fmt::join(peer_text, ", ")));
  }
  if (topo.gpus.empty()) out += "  no GPU\n";
  return out;
}

// The tree from each root complex down, endpoints named as in the matrix.
std::string tree_section(const Topology& topo) {
  std::map<std::string, std::string> names;
  for (const Gpu& g : topo.gpus)
    names[g.bdf] = named(fmt::format("GPU{}", g.index), g.name);
  for (const Nic& n : topo.nics) {
    if (!n.bdf.empty())
      names[n.bdf] +=
          (names[n.bdf].empty() ? "" : ", ") + named(fmt::format("NIC{}", n.index), n.name);
  }
  for (const NvSwitch& s : topo.nvswitches)
    names[s.bdf] = "NVSwitch";
  std::map<std::string, std::vector<const PciNode*>> children;  // parent bdf or root id
  for (const PciNode& n : topo.pci) {
    children[n.parent_bdf.empty() ? "@" + n.root_complex : n.parent_bdf].push_back(&n);
  }
  std::string out = section("PCIe tree");
  std::function<void(const std::string&, const std::string&)> walk =
      [&](const std::string& key, const std::string& prefix) {
        const auto& kids = children[key];
        for (size_t i = 0; i < kids.size(); ++i) {
          const PciNode& n = *kids[i];
          bool last = i + 1 == kids.size();
          std::string what = names.count(n.bdf) ? names[n.bdf]
                             : is_pci_bridge_class(n.class_code)
                                 ? "bridge"
                                 : fmt::format("class {:06x}", n.class_code);
          // A source that gives no PCI ids (an NCCL file's bridges and vendor-only functions)
          // has vendor and device 0, which no device has.
          const std::string ids = n.vendor == 0 && n.device == 0
                                      ? "[ids unknown]"
                                      : fmt::format("[{:04x}:{:04x}]", n.vendor, n.device);
          const std::string link = n.link.max_gen <= 0 && n.link.max_width <= 0
                                       ? "link unknown"
                                       : link_text(n.link.max_gen, n.link.max_width);
          out += fmt::format("{}{} {} {} {} {}{}\n", prefix, last ? "└─" : "├─", n.bdf, what, ids,
                             link, n.acs_p2p_redirect == 1 ? " ACS-redirect" : "");
          walk(n.bdf, prefix + (last ? "   " : "│  "));
        }
      };
  for (const RootComplex& rc : topo.root_complexes) {
    out += fmt::format("  {} (NUMA {}{})\n", rc.id,
                       rc.numa_node == kUnknownNuma ? "unknown" : std::to_string(rc.numa_node),
                       rc.cpu_affinity.empty() ? "" : ", CPUs " + rc.cpu_affinity);
    walk("@" + rc.id, "  ");
  }
  if (topo.root_complexes.empty()) out += "  nothing found\n";
  for (const Nic& n : topo.nics) {
    if (n.bdf.empty()) {
      out += fmt::format("  NIC{} {} hangs off {} (no PCI address known)\n", n.index, n.name,
                         n.root_complex);
    }
  }
  return out;
}

std::string nic_section(const Topology& topo) {
  if (topo.nics.empty()) return section("NICs") + "  none found\n";
  TextTable t({"NIC", "Name", "Kind", "Bus id", "NUMA", "Port rate", "PCIe max", "Netdevs"});
  for (const Nic& n : topo.nics) {
    t.add_row({std::to_string(n.index), or_dash(n.name), to_string(n.kind), or_dash(n.bdf),
               numa_text(n.numa_node),
               n.port_rate_gbps > 0 ? fmt::format("{:g} Gb/s", n.port_rate_gbps) : kUnknownCell,
               link_text(n.pcie.max_gen, n.pcie.max_width),
               or_dash(fmt::format("{}", fmt::join(n.netdevs, ",")))});
  }
  return section("NICs") + t.render();
}

std::string matrix_summary(const Topology& topo, const Analysis& a) {
  const MatrixSummary summary = summarise_matrix(a.matrix, topo.gpus.size());
  auto counts = [](const std::vector<PathCount>& listed) {
    std::vector<std::string> parts;
    for (const PathCount& p : listed)
      parts.push_back(fmt::format("{} {}", label(p.connection), p.pairs));
    return parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, ", "));
  };
  return fmt::format(
      "  {} GPUs and {} NICs: too many to print as a table (more than {}); pairs by path:\n"
      "    GPU-GPU: {}\n    GPU-NIC: {}\n",
      topo.gpus.size(), topo.nics.size(), kMatrixListedUpTo, counts(summary.gpu_gpu),
      counts(summary.gpu_nic));
}

std::string matrix_section(const Topology& topo, const Analysis& a) {
  std::string out = section("Connection matrix");
  if (a.matrix.labels.empty()) return out + "  nothing to connect\n";
  if (a.matrix.labels.size() > kMatrixListedUpTo) return out + matrix_summary(topo, a);
  std::vector<std::string> header{""};
  for (const auto& l : a.matrix.labels)
    header.push_back(l);
  header.push_back("CPU Affinity");
  header.push_back("NUMA Affinity");
  TextTable t(header);
  bool assumed = false;
  for (size_t r = 0; r < a.matrix.labels.size(); ++r) {
    std::vector<std::string> row{a.matrix.labels[r]};
    for (const Connection& c : a.matrix.cells[r]) {
      row.push_back(label(c) + (c.numa_assumed ? "*" : ""));
      assumed = assumed || c.numa_assumed;
    }
    if (r < topo.gpus.size()) {
      row.push_back(or_dash(topo.gpus[r].cpu_affinity));
      row.push_back(numa_text(topo.gpus[r].numa_node));
    } else {
      row.push_back(kUnknownCell);
      row.push_back(numa_text(topo.nics[r - topo.gpus.size()].numa_node));
    }
    t.add_row(row);
  }
  out += t.render() + "\n  Legend:\n";
  for (PathClass p : {PathClass::kSelf, PathClass::kSys, PathClass::kNode, PathClass::kPhb,
                      PathClass::kPxb, PathClass::kPix, PathClass::kNvLink}) {
    out += fmt::format("    {:<4} = {}\n", p == PathClass::kNvLink ? "NV#" : label(p), describe(p));
  }
  if (assumed) out += "    *    = NUMA node unknown: NODE assumed, could be SYS\n";
  return out;
}

std::string pairing_section(const Topology& topo, const Analysis& a) {
  if (topo.gpus.empty()) return {};
  std::string out = section("Nearest NIC per GPU (the pairing NCCL would make)");
  for (const NicPairing& p : a.nic_pairing) {
    if (p.nic < 0) {
      out += fmt::format("  GPU{} -> none\n", p.gpu);
      continue;
    }
    out +=
        fmt::format("  GPU{} -> {} ({})\n", p.gpu,
                    named(fmt::format("NIC{}", p.nic), topo.nics[static_cast<size_t>(p.nic)].name),
                    label(p.path));
  }
  return out;
}

std::string p2p_section(const Analysis& a) {
  std::string out = section("P2P (CUDA)");
  if (!a.p2p_summary.empty()) return out + "  " + a.p2p_summary + "\n";
  TextTable t({"Pair", "Access", "Perf rank", "Native atomics", "Why not"});
  for (const P2pVerdict& v : a.p2p) {
    t.add_row({fmt::format("GPU{}-GPU{}", v.gpu_a, v.gpu_b),
               !v.known       ? kUnknownCell
               : v.can_access ? "yes"
                              : "no",
               v.performance_rank >= 0 ? std::to_string(v.performance_rank) : "-",
               !v.known || !v.can_access ? "-"
               : v.native_atomics        ? "yes"
                                         : "no",
               v.reason});
  }
  return out + t.render() + "  Perf rank: cudaDevP2PAttrPerformanceRank, lower is better.\n";
}

// The verdict leads: how many warnings and notes, then each, before any detail.
std::string findings_section(const Analysis& a) {
  auto count = [&](Severity s) {
    return std::count_if(a.findings.begin(), a.findings.end(),
                         [&](const Finding& f) { return f.severity == s; });
  };
  const auto warnings = count(Severity::kWarning);
  const auto notes = count(Severity::kNote);
  if (a.findings.empty()) return "Verdict: nothing wrong found\n";
  std::string out = fmt::format("Verdict: {} warning{}, {} note{}\n", warnings,
                                warnings == 1 ? "" : "s", notes, notes == 1 ? "" : "s");
  for (const Finding& f : a.findings) {
    out += fmt::format("  {} [{}] {}\n", f.severity == Severity::kWarning ? "WARNING" : "note",
                       f.code, f.message);
    if (!f.evidence.empty()) out += "      evidence: " + f.evidence + "\n";
    if (!f.advice.empty()) out += "      what to do: " + f.advice + "\n";
  }
  return out;
}

std::string missing_section(const Topology& topo) {
  if (topo.missing.empty()) return {};
  std::string out = section("Not available");
  for (const Missing& m : topo.missing)
    out += "  - " + m.what + ": " + m.why + "\n";
  return out;
}

}  // namespace

std::string render_topo_text(const Topology& topo, const Analysis& analysis) {
  std::string out =
      fmt::format("commtool topo: {} GPU(s), {} NIC(s), {} NVSwitch(es) from {}{}{}\n",
                  topo.gpus.size(), topo.nics.size(), topo.nvswitches.size(), topo.source,
                  topo.driver_version.empty() ? "" : "; driver " + topo.driver_version,
                  topo.in_vm ? "; virtual machine" : "");
  out += findings_section(analysis);
  out += gpu_section(topo, analysis);
  out += nvlink_section(topo, analysis);
  out += nic_section(topo);
  out += tree_section(topo);
  out += matrix_section(topo, analysis);
  out += pairing_section(topo, analysis);
  out += p2p_section(analysis);
  out += missing_section(topo);
  return out;
}

}  // namespace commtool::reports
