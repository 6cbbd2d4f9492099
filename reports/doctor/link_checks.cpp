// The rules over what sysfs counts on the links (doctor_checks.hpp: judge_rdma_port,
// judge_aer): RDMA port state and error counters, PCIe AER totals.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>

#include "reports/doctor/doctor_checks.hpp"
#include "reports/doctor/doctor_rules.hpp"

namespace commtool::reports::doctor {

Check judge_rdma_port(const health::RdmaPort& p, const health::Thresholds& t) {
  Check c{fmt::format("NIC {} port {}", p.device, p.port),
          -1,
          "port",
          Severity::kPass,
          "",
          "",
          std::nullopt};
  std::string errors;
  for (const auto& [name, count] : p.counters) {
    if (count.available && static_cast<double>(count.value) >= t.rdma_port_errors_warn) {
      errors += fmt::format("{}{} {}", errors.empty() ? "" : ", ", name, count.value);
    }
  }
  c.evidence = fmt::format("{} ({}), {}{}", p.state, p.phys_state, p.link_layer,
                           p.rate.empty() ? "" : ", " + p.rate);
  if (p.state != "ACTIVE") {
    c.severity = Severity::kWarn;
    c.evidence += ": not active, so NCCL leaves it out and the GPUs it served share the others";
    c.advice = fmt::format(
        "check its cable and the switch port (ibstat {}; for RoCE, ip link); if the port is "
        "meant to be unused, list the used ones in NCCL_IB_HCA",
        p.device);
    return c;
  }
  if (!errors.empty()) {
    c.severity = Severity::kWarn;
    c.evidence += "; errors counted since the counters were cleared: " + errors;
    c.advice = fmt::format(
        "a link that drops or corrupts symbols: check the cable and transceiver (mlxlink -d {} "
        "from NVIDIA's MFT tools) and the switch's side; clear the counters (perfquery -x -R) "
        "and see whether they grow under load",
        p.device);
    return c;
  }
  if (std::none_of(p.counters.begin(), p.counters.end(),
                   [](const auto& kv) { return kv.second.available; })) {
    c.severity = Severity::kUnavailable;
    c.evidence += "; no error counter in sysfs";
    return c;
  }
  c.evidence += "; no error counted";
  return c;
}

Check judge_aer(const health::AerCounts& a, const topo::Gpu* gpu, const health::Thresholds& t) {
  Check c = rules::check(gpu, "PCIe AER", Severity::kPass, "");
  if (!gpu) c.subject = a.bdf;
  if (!a.correctable.available && !a.nonfatal.available && !a.fatal.available) {
    c.severity = Severity::kUnavailable;
    c.evidence = a.correctable.why;
    return c;
  }
  c.evidence =
      fmt::format("since boot: {} fatal, {} non-fatal, {} correctable{}",
                  rules::count_text(a.fatal), rules::count_text(a.nonfatal),
                  rules::count_text(a.correctable), a.detail.empty() ? "" : " (" + a.detail + ")");
  if (a.fatal.available && static_cast<double>(a.fatal.value) >= t.aer_fatal_fail) {
    c.severity = Severity::kFail;
    c.advice =
        "the PCIe link reported fatal errors: reseat the device and check the slot; "
        "lspci -vvv -s " +
        a.bdf + " shows the AER status bits";
  } else if (a.nonfatal.available && static_cast<double>(a.nonfatal.value) >= t.aer_nonfatal_warn) {
    c.severity = Severity::kWarn;
    c.advice = "non-fatal PCIe errors: watch whether they grow (cat /sys/bus/pci/devices/" + a.bdf +
               "/aer_dev_nonfatal); reseat the device if they do";
  }
  return c;
}

Check judge_iommu(const topo::Gpu& gpu, const std::string& type, bool shares) {
  if (type == "unknown") {
    return rules::check(&gpu, "IOMMU", Severity::kUnavailable,
                        "the IOMMU group's type is unreadable (a kernel before 5.11)");
  }
  if (type == "none" || type == "identity") {
    return rules::check(&gpu, "IOMMU", Severity::kPass,
                        type == "none" ? "no IOMMU group: DMA is not translated"
                                       : "IOMMU passthrough (identity): DMA is not translated");
  }
  const std::string evidence =
      fmt::format("the IOMMU translates this GPU's DMA (group type {})", type);
  if (!shares) return rules::check(&gpu, "IOMMU", Severity::kPass, evidence);
  return rules::check(&gpu, "IOMMU", Severity::kWarn,
                      evidence +
                          ": peer copies and GPUDirect RDMA go through it, slower or "
                          "refused",
                      "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt), "
                      "as NVIDIA's GPUDirect guides advise, unless the site needs translation");
}

std::optional<Check> judge_acs(const topo::Topology& t) {
  std::vector<std::string> redirecting, unreadable;
  size_t bridges = 0;
  std::vector<std::string> seen;
  const auto walk = [&](const std::string& bdf) {
    const topo::PciNode* node = t.find_pci(bdf);
    for (int depth = 0; node && !node->parent_bdf.empty() && depth < 64; ++depth) {
      node = t.find_pci(node->parent_bdf);
      if (!node || std::find(seen.begin(), seen.end(), node->bdf) != seen.end()) continue;
      seen.push_back(node->bdf);
      ++bridges;
      if (node->acs_p2p_redirect == 1) redirecting.push_back(node->bdf);
      if (node->acs_p2p_redirect < 0) unreadable.push_back(node->bdf);
    }
  };
  for (const topo::Gpu& g : t.gpus)
    walk(g.bdf);
  for (const topo::Nic& n : t.nics)
    if (topo::is_rdma(n.kind) && !n.bdf.empty()) walk(n.bdf);
  if (bridges == 0) return std::nullopt;
  Check c{"node", -1, "ACS", Severity::kPass, "", "", std::nullopt};
  if (!redirecting.empty()) {
    c.severity = Severity::kWarn;
    c.evidence = fmt::format(
        "ACS P2P Request Redirect is on at {} of the {} bridges above the "
        "GPUs and NICs: {}",
        redirecting.size(), bridges, fmt::join(redirecting, ", "));
    c.advice =
        "peer traffic under those switches goes up to the root complex: turn ACS "
        "redirect off there (the BIOS setting, or setpci on each port) so that P2P and "
        "GPUDirect RDMA stay under the switch";
  } else if (unreadable.size() == bridges) {
    c.severity = Severity::kUnavailable;
    c.evidence = fmt::format(
        "ACS of the {} bridges above the GPUs and NICs is unreadable (it is "
        "in the extended config space, which only root may read)",
        bridges);
  } else {
    c.evidence = fmt::format(
        "no ACS redirect on the {} bridges above the GPUs and NICs{}", bridges - unreadable.size(),
        unreadable.empty() ? "" : fmt::format(" ({} unreadable)", unreadable.size()));
  }
  return c;
}

}  // namespace commtool::reports::doctor
