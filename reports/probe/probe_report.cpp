#include "reports/probe/probe_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "probes/base/measure/byte_size.hpp"
#include "probes/base/tool_packages.hpp"
#include "probes/base/workers/placement.hpp"
#include "reports/format/text_table.hpp"

namespace commtool::reports {

using probe::Measurement;
using probe::ProbeReport;

namespace {

std::string pct_text(const Measurement& m) {
  probe::Verdict v = probe::judge(m);
  return v.percent > 0 ? fmt::format("{:.0f}%", v.percent) : "-";
}

// One row per measurement: for host<->device and latency, where there are few.
std::string table(const std::vector<const Measurement*>& ms) {
  TextTable t(
      {"from", "to", "what", "engine", "median", "min", "max", "CV", "expected", "%", "verdict"});
  for (const Measurement* m : ms) {
    t.add_row({endpoint_name(m->src), endpoint_name(m->dst), m->what, probe::to_string(m->engine),
               figure_text(m->summary.median, m->unit), figure_text(m->summary.min, m->unit),
               figure_text(m->summary.max, m->unit), fmt::format("{:.1f}%", 100 * m->summary.cv),
               m->expected > 0 ? fmt::format("{:.1f} ({})", m->expected, m->expected_basis) : "-",
               pct_text(*m), verdict_text(*m)});
  }
  return t.render();
}

// Which end of a measurement a matrix row or column stands for: a GPU, or a worker rank when
// several ranks share a GPU (the one-GPU correctness runs of --ipc).
struct Axis {
  bool by_rank = false;
  int src(const Measurement& m) const { return by_rank ? m.src_rank : m.src; }
  int dst(const Measurement& m) const { return by_rank ? m.dst_rank : m.dst; }
  std::string name(int k) const { return by_rank ? "rank" + std::to_string(k) : endpoint_name(k); }
};

// nvbandwidth-style matrix: rows are sources, columns destinations, cells the median.
std::string matrix(const std::vector<const Measurement*>& ms, const std::vector<int>& keys,
                   const Axis& axis) {
  std::vector<std::string> header{"from \\ to"};
  for (int k : keys)
    header.push_back(axis.name(k));
  TextTable t(header);
  for (int src : keys) {
    std::vector<std::string> row{axis.name(src)};
    for (int dst : keys) {
      std::string cell = src == dst ? "-" : "n/a";
      for (const Measurement* m : ms) {
        if (axis.src(*m) != src || axis.dst(*m) != dst) continue;
        cell = figure_text(m->summary.median, m->unit);
        if (m->expected > 0) cell += " (" + pct_text(*m) + ")";
      }
      row.push_back(cell);
    }
    t.add_row(row);
  }
  return t.render();
}

std::vector<const Measurement*> select(const ProbeReport& r, const std::string& probe,
                                       const std::string& what, probe::Engine engine) {
  std::vector<const Measurement*> out;
  for (const Measurement& m : r.measurements) {
    if (m.probe == probe && m.what == what && m.engine == engine) out.push_back(&m);
  }
  return out;
}

std::string peer_section(const ProbeReport& r, const std::string& probe, const std::string& title) {
  Axis axis;
  for (const Measurement& m : r.measurements) {
    axis.by_rank |= m.probe == probe && m.src == m.dst && m.src_rank >= 0;
  }
  std::set<int> key_set;
  for (const Measurement& m : r.measurements) {
    if (m.probe != probe) continue;
    key_set.insert(axis.src(m));
    key_set.insert(axis.dst(m));
  }
  if (key_set.empty()) return {};
  std::vector<int> keys(key_set.begin(), key_set.end());
  std::string out = "\n" + title + "\n";
  if (axis.by_rank) {
    out +=
        "  Several worker ranks share one GPU: a correctness run of the IPC path; the timings "
        "below measure one GPU's memory and time-slicing, not a link, and mean nothing.\n";
  }
  for (probe::Engine e : {probe::Engine::kCopyEngine, probe::Engine::kSm}) {
    for (const char* what : {"write", "write while reverse"}) {
      auto ms = select(r, probe, what, e);
      if (ms.empty()) continue;
      out += fmt::format("  {} {} (GB/s, median; % of the link's expected rate)\n",
                         probe::to_string(e),
                         std::string(what) == "write" ? "unidirectional: row writes into column"
                                                      : "bidirectional: row -> column while "
                                                        "column -> row runs");
      out += matrix(ms, keys, axis);
    }
  }
  auto pingpong = select(r, probe, "flag round trip", probe::Engine::kSm);
  if (!pingpong.empty()) {
    out +=
        "  Flag round trip over mapped memory (us, median; release store, acquire load, "
        "system scope)\n";
    out += matrix(pingpong, keys, axis);
  }
  return out;
}

}  // namespace

std::string endpoint_name(int e) {
  return e == probe::kHost ? "host" : "GPU" + std::to_string(e);
}

std::string verdict_text(const Measurement& m) {
  probe::Verdict v = probe::judge(m);
  if (v.percent == 0) return m.unit == "GB/s" ? "no expectation" : "";
  if (v.above) return "ABOVE SPEC?";
  if (!v.judged) return "not judged (SM kernels share the SMs)";
  return v.low ? "LOW" : "ok";
}

std::string verdict_sentence(const Measurement& m) {
  probe::Verdict v = probe::judge(m);
  if (!v.low && !v.above) return {};
  return fmt::format("{} {} {} {} -> {}: {:.1f} GB/s is {:.0f}% of {:.1f} GB/s ({}){}",
                     v.low ? "LOW" : "ABOVE SPEC?", m.probe, m.what, endpoint_name(m.src),
                     endpoint_name(m.dst), m.summary.median, v.percent, m.expected,
                     m.expected_basis,
                     v.low ? fmt::format(", under {:.0f}%", 100 * probe::kLowShare)
                           : ": the expectation is probably wrong for this link");
}

std::string verdict_advice(const Measurement& m) {
  probe::Verdict v = probe::judge(m);
  if (!v.low && !v.above) return {};
  const int gpu = m.src == probe::kHost ? m.dst : m.src;
  if (v.above) {
    return fmt::format(
        "compare the link commtool assumed ({}) with what `commtool topo` reads for {} -> {}; "
        "if the link is faster than that, report it with both commands' --json output",
        m.expected_basis, endpoint_name(m.src), endpoint_name(m.dst));
  }
  if (m.src == probe::kHost || m.dst == probe::kHost) {
    return fmt::format(
        "check GPU{}'s PCIe link in `commtool topo` (a width or generation below its best, a "
        "NUMA node far from the host memory) or `nvidia-smi -q -d PCIE -i {}` ({}), and that no "
        "other process copies to it (`nvidia-smi` lists them)",
        gpu, gpu, tools::kNvidiaSmi);
  }
  return fmt::format(
      "check the path between GPU{} and GPU{} in `commtool topo` (NVLinks down, or PCIe through "
      "the CPU where a switch was expected), `nvidia-smi nvlink -s -i {}` for the links' state "
      "({}), and that no other process uses either GPU",
      m.src, m.dst, m.src, tools::kNvidiaSmi);
}

std::string figure_text(double v, const std::string& unit) {
  return unit == "us" ? fmt::format("{:.2f}", v) : fmt::format("{:.1f}", v);
}

// Where the IPC workers ran, when they ran: ranks sharing a GPU copy within its memory.
static workers::PlacementSummary ipc_placement(const ProbeReport& r) {
  const bool ran = std::any_of(r.measurements.begin(), r.measurements.end(),
                               [](const Measurement& m) { return m.probe == "ipc"; });
  return ran ? workers::summarize_placement(r.request.ipc_placement) : workers::PlacementSummary{};
}

std::string render_probe_text(const ProbeReport& r) {
  const auto& q = r.request;
  std::string out;
  if (std::string label = workers::shared_gpu_label(ipc_placement(r)); !label.empty()) {
    out += label + " IPC figures between ranks on one GPU are copies within its memory.\n\n";
  }
  out += fmt::format(
      "commtool probe: {} GPU(s); {} per copy, {} copies per timed batch, median of {} batches "
      "after {} warm-up copies; GB/s = 1e9 bytes/s, bytes counted once; every batch's data "
      "verified\n",
      r.topology.gpus.size(), measure::format_byte_size(q.bytes), q.iters, q.batches, q.warmup);

  std::vector<const Measurement*> h2d, latency;
  for (const Measurement& m : r.measurements) {
    if (m.probe == "h2d") h2d.push_back(&m);
    if (m.probe == "latency") latency.push_back(&m);
  }
  if (!h2d.empty()) {
    out +=
        "\nHost <-> device bandwidth (GB/s per direction; pinned host memory on the GPU's "
        "NUMA node)\n";
    out += table(h2d);
    out +=
        "  'while' rows ran with the other direction busy: the two rows of a pair add up to "
        "the bidirectional total.\n";
  }
  out += peer_section(r, "p2p", "GPU <-> GPU in one process, peer access (P2P)");
  out += peer_section(r, "ipc", "GPU <-> GPU between processes, CUDA IPC");
  if (!latency.empty()) {
    out += "\nLatency (us, median)\n";
    out += table(latency);
    out +=
        "  round trip: one dependent, cache-bypassing 8-byte load by an SM from the other "
        "side's memory; 4 B copy: one cudaMemcpyAsync of 4 bytes, back to back.\n";
  }
  for (const auto& p : r.refused) {
    out += fmt::format("\nGPU{} -> GPU{}: no P2P, so no figure: {}\n", p.a, p.b, p.reason);
  }
  for (const auto& s : r.skipped)
    out += fmt::format("\n{}: not run: {}\n", s.probe, s.reason);

  std::string verdicts;
  for (const Measurement& m : r.measurements) {
    if (std::string line = verdict_sentence(m); !line.empty()) {
      verdicts += "  " + line + "\n      what to do: " + verdict_advice(m) + "\n";
    }
  }
  out += "\nVerdicts (LOW under " + fmt::format("{:.0f}", 100 * probe::kLowShare) +
         "% of the expected rate)\n" +
         (verdicts.empty() ? "  every figure is as expected\n" : verdicts);
  return out;
}

nlohmann::json probe_to_json(const ProbeReport& r) {
  using nlohmann::json;
  json refused = json::array();
  for (const auto& p : r.refused)
    refused.push_back({{"gpus", {p.a, p.b}}, {"reason", p.reason}});
  json skipped = json::array();
  for (const auto& s : r.skipped)
    skipped.push_back({{"probe", s.probe}, {"reason", s.reason}});
  const auto& q = r.request;
  return {{"schema_version", kProbeSchemaVersion},
          {"command", "probe"},
          {"settings", settings_to_json(q)},
          {"rank_placement",
           ipc_placement(r).ranks > 0 ? workers::to_json(ipc_placement(r)) : json(nullptr)},
          {"measurements", measurements_to_json(r.measurements)},
          {"refused", refused},
          {"skipped", skipped}};
}

nlohmann::json measurements_to_json(const std::vector<Measurement>& measurements) {
  using nlohmann::json;
  json ms = json::array();
  for (const Measurement& m : measurements) {
    json j = m;
    probe::Verdict v = probe::judge(m);
    j["percent_of_expected"] = v.percent > 0 ? json(v.percent) : json(nullptr);
    j["verdict"] = verdict_text(m);
    const std::string advice = verdict_advice(m);
    j["advice"] = advice.empty() ? json(nullptr) : json(advice);
    ms.push_back(j);
  }
  return ms;
}

nlohmann::json settings_to_json(const probe::ProbeRequest& q) {
  return {{"bytes", q.bytes},
          {"iters", q.iters},
          {"batches", q.batches},
          {"warmup", q.warmup},
          {"timeout_s", q.timeout_s},
          {"statistic", "median of batches; GB/s = 1e9 B/s, bytes counted once"},
          {"low_share", probe::kLowShare}};
}

std::string csv_header() {
  return "probe,what,engine,src,dst,bidirectional,bytes,iters,unit,n,median,min,max,mean,cv,p99,"
         "expected,expected_basis,percent,verdict";
}

std::string csv_row(const Measurement& m) {
  const auto& s = m.summary;
  probe::Verdict v = probe::judge(m);
  return fmt::format(
      "{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},"
      "\"{}\",{},{}",
      m.probe, m.what, probe::to_string(m.engine), endpoint_name(m.src), endpoint_name(m.dst),
      m.bidirectional ? 1 : 0, m.bytes, m.iters, m.unit, s.n, s.median, s.min, s.max, s.mean, s.cv,
      s.p99, m.expected > 0 ? fmt::format("{:.6g}", m.expected) : "", m.expected_basis,
      v.percent > 0 ? fmt::format("{:.1f}", v.percent) : "", verdict_text(m));
}

std::string render_probe_csv(const ProbeReport& r) {
  std::string out = csv_header() + "\n";
  for (const Measurement& m : r.measurements)
    out += csv_row(m) + "\n";
  return out;
}

}  // namespace commtool::reports
