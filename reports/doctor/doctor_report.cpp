#include "reports/doctor/doctor_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace commtool::reports::doctor {

namespace {

using commtool::doctor::Evidence;
using nlohmann::json;

std::string headline(const Evidence& e, const Verdict& v) {
  std::string counts = fmt::format("{} FAIL, {} WARN, {} PASS", v.count(Severity::kFail),
                                   v.count(Severity::kWarn), v.count(Severity::kPass));
  if (int n = v.count(Severity::kUnavailable); n > 0)
    counts += fmt::format(", {} not available", n);
  return fmt::format("commtool doctor: {}  ({}; --level {}, {:.1f} s, {} at {})\n",
                     to_string(v.overall), counts, commtool::doctor::to_string(e.request.level),
                     e.seconds, e.hostname.empty() ? "this host" : e.hostname, e.started_at);
}

json count_json(const health::Count& c) {
  if (c.available) return c.value;
  return json{{"available", false}, {"why", c.why}};
}

json counters_json(const health::GpuCounters& g) {
  json j{{"bdf", g.bdf}, {"uuid", g.uuid}};
  if (!g.unavailable.empty()) {
    j["unavailable"] = g.unavailable;
    return j;
  }
  j["ecc_enabled"] = count_json(g.ecc_enabled);
  j["ecc_volatile_corrected"] = count_json(g.ecc_volatile_corrected);
  j["ecc_volatile_uncorrected"] = count_json(g.ecc_volatile_uncorrected);
  j["ecc_aggregate_corrected"] = count_json(g.ecc_aggregate_corrected);
  j["ecc_aggregate_uncorrected"] = count_json(g.ecc_aggregate_uncorrected);
  j["retired_pages_sbe"] = count_json(g.retired_sbe);
  j["retired_pages_dbe"] = count_json(g.retired_dbe);
  j["retired_pages_pending"] = count_json(g.retired_pending);
  j["remapped_rows_correctable"] = count_json(g.remap_correctable);
  j["remapped_rows_uncorrectable"] = count_json(g.remap_uncorrectable);
  j["remap_pending"] = count_json(g.remap_pending);
  j["remap_failure"] = count_json(g.remap_failure);
  j["pcie_replay"] = count_json(g.pcie_replay);
  j["clock_event_reasons"] = count_json(g.clock_reasons);
  j["persistence_mode"] = count_json(g.persistence);
  j["mig_mode"] = count_json(g.mig);
  j["fabric_state"] = count_json(g.fabric_state);
  json links = json::array();
  for (const health::NvLinkCounters& l : g.nvlinks) {
    links.push_back({{"link", l.link},
                     {"active", l.active},
                     {"crc_flit", count_json(l.crc_flit)},
                     {"crc_data", count_json(l.crc_data)},
                     {"replay", count_json(l.replay)},
                     {"recovery", count_json(l.recovery)}});
  }
  j["nvlinks"] = links;
  return j;
}

json step_json(const commtool::doctor::Step& s) {
  json j{{"ran", s.ran}};
  if (!s.skipped.empty()) j["skipped"] = s.skipped;
  if (s.ran) {
    j["ok"] = s.ok;
    j["seconds"] = s.seconds;
    if (!s.ok) {
      j["exit_code"] = static_cast<int>(s.code);
      j["error"] = s.error;
    }
  }
  return j;
}

}  // namespace

std::string render_doctor_text(const Evidence& e, const Verdict& v) {
  std::string out = headline(e, v);
  std::string problems;
  for (Severity s : {Severity::kFail, Severity::kWarn}) {
    for (const Check& c : v.checks) {
      if (c.severity != s) continue;
      problems += fmt::format("  {}  {}  {}: {}\n", to_string(s), c.subject, c.area, c.evidence);
      if (!c.advice.empty()) problems += "        what to do: " + c.advice + "\n";
    }
  }
  if (!problems.empty()) out += "\nProblems\n" + problems;
  // What passed, one line per subject in the order of the checks: its areas, and the
  // evidence of the figures worth seeing.
  std::vector<std::pair<std::string, std::string>> passed;  // (subject, areas)
  std::string figures;
  for (const Check& c : v.checks) {
    if (c.severity != Severity::kPass) continue;
    auto it = std::find_if(passed.begin(), passed.end(),
                           [&](const auto& p) { return p.first == c.subject; });
    if (it == passed.end()) it = passed.insert(passed.end(), {c.subject, ""});
    it->second += (it->second.empty() ? "" : ", ") + c.area;
    if (c.area == "all-reduce" || c.area == "H2D" || c.area == "D2H" ||
        c.area.rfind("P2P", 0) == 0) {
      figures += fmt::format("  {}  {}: {}\n", c.subject, c.area, c.evidence);
    }
  }
  if (!passed.empty()) {
    out += "\nPassed\n";
    for (const auto& [subject, areas] : passed)
      out += fmt::format("  {}: {}\n", subject, areas);
  }
  if (!figures.empty()) out += "\nMeasured\n" + figures;
  std::string unavailable;
  for (const Check& c : v.checks) {
    if (c.severity != Severity::kUnavailable) continue;
    unavailable += fmt::format("  {}  {}: {}\n", c.subject, c.area, c.evidence);
    if (!c.advice.empty()) unavailable += "        to read it: " + c.advice + "\n";
  }
  if (!unavailable.empty()) out += "\nNot available (never counted as a pass)\n" + unavailable;
  if (!v.skipped.empty()) {
    out += "\nSkipped\n";
    for (const std::string& s : v.skipped)
      out += "  " + s + "\n";
  }
  return out;
}

json doctor_to_json(const Evidence& e, const Verdict& v) {
  json checks = json::array();
  for (const Check& c : v.checks) {
    json j{{"subject", c.subject},
           {"area", c.area},
           {"severity", to_string(c.severity)},
           {"evidence", c.evidence}};
    if (c.gpu >= 0) j["gpu"] = c.gpu;
    if (!c.advice.empty()) j["advice"] = c.advice;
    if (c.figure) {
      j["figure"] = {{"gbps", c.figure->value}, {"bytes", c.figure->bytes}};
      if (c.figure->ranks > 0) j["figure"]["ranks"] = c.figure->ranks;
    }
    checks.push_back(j);
  }
  json counters = json::array();
  for (const health::GpuCounters& g :
       e.counters_after.gpus.empty() ? e.counters_before.gpus : e.counters_after.gpus)
    counters.push_back(counters_json(g));
  json thresholds = json::array();
  for (const health::ThresholdInfo& t : health::describe(e.request.thresholds))
    thresholds.push_back({{"name", t.name}, {"value", t.value}, {"source", t.source}});
  json j{
      {"schema_version", kDoctorSchemaVersion},
      {"command", "doctor"},
      {"verdict", to_string(v.overall)},
      {"level", commtool::doctor::to_string(e.request.level)},
      {"host", e.hostname},
      {"started_at", e.started_at},
      {"seconds", e.seconds},
      {"counts",
       {{"fail", v.count(Severity::kFail)},
        {"warn", v.count(Severity::kWarn)},
        {"pass", v.count(Severity::kPass)},
        {"not_available", v.count(Severity::kUnavailable)}}},
      {"checks", checks},
      {"skipped", v.skipped},
      {"steps", {{"probe", step_json(e.probe_step)}, {"allreduce", step_json(e.allreduce_step)}}},
      {"kernel_log",
       {{"source", e.kernel_log_source},
        {"read", e.kernel_log_read},
        {"lines", e.kernel_log.lines},
        {"events", e.kernel_log.events.size()}}},
      {"counter_window_s", e.counter_window_s},
      {"counters", counters},
      {"thresholds", thresholds}};
  if (!e.kernel_log_read) j["kernel_log"]["why"] = e.kernel_log_why;
  if (!e.counters_before.unavailable.empty())
    j["counters_unavailable"] = e.counters_before.unavailable;
  if (!e.no_gpu.empty()) j["no_gpu"] = e.no_gpu;
  return j;
}

}  // namespace commtool::reports::doctor
