#include "reports/doctor/doctor_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/health/xid_catalog.hpp"
#include "reports/doctor/doctor_rules.hpp"
#include "reports/doctor/expected_figures.hpp"
#include "reports/probe/probe_report.hpp"

namespace commtool::reports::doctor {

namespace {

using commtool::doctor::Evidence;
using health::Count;
using health::GpuCounters;
using rules::check;
using rules::gpu_at;
using rules::subject_of;

// --- kernel log ---

Severity weight_of(const health::XidInfo& info) {
  switch (info.weight) {
    case health::XidWeight::kFail:
      return Severity::kFail;
    case health::XidWeight::kWarn:
      return Severity::kWarn;
    case health::XidWeight::kInfo:
      return info.xid == 154 ? Severity::kWarn : Severity::kPass;  // 154 says what to do
    case health::XidWeight::kApplication:
      return Severity::kPass;
  }
  return Severity::kWarn;
}

// One check for a set of events of one GPU: the worst Xid decides, each distinct Xid is named
// with its count and its last line.
Check xid_check(const topo::Gpu* gpu, const std::vector<const health::XidEvent*>& events,
                const std::string& source) {
  std::map<int, std::vector<const health::XidEvent*>> by_xid;
  for (const health::XidEvent* e : events)
    by_xid[e->xid].push_back(e);
  Severity worst = Severity::kPass;
  std::string evidence, advice;
  for (const auto& [xid, list] : by_xid) {
    const health::XidInfo info = health::describe_xid(xid);
    const health::XidEvent& last = *list.back();
    const Severity s = weight_of(info);
    evidence += fmt::format(
        "{}Xid {} x{} ({}{}), last at line {}{}: {}", evidence.empty() ? "" : "; ", xid,
        list.size(), info.meaning,
        info.link != health::XidLink::kNone
            ? fmt::format(", {} {} error", info.link == health::XidLink::kNvLink ? "an" : "a",
                          health::to_string(info.link))
            : "",
        last.line, last.when.empty() ? "" : " [" + last.when + "]", excerpt(last.detail, 100));
    if (s >= worst && s != Severity::kPass) {
      if (s > worst) advice.clear();
      worst = s;
      advice += fmt::format("{}Xid {}: {}", advice.empty() ? "" : "; ", xid, info.action);
    }
  }
  evidence += " (" + source + ")";
  if (worst == Severity::kPass && advice.empty()) {
    advice = "";  // application faults and records of repairs: the GPU stays healthy
  }
  return check(gpu, "Xid", worst, evidence, advice);
}

std::string step_failure_advice(ExitCode code, const std::string& what) {
  switch (code) {
    case ExitCode::kTimeout:
      return fmt::format(
          "the {} hung: the account above says where each rank or copy stood; "
          "look for an Xid of that GPU, then run it alone with -v",
          what);
    case ExitCode::kVerification:
      return fmt::format(
          "the {} gave wrong data: a GPU's memory or a link corrupts it; drain the "
          "node and run dcgmi diag -r 3",
          what);
    default:
      return fmt::format("run the {} alone with -v to see the failing step", what);
  }
}

}  // namespace

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kPass:
      return "PASS";
    case Severity::kUnavailable:
      return "n/a";
    case Severity::kWarn:
      return "WARN";
    case Severity::kFail:
      return "FAIL";
  }
  return "?";
}

int Verdict::count(Severity s) const {
  return static_cast<int>(
      std::count_if(checks.begin(), checks.end(), [s](const Check& c) { return c.severity == s; }));
}

std::vector<Check> judge_kernel_log(const Evidence& e) {
  if (!e.kernel_log_read) {
    return {check(nullptr, "Xid", Severity::kUnavailable,
                  "the kernel log could not be read: " + e.kernel_log_why,
                  "run doctor as root, or give it a saved log: dmesg > FILE (as root), then "
                  "commtool doctor --kernel-log FILE")};
  }
  const health::KernelLogScan& scan = e.kernel_log;
  const std::string source = fmt::format(
      "{} lines of {}{}", scan.lines, e.kernel_log_source,
      scan.dropped ? fmt::format(", only the first {} events kept", health::kMaxXidEvents) : "");
  std::vector<Check> out;
  std::vector<const health::XidEvent*> unmatched, sxids;
  std::vector<bool> matched(scan.events.size());
  for (const topo::Gpu& g : e.topology.gpus) {
    std::vector<const health::XidEvent*> mine;
    for (size_t i = 0; i < scan.events.size(); ++i) {
      const health::XidEvent& ev = scan.events[i];
      if (!ev.nvswitch && health::same_gpu(ev, g.bdf)) {
        mine.push_back(&ev);
        matched[i] = true;
      }
    }
    if (mine.empty()) {
      out.push_back(check(&g, "Xid", Severity::kPass, "no Xid for this GPU in " + source));
    } else {
      out.push_back(xid_check(&g, mine, source));
    }
  }
  for (size_t i = 0; i < scan.events.size(); ++i) {
    const health::XidEvent& ev = scan.events[i];
    if (ev.nvswitch) {
      sxids.push_back(&ev);
    } else if (!matched[i] && e.request.devices.empty()) {
      unmatched.push_back(&ev);  // with --devices, the other GPUs are not examined
    }
  }
  // Xids of addresses where no GPU is now, one check per address: a GPU that is gone is news.
  std::map<std::string, std::vector<const health::XidEvent*>> by_pci;
  for (const health::XidEvent* ev : unmatched)
    by_pci[ev->pci].push_back(ev);
  std::vector<Check> gone;
  for (const auto& [pci, events] : by_pci) {
    Check c = xid_check(nullptr, events, source);
    c.subject = "PCI " + pci + " (no GPU there now)";
    c.severity = std::max(c.severity, Severity::kWarn);
    if (c.advice.empty()) c.advice = "find which device that was (lspci; nvidia-smi -q)";
    gone.push_back(std::move(c));
  }
  out.insert(out.begin(), gone.begin(), gone.end());
  if (!sxids.empty()) {
    // The first fatal one is the one to name; else the last.
    const health::XidEvent* named = nullptr;
    for (const health::XidEvent* x : sxids) {
      if (x->detail.find("Fatal") != std::string::npos &&
          x->detail.find("Non-fatal") == std::string::npos) {
        named = x;
        break;
      }
    }
    const bool fatal = named != nullptr;
    if (!named) named = sxids.back();
    const std::string evidence =
        fmt::format("{} SXid line(s) of NVSwitches; {} SXid {} on {} at line {}: {} ({})",
                    sxids.size(), fatal ? "the first fatal:" : "the last:", named->xid, named->pci,
                    named->line, excerpt(named->detail, 100), source);
    out.insert(out.begin(),
               check(nullptr, "NVSwitch", fatal ? Severity::kFail : Severity::kWarn, evidence,
                     fatal ? "a fatal NVSwitch error: contact support with the "
                             "output of nvidia-bug-report.sh; the fabric needs a "
                             "reset before jobs use it"
                           : "non-fatal NVSwitch errors: watch whether they "
                             "repeat (nvidia-smi nvlink -e)"));
  }
  return out;
}

Check judge_model(const topo::Gpu& g, bool in_vm) {
  const ModelFigures* m = figures_for(g.name);
  if (m == nullptr) {
    return check(&g, "model", Severity::kUnavailable,
                 fmt::format("'{}' is not in commtool's table of expected figures", g.name));
  }
  const int gen = g.pcie.attainable_gen(), width = g.pcie.attainable_width();
  const int active = static_cast<int>(std::count_if(
      g.nvlinks.begin(), g.nvlinks.end(), [](const topo::NvLink& l) { return l.active; }));
  std::string evidence =
      fmt::format("{}: PCIe Gen{} x{} expected ({}), the link can train at Gen{} x{}", m->model,
                  m->pcie_gen, m->pcie_width, m->pcie_source, gen, width);
  if (m->nvlinks > 0) {
    evidence +=
        fmt::format("; {} NVLinks expected ({}), {} active", m->nvlinks, m->nvlink_source, active);
  }
  if (gen > 0 && width > 0 && (gen < m->pcie_gen || width < m->pcie_width)) {
    return check(&g, "model", Severity::kWarn, evidence,
                 fmt::format("the slot, riser or BIOS holds GPU{}'s link below what a {} has: "
                             "check the slot's generation setting in the BIOS and `commtool topo`",
                             g.index, m->model));
  }
  if (m->nvlinks > 0 && active < m->nvlinks) {
    if (active == 0 && in_vm) {
      return check(&g, "model", Severity::kUnavailable,
                   evidence + "; a VM that passes single GPUs shows none of their NVLinks");
    }
    return check(&g, "model", Severity::kWarn, evidence,
                 fmt::format("GPU{} has fewer active NVLinks than a {}: nvidia-smi nvlink -s -i "
                             "{}; a link down needs a GPU reset, then the vendor",
                             g.index, m->model, g.index));
  }
  return check(&g, "model", Severity::kPass, evidence);
}

std::vector<Check> judge_probe(const Evidence& e) {
  if (!e.probe_step.ran) return {};
  if (!e.probe_step.ok) {
    return {check(
        nullptr, "probe",
        e.probe_step.code == ExitCode::kEnvironment ? Severity::kUnavailable : Severity::kFail,
        e.probe_step.error, step_failure_advice(e.probe_step.code, "probe"))};
  }
  std::vector<Check> out;
  for (const probe::Measurement& m : e.probe->measurements) {
    if (m.unit != "GB/s" || m.engine != probe::Engine::kCopyEngine || m.bidirectional) continue;
    const probe::Verdict v = probe::judge(m);
    const int gpu = m.src == probe::kHost ? m.dst : m.src;
    const topo::Gpu* g = gpu_at(e.topology, gpu);
    const std::string area =
        m.probe == "p2p" ? fmt::format("P2P {} -> {}", endpoint_name(m.src), endpoint_name(m.dst))
                         : m.what;
    std::string evidence = fmt::format("{:.1f} GB/s [{:.1f}-{:.1f}] over {} batches, data checked",
                                       m.summary.median, m.summary.min, m.summary.max, m.summary.n);
    if (v.percent > 0) {
      evidence +=
          fmt::format(", {:.0f}% of {:.1f} GB/s ({})", v.percent, m.expected, m.expected_basis);
    }
    Check c;
    if (v.low) {
      c = check(g, area, Severity::kWarn, evidence, verdict_advice(m));
    } else if (v.above) {
      c = check(g, area, Severity::kUnavailable,
                evidence + ": above what commtool expects of this link, so it cannot judge it",
                verdict_advice(m));
    } else if (v.percent == 0) {
      c = check(g, area, Severity::kUnavailable, evidence + "; no expectation for this link");
    } else {
      c = check(g, area, Severity::kPass, evidence);
    }
    c.figure = Figure{m.summary.median, m.bytes, 0};
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

// "NCCL connected the ranks via NET/Socket (4 channel connections)", from NCCL's own log.
std::string transport_text(const Evidence& e) {
  if (e.nccl_transports.empty()) {
    return e.nccl_log_why.empty() ? ""
                                  : "; the transport NCCL chose is not known: " + e.nccl_log_why;
  }
  std::vector<std::string> parts;
  for (const auto& [name, n] : e.nccl_transports)
    parts.push_back(fmt::format("{} ({} channel connection{})", name, n, n == 1 ? "" : "s"));
  std::string out = "; NCCL connected the ranks via " + fmt::format("{}", fmt::join(parts, ", "));
  if (!e.nccl_warnings.empty()) {
    out += fmt::format("; NCCL warned: {}", excerpt(e.nccl_warnings.front(), 120));
  }
  return out;
}

// Within one node, GPUs that reach each other go by P2P (or NVLS); the network stack or host
// memory between them is a transport NCCL fell back to.
std::optional<std::string> transport_fallback(const Evidence& e) {
  if (e.ranks_share_gpu || e.nccl_transports.empty()) return std::nullopt;
  bool net = false, shm = false, p2p = false;
  for (const auto& [name, n] : e.nccl_transports) {
    net = net || name.rfind("NET/", 0) == 0;
    shm = shm || name.rfind("SHM", 0) == 0;
    p2p = p2p || name.rfind("P2P", 0) == 0 || name.rfind("NVLS", 0) == 0;
  }
  if (net) {
    return "NCCL sends between this node's GPUs through the network stack: P2P and shared "
           "memory were refused (NCCL_P2P_DISABLE or NCCL_SHM_DISABLE set, or a container "
           "without --ipc=host)";
  }
  const bool all_can = !e.analysis.p2p.empty() &&
                       std::all_of(e.analysis.p2p.begin(), e.analysis.p2p.end(),
                                   [](const topo::P2pVerdict& v) { return v.can_access; });
  if (shm && !p2p && all_can) {
    return "NCCL copies through host memory (SHM) although every GPU pair can reach the other "
           "directly: NCCL_P2P_DISABLE or NCCL_P2P_LEVEL set, or the GPUs hidden from each other "
           "(CUDA_VISIBLE_DEVICES per process)";
  }
  return std::nullopt;
}

}  // namespace

std::vector<Check> judge_allreduce(const Evidence& e) {
  if (!e.allreduce_step.ran) return {};
  const size_t ranks = e.allreduce_request.devices.size();
  if (!e.allreduce_step.ok) {
    return {check(
        nullptr, "all-reduce",
        e.allreduce_step.code == ExitCode::kEnvironment ? Severity::kUnavailable : Severity::kFail,
        fmt::format("NCCL all-reduce over {} ranks: {}{}", ranks, e.allreduce_step.error,
                    transport_text(e)),
        step_failure_advice(e.allreduce_step.code, "all-reduce"))};
  }
  const tracing::TraceReport& r = *e.allreduce;
  uint64_t wrong = 0;
  for (const tracing::SizeRow& s : r.sizes)
    wrong += s.wrong_elements;
  if (r.sizes.empty()) {
    return {check(nullptr, "all-reduce", Severity::kUnavailable, "no size was measured")};
  }
  const tracing::SizeRow& big = r.sizes.back();
  const Figure figure{big.busbw_gbps, big.bytes, static_cast<int>(ranks)};
  const auto with_figure = [&](Check c) {
    c.figure = figure;
    return std::vector<Check>{std::move(c)};
  };
  std::string evidence = fmt::format(
      "NCCL {} all-reduce, {} sizes {}-{}, {} ranks, every result checked: busbw {:.1f} GB/s at "
      "{} (NCCL chose {})",
      r.meta.nccl_version, r.sizes.size(), measure::format_byte_size(r.sizes.front().bytes),
      measure::format_byte_size(big.bytes), ranks, big.busbw_gbps,
      measure::format_byte_size(big.bytes), tracing::to_string(big.nccl_choice));
  if (e.ranks_share_gpu) {
    evidence += "; the ranks share one GPU: a check of NCCL and the GPU, not a link figure";
  }
  evidence += transport_text(e);
  if (const std::optional<std::string> fallback = transport_fallback(e); fallback && wrong == 0) {
    return with_figure(check(nullptr, "all-reduce", Severity::kWarn, evidence + "; " + *fallback,
                             "unset what forces it (env | grep NCCL_), then run doctor again; "
                             "commtool topo says which GPU pairs can use P2P"));
  }
  const ModelFigures* model =
      e.topology.gpus.empty() ? nullptr : figures_for(e.topology.gpus.front().name);
  const bool one_model =
      std::all_of(e.topology.gpus.begin(), e.topology.gpus.end(),
                  [&](const topo::Gpu& g) { return figures_for(g.name) == model; });
  if (model && one_model && model->allreduce_busbw_8 > 0 && ranks == 8 && !e.ranks_share_gpu) {
    if (big.bytes < (1ull << 30)) {
      evidence += fmt::format(
          "; a {} node's figure ({:.0f} GB/s) is for 1 GiB and more: "
          "--level long reaches it",
          model->model, model->allreduce_busbw_8);
    } else if (wrong == 0 && big.busbw_gbps < probe::kLowShare * model->allreduce_busbw_8) {
      return with_figure(
          check(nullptr, "all-reduce", Severity::kWarn,
                fmt::format("{}; LOW: {:.0f}% of the {:.0f} GB/s of 8 {} ({})", evidence,
                            100 * big.busbw_gbps / model->allreduce_busbw_8,
                            model->allreduce_busbw_8, model->model, model->allreduce_source),
                "compare each GPU's NVLinks (the NVLink checks above) and run commtool "
                "diagnose allreduce to see which path NCCL takes"));
    } else {
      evidence += fmt::format("; {:.0f}% of the {:.0f} GB/s of 8 {}",
                              100 * big.busbw_gbps / model->allreduce_busbw_8,
                              model->allreduce_busbw_8, model->model);
    }
  }
  if (wrong > 0) {
    return {check(nullptr, "all-reduce", Severity::kFail,
                  fmt::format("{} wrong elements; {}", wrong, evidence),
                  step_failure_advice(ExitCode::kVerification, "all-reduce"))};
  }
  return with_figure(check(nullptr, "all-reduce", Severity::kPass, evidence));
}

namespace {

// The node's own checks: no GPU at all, topo's warnings (or its one pass), the all-reduce.
std::vector<Check> node_checks(const Evidence& e) {
  std::vector<Check> out;
  if (!e.no_gpu.empty()) {
    out.push_back(check(nullptr, "GPUs", Severity::kFail, e.no_gpu + " (" + e.topology.source + ")",
                        "check that the driver is loaded (nvidia-smi; lsmod | grep nvidia) "
                        "and what commtool topo sees"));
  }
  for (const topo::Finding& f : e.analysis.findings) {
    if (f.severity != topo::Severity::kWarning) continue;
    if (f.code == "no-gpu" && !out.empty()) {  // topo's words for the FAIL above
      out.front().evidence = f.message + " (" + f.evidence + ")";
      out.front().advice = f.advice;
      continue;
    }
    out.push_back(check(nullptr, "topology", Severity::kWarn,
                        f.message + (f.evidence.empty() ? "" : " (" + f.evidence + ")"), f.advice));
  }
  if (e.no_gpu.empty() &&
      std::none_of(out.begin(), out.end(), [](const Check& c) { return c.area == "topology"; })) {
    out.push_back(check(nullptr, "topology", Severity::kPass,
                        fmt::format("{} GPU(s), {} NIC(s): no warning from topo",
                                    e.topology.gpus.size(), e.topology.nics.size())));
  }
  for (Check& c : judge_allreduce(e))
    out.push_back(std::move(c));
  return out;
}

// What each GPU, NIC and bridge reports of itself: the kernel log, NVML's counters, the model,
// the IOMMU, ACS, PCIe AER, the RDMA ports, and the probe's copies; the node's first, then GPU
// by GPU, each in the order its rules gave.
std::vector<Check> device_checks(const Evidence& e) {
  std::vector<Check> out = judge_kernel_log(e);
  if (!e.counters_before.unavailable.empty()) {
    out.push_back(check(nullptr, "counters", Severity::kUnavailable,
                        "NVML: " + e.counters_before.unavailable,
                        "install the NVIDIA driver's NVML (libnvidia-ml.so.1)"));
  } else {
    for (size_t i = 0; i < e.topology.gpus.size() && i < e.counters_before.gpus.size(); ++i) {
      const health::GpuCounters* after =
          i < e.counters_after.gpus.size() ? &e.counters_after.gpus[i] : nullptr;
      for (Check& c : judge_counters(e.topology.gpus[i], e.counters_before.gpus[i], after,
                                     e.counter_window_s, e.request.thresholds))
        out.push_back(std::move(c));
    }
  }
  const bool rdma = std::any_of(e.topology.nics.begin(), e.topology.nics.end(),
                                [](const topo::Nic& n) { return topo::is_rdma(n.kind); });
  for (size_t i = 0; i < e.topology.gpus.size(); ++i) {
    const topo::Gpu& g = e.topology.gpus[i];
    out.push_back(judge_model(g, e.topology.in_vm));
    if (i < e.iommu.size()) {
      out.push_back(judge_iommu(g, e.iommu[i], e.topology.gpus.size() > 1 || rdma));
    }
  }
  if (std::optional<Check> acs = judge_acs(e.topology)) out.push_back(std::move(*acs));
  for (const health::AerCounts& a : e.aer) {
    const topo::Gpu* g = e.topology.find_gpu_by_bdf(a.bdf);
    Check c = judge_aer(a, g, e.request.thresholds);
    if (!g) {
      for (const topo::Nic& n : e.topology.nics)
        if (n.bdf == a.bdf) c.subject = fmt::format("NIC {} {}", n.name, n.bdf);
    }
    out.push_back(std::move(c));
  }
  for (const health::RdmaPort& p : e.rdma_ports)
    out.push_back(judge_rdma_port(p, e.request.thresholds));
  for (Check& c : judge_probe(e))
    out.push_back(std::move(c));
  std::stable_sort(out.begin(), out.end(),
                   [](const Check& a, const Check& b) { return a.gpu < b.gpu; });
  return out;
}

// The search by halves' suspects, each a FAIL with where to look next.
std::vector<Check> isolation_checks(const Evidence& e) {
  std::vector<Check> out;
  if (!e.isolation) return out;
  for (const commtool::doctor::Suspect& s : e.isolation->suspects) {
    const std::string who =
        s.between ? fmt::format("between GPU {} and GPU {}", s.gpus.front(), s.gpus.back())
                  : fmt::format("GPU{}", fmt::join(s.gpus, ", GPU"));
    out.push_back(check(
        s.gpus.size() == 1 ? gpu_at(e.topology, s.gpus[0]) : nullptr, "isolation", Severity::kFail,
        fmt::format("the all-reduce fails or slows {}: {} ({} runs by halves: {})", who, s.evidence,
                    e.isolation->runs, fmt::join(e.isolation->log, "; ")),
        s.between ? fmt::format("check the path between them: nvidia-smi nvlink -s "
                                "-i {}, commtool probe --p2p --devices {},{}",
                                s.gpus.front(), s.gpus.front(), s.gpus.back())
                  : fmt::format("take GPU{} out of the job and look at its Xid and "
                                "counter checks above; reset it (nvidia-smi -r -i "
                                "{})",
                                s.gpus.front(), s.gpus.front())));
  }
  return out;
}

// What did not run, and why.
std::vector<std::string> skipped_steps(const Evidence& e) {
  std::vector<std::string> out;
  if (!e.isolation_skipped.empty()) out.push_back("isolation: " + e.isolation_skipped);
  if (!e.probe_step.skipped.empty()) out.push_back("probe: " + e.probe_step.skipped);
  if (!e.allreduce_step.skipped.empty()) out.push_back("all-reduce: " + e.allreduce_step.skipped);
  if (e.probe) {
    for (const probe::Skipped& s : e.probe->skipped)
      out.push_back(s.probe + ": " + s.reason);
  }
  if (e.request.level == commtool::doctor::Level::kQuick && e.topology.gpus.size() > 1) {
    out.push_back("p2p: not at --level quick (standard measures every GPU pair)");
  }
  return out;
}

}  // namespace

Verdict judge(const Evidence& e) {
  Verdict v;
  v.checks = node_checks(e);
  for (Check& c : device_checks(e))
    v.checks.push_back(std::move(c));
  std::stable_sort(v.checks.begin(), v.checks.end(),
                   [](const Check& a, const Check& b) { return a.gpu < b.gpu; });
  for (Check& c : isolation_checks(e))
    v.checks.push_back(std::move(c));
  v.skipped = skipped_steps(e);
  for (const Check& c : v.checks)
    if (c.severity != Severity::kUnavailable) v.overall = std::max(v.overall, c.severity);
  return v;
}

int exit_code_of(Severity worst) {
  switch (worst) {
    case Severity::kFail:
      return kExitFail;
    case Severity::kWarn:
      return kExitWarn;
    default:
      return 0;
  }
}

int exit_code(const Evidence& e, const Verdict& v) {
  if (!e.no_gpu.empty()) return static_cast<int>(ExitCode::kEnvironment);
  return exit_code_of(v.overall);
}

}  // namespace commtool::reports::doctor
