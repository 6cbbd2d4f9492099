// The rules over NVML's counters (doctor_checks.hpp: judge_counters), one function per area.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "reports/doctor/doctor_checks.hpp"
#include "reports/doctor/doctor_rules.hpp"

namespace commtool::reports::doctor {

namespace {

using health::Count;
using health::GpuCounters;
using rules::check;
using rules::count_text;

// --- counters ---

const GpuCounters& latest(const GpuCounters& before, const GpuCounters* after) {
  return after && after->unavailable.empty() ? *after : before;
}

// The growth of a counter over the run; nullopt when either reading is missing. A counter that
// went down was reset (the driver reloaded): its new value is all growth.
std::optional<uint64_t> growth(const Count& before, const Count* after) {
  if (!after || !before.available || !after->available) return std::nullopt;
  return after->value >= before.value ? after->value - before.value : after->value;
}

Check ecc_check(const topo::Gpu& g, const GpuCounters& c, const health::Thresholds& t) {
  if (!c.ecc_enabled.available) {
    return check(&g, "ECC", Severity::kUnavailable, "ECC mode: " + c.ecc_enabled.why);
  }
  if (c.ecc_enabled.value == 0) {
    return check(&g, "ECC", Severity::kWarn,
                 "ECC is off: memory errors go undetected and uncounted",
                 "turn it on if this GPU should have it (nvidia-smi -e 1, then a GPU reset), or "
                 "know that this node's results are not protected");
  }
  const std::string evidence = fmt::format(
      "ECC on; uncorrected {} since the driver loaded ({} over the GPU's life), corrected {} "
      "({})",
      count_text(c.ecc_volatile_uncorrected), count_text(c.ecc_aggregate_uncorrected),
      count_text(c.ecc_volatile_corrected), count_text(c.ecc_aggregate_corrected));
  if (c.ecc_volatile_uncorrected.available &&
      static_cast<double>(c.ecc_volatile_uncorrected.value) >= t.ecc_volatile_uncorrected_fail) {
    return check(&g, "ECC", Severity::kFail, evidence,
                 "uncorrected memory errors: drain the node, reset the GPU (nvidia-smi -r), "
                 "then run dcgmi diag -r 3; if they recur, contact the hardware vendor");
  }
  if (!c.ecc_volatile_uncorrected.available) {
    return check(&g, "ECC", Severity::kUnavailable, evidence);
  }
  return check(&g, "ECC", Severity::kPass, evidence);
}

Check repair_check(const topo::Gpu& g, const GpuCounters& c, const health::Thresholds& t) {
  const bool remaps = c.remap_failure.available;
  const bool pages = c.retired_sbe.available && c.retired_dbe.available;
  std::string evidence;
  if (remaps) {
    evidence = fmt::format(
        "rows remapped: {} correctable, {} uncorrectable; pending {}; "
        "failure {}",
        c.remap_correctable.value, c.remap_uncorrectable.value,
        c.remap_pending.value ? "yes" : "no", c.remap_failure.value ? "yes" : "no");
  } else {
    evidence = "row remapping: " + c.remap_failure.why;
  }
  if (pages) {
    evidence +=
        fmt::format("; pages retired: {} single-bit, {} double-bit, pending {}",
                    c.retired_sbe.value, c.retired_dbe.value,
                    c.retired_pending.available ? (c.retired_pending.value ? "yes" : "no") : "n/a");
  } else {
    evidence += "; page retirement: " + c.retired_sbe.why;
  }
  if (!remaps && !pages) return check(&g, "memory repair", Severity::kUnavailable, evidence);
  const double retired = pages ? static_cast<double>(c.retired_sbe.value + c.retired_dbe.value) : 0;
  if ((remaps && c.remap_failure.value) || retired >= t.retired_pages_fail) {
    return check(&g, "memory repair", Severity::kFail, evidence,
                 "the GPU's memory can no longer be repaired: take the GPU out of service and "
                 "contact the hardware vendor (an RMA)");
  }
  if ((remaps && c.remap_pending.value) ||
      (c.retired_pending.available && c.retired_pending.value)) {
    return check(&g, "memory repair", Severity::kWarn, evidence,
                 "a repair waits for a GPU reset: drain the GPU and reset it (nvidia-smi -r)");
  }
  if (remaps && static_cast<double>(c.remap_uncorrectable.value) >= t.remap_uncorrectable_warn) {
    return check(&g, "memory repair", Severity::kWarn, evidence,
                 "many rows remapped for uncorrectable errors: plan to replace the GPU");
  }
  return check(&g, "memory repair", Severity::kPass, evidence);
}

Check replay_check(const topo::Gpu& g, const GpuCounters& before, const GpuCounters* after,
                   double window_s, const health::Thresholds& t) {
  const Count& total = latest(before, after).pcie_replay;
  if (!total.available) return check(&g, "PCIe replay", Severity::kUnavailable, total.why);
  const std::optional<uint64_t> grew =
      growth(before.pcie_replay, after ? &after->pcie_replay : nullptr);
  if (!grew) {
    return total.value == 0
               ? check(&g, "PCIe replay", Severity::kPass, "0 replays since the driver loaded")
               : check(&g, "PCIe replay", Severity::kUnavailable,
                       fmt::format("{} replays since the driver loaded; no second "
                                   "reading to give a rate",
                                   total.value));
  }
  const int gen = std::clamp(g.pcie.attainable_gen() > 0 ? g.pcie.attainable_gen() : 6, 1, 6);
  const int width = g.pcie.attainable_width() > 0 ? g.pcie.attainable_width() : 16;
  const double minutes = std::max(window_s, 1.0) / 60;
  const uint64_t allowed =
      static_cast<uint64_t>(std::ceil(t.pcie_replays_per_lane_minute[gen] * width * minutes));
  const std::string evidence = fmt::format(
      "{} replays during doctor's {:.0f} s of traffic (at most {} expected at Gen{} x{}), {} "
      "since the driver loaded",
      *grew, window_s, allowed, gen, width, total.value);
  if (*grew > allowed) {
    return check(&g, "PCIe replay", Severity::kWarn, evidence,
                 fmt::format("the PCIe link retransmits: reseat the GPU or its riser, check the "
                             "slot (nvidia-smi -q -d PCIE -i {}); lspci -vvv shows AER errors",
                             g.index));
  }
  return check(&g, "PCIe replay", Severity::kPass, evidence);
}

std::vector<Check> nvlink_checks(const topo::Gpu& g, const GpuCounters& before,
                                 const GpuCounters* after, double window_s,
                                 const health::Thresholds& t) {
  const GpuCounters& now = latest(before, after);
  if (now.nvlinks.empty()) return {};
  std::vector<Check> out;
  std::vector<int> down;
  for (const health::NvLinkCounters& l : now.nvlinks)
    if (!l.active) down.push_back(l.link);
  const size_t up = now.nvlinks.size() - down.size();
  if (!down.empty() && up > 0) {
    std::string list;
    for (int l : down)
      list += (list.empty() ? "" : ", ") + std::to_string(l);
    out.push_back(
        check(&g, "NVLink state", Severity::kWarn,
              fmt::format("{} of {} links active; down: {}", up, now.nvlinks.size(), list),
              fmt::format("nvidia-smi nvlink -s -i {} shows each link; a link down on a "
                          "GPU whose peers have theirs up needs a GPU reset, then the "
                          "vendor if it stays down",
                          g.index)));
  } else if (up > 0) {
    out.push_back(check(&g, "NVLink state", Severity::kPass,
                        fmt::format("{} of {} links active", up, now.nvlinks.size())));
  }
  // Errors over the run, link by link.
  Severity worst = Severity::kPass;
  std::string evidence, why_not;
  bool any = false;
  for (const health::NvLinkCounters& l : now.nvlinks) {
    const health::NvLinkCounters* b = nullptr;
    for (const health::NvLinkCounters& x : before.nvlinks)
      if (x.link == l.link) b = &x;
    if (!b || !after) continue;
    const auto crc_flit = growth(b->crc_flit, &l.crc_flit);
    const auto crc_data = growth(b->crc_data, &l.crc_data);
    const auto replay = growth(b->replay, &l.replay);
    const auto recovery = growth(b->recovery, &l.recovery);
    if (!crc_flit && !crc_data && !replay && !recovery) {
      why_not = l.crc_flit.why;
      continue;
    }
    any = true;
    const uint64_t crc = crc_flit.value_or(0) + crc_data.value_or(0);
    const double rate = static_cast<double>(crc) / std::max(window_s, 1.0);
    Severity s = Severity::kPass;
    if (static_cast<double>(replay.value_or(0)) >= t.nvlink_replay_fail ||
        static_cast<double>(recovery.value_or(0)) >= t.nvlink_recovery_fail ||
        rate >= t.nvlink_crc_fail_per_s) {
      s = Severity::kFail;
    } else if (static_cast<double>(crc) >= t.nvlink_crc_warn) {
      s = Severity::kWarn;
    }
    if (s != Severity::kPass) {
      evidence += fmt::format("{}link {}: {} CRC ({:.1f}/s), {} replays, {} recoveries",
                              evidence.empty() ? "" : "; ", l.link, crc, rate, replay.value_or(0),
                              recovery.value_or(0));
    }
    worst = std::max(worst, s);
  }
  if (!any) {
    out.push_back(check(&g, "NVLink errors", Severity::kUnavailable,
                        "error counters: " + (why_not.empty() ? "one reading only" : why_not)));
  } else if (worst == Severity::kPass) {
    out.push_back(
        check(&g, "NVLink errors", Severity::kPass,
              fmt::format("no CRC, replay or recovery error during doctor's {:.0f} s", window_s)));
  } else {
    out.push_back(check(&g, "NVLink errors", worst, evidence + " during doctor's traffic",
                        fmt::format("nvidia-smi nvlink -e -i {} shows the counters; replays and "
                                    "recoveries mean the link retrains: reset the GPU, then "
                                    "check the link, its peer and the NVSwitch tray",
                                    g.index)));
  }
  return out;
}

Check clocks_check(const topo::Gpu& g, const GpuCounters& c) {
  if (!c.clock_reasons.available) {
    return check(&g, "clocks", Severity::kUnavailable,
                 "clock-event reasons: " + c.clock_reasons.why);
  }
  struct Bit {
    uint64_t bit;
    const char* name;
    bool bad;
  };
  constexpr Bit kBits[] = {
      {health::kClockIdle, "idle", false},
      {health::kClockApplicationsSetting, "applications clocks setting", false},
      {health::kClockSwPowerCap, "software power cap", false},
      {health::kClockHwSlowdown, "hardware slowdown", true},
      {health::kClockSyncBoost, "sync boost", false},
      {health::kClockSwThermal, "software thermal slowdown", true},
      {health::kClockHwThermal, "hardware thermal slowdown", true},
      {health::kClockHwPowerBrake, "hardware power brake", true},
      {health::kClockDisplaySetting, "display clock setting", false},
  };
  std::string active, bad;
  for (const Bit& b : kBits) {
    if ((c.clock_reasons.value & b.bit) == 0) continue;
    active += (active.empty() ? "" : ", ") + std::string(b.name);
    if (b.bad) bad += (bad.empty() ? "" : ", ") + std::string(b.name);
  }
  const std::string evidence =
      "clock-event reasons after the run: " + (active.empty() ? std::string("none") : active);
  if (!bad.empty()) {
    return check(&g, "clocks", Severity::kWarn, evidence,
                 fmt::format("the GPU slows itself ({}): check its cooling and power supply "
                             "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {})",
                             bad, g.index));
  }
  return check(&g, "clocks", Severity::kPass, evidence);
}

Check modes_check(const topo::Gpu& g, const GpuCounters& c) {
  if (!c.persistence.available && !c.mig.available) {
    return check(&g, "modes", Severity::kUnavailable, "persistence mode: " + c.persistence.why);
  }
  const std::string evidence =
      fmt::format("persistence mode {}, MIG {}",
                  c.persistence.available ? (c.persistence.value ? "on" : "off") : "n/a",
                  c.mig.available ? (c.mig.value ? "on" : "off") : "n/a (not a MIG GPU)");
  if (c.mig.available && c.mig.value) {
    return check(&g, "modes", Severity::kWarn, evidence,
                 "MIG is on: NCCL cannot use NVLink or P2P between instances; turn it off for "
                 "multi-GPU jobs (nvidia-smi -mig 0, then a GPU reset)");
  }
  if (c.persistence.available && !c.persistence.value) {
    return check(&g, "modes", Severity::kWarn, evidence,
                 "without persistence the driver sets the GPU up again for each program (seconds "
                 "at start, lost state between jobs): run nvidia-persistenced");
  }
  return check(&g, "modes", Severity::kPass, evidence);
}

// The NVSwitch fabric: a GPU whose registration has not completed cannot use NVLink to its
// peers (CUDA answers cudaErrorSystemNotReady); none on a GPU without a fabric.
std::optional<Check> fabric_check(const topo::Gpu& g, const GpuCounters& c) {
  if (!c.fabric_state.available || c.fabric_state.value == health::kFabricNotSupported) {
    return std::nullopt;
  }
  const uint64_t state = c.fabric_state.value;
  const char* words = state == health::kFabricNotStarted   ? "not started"
                      : state == health::kFabricInProgress ? "in progress"
                      : state == health::kFabricCompleted  ? "completed"
                                                           : "in an unknown state";
  if (state != health::kFabricCompleted) {
    return check(&g, "fabric", Severity::kFail,
                 fmt::format("the GPU's NVSwitch fabric registration is {}", words),
                 "start the fabric manager (systemctl status nvidia-fabricmanager) and wait for "
                 "it; until then NVLink to the other GPUs is unusable");
  }
  if (c.fabric_status.available && c.fabric_status.value != 0) {
    return check(&g, "fabric", Severity::kFail,
                 "the NVSwitch fabric registration completed with an error: " + c.fabric_status.why,
                 "look at the fabric manager's log (/var/log/fabricmanager.log) and restart it");
  }
  return check(&g, "fabric", Severity::kPass, "NVSwitch fabric registration completed");
}

}  // namespace

std::vector<Check> judge_counters(const topo::Gpu& gpu, const GpuCounters& before,
                                  const GpuCounters* after, double window_s,
                                  const health::Thresholds& t) {
  if (!before.unavailable.empty()) {
    return {check(&gpu, "counters", Severity::kUnavailable, "NVML: " + before.unavailable)};
  }
  const GpuCounters& now = latest(before, after);
  std::vector<Check> out{ecc_check(gpu, now, t), repair_check(gpu, now, t),
                         replay_check(gpu, before, after, window_s, t)};
  for (Check& c : nvlink_checks(gpu, before, after, window_s, t))
    out.push_back(std::move(c));
  if (std::optional<Check> f = fabric_check(gpu, now)) out.push_back(std::move(*f));
  out.push_back(clocks_check(gpu, now));
  out.push_back(modes_check(gpu, now));
  return out;
}

}  // namespace commtool::reports::doctor
