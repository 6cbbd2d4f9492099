// The rules over what sysfs counts on the links (doctor_checks.hpp: judge_rdma_port,
// judge_aer): RDMA port state and error counters, PCIe AER totals.
#include <fmt/format.h>

#include <algorithm>

#include "reports/doctor/doctor_checks.hpp"
#include "reports/doctor/doctor_rules.hpp"

namespace commtool::reports::doctor {

Check judge_rdma_port(const health::RdmaPort& p, const health::Thresholds& t) {
  Check c{fmt::format("NIC {} port {}", p.device, p.port), -1, "port", Severity::kPass, "", ""};
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

}  // namespace commtool::reports::doctor
