// `probe` under MPI as rank 0 prints it: the nodes that differ first, then every figure once
// with the nodes' spread. O(nodes) lines at most: nothing is printed per node unless it differs.
#include <fmt/format.h>

#include <map>

#include "probes/base/measure/byte_size.hpp"
#include "probes/base/tool_packages.hpp"
#include "reports/format/text_table.hpp"
#include "reports/probe/probe_report.hpp"

namespace commtool::reports {

using probe::Measurement;
using probe::NodeProbe;
using probe::ProbeClusterView;

namespace {

// A node's figures that differ are listed up to this many; --json carries them all.
constexpr size_t kOutliersShownPerNode = 3;
// Host lists in one sentence stop after this many names.
constexpr size_t kHostsNamed = 8;

std::string node_name(const std::string& host, int rank) {
  return fmt::format("{} (rank {})", host, rank);
}

std::string host_list(const std::vector<std::string>& hosts) {
  std::string out;
  for (size_t i = 0; i < hosts.size() && i < kHostsNamed; ++i) {
    out += (i == 0 ? "" : ", ") + hosts[i];
  }
  if (hosts.size() > kHostsNamed) out += fmt::format(" and {} more", hosts.size() - kHostsNamed);
  return out;
}

// "H2D host -> GPU1 CE", "write while reverse GPU0 -> GPU1 SM (p2p)".
std::string figure_name(const Measurement& m) {
  std::string ends = m.src_rank >= 0 && m.src == m.dst
                         ? fmt::format("rank{} -> rank{}", m.src_rank, m.dst_rank)
                         : endpoint_name(m.src) + " -> " + endpoint_name(m.dst);
  return fmt::format("{} {} {} {} ({})", m.probe, m.what, ends, probe::to_string(m.engine), m.unit);
}

// What to look at on a node whose figure stands apart: the link it measured, against the same
// link on the other nodes.
std::string outlier_advice(const probe::NodeOutlier& o) {
  const Measurement& m = o.measurement;
  const std::string ends = endpoint_name(m.src) + " -> " + endpoint_name(m.dst);
  if (m.unit == "us") {
    return fmt::format(
        "on {}, rerun `commtool probe --latency` there to see {} stay apart: a latency apart "
        "from the other nodes' comes from the path (the topo cluster view under the same "
        "launcher compares it) or from other work on the GPUs (`nvidia-smi` lists the "
        "processes; {})",
        o.host, ends, tools::kNvidiaSmi);
  }
  if (m.src == probe::kHost || m.dst == probe::kHost) {
    const int gpu = m.src == probe::kHost ? m.dst : m.src;
    return fmt::format(
        "on {}, compare GPU{}'s PCIe link with the other nodes': the topo cluster view under the "
        "same launcher names a narrower or slower link, `nvidia-smi -q -d PCIE -i {}` reads it "
        "on the node ({}); check nothing else copies to it",
        o.host, gpu, gpu, tools::kNvidiaSmi);
  }
  return fmt::format(
      "on {}, compare the path {} with the other nodes': the topo cluster view under the same "
      "launcher names NVLinks down or another PCIe path; `nvidia-smi nvlink -s -i {}` reads the "
      "links on the node ({})",
      o.host, ends, m.src, tools::kNvidiaSmi);
}

// A node without figures the others have lacks a GPU or a path, or did not run a probe.
std::string missing_advice(const probe::MissingFigures& m) {
  return fmt::format(
      "on {}, see what it lacks: the topo cluster view under the same launcher names a GPU or "
      "NVLink missing against the other nodes, and this probe's \"not run\" lines below say "
      "which probes it skipped and why",
      m.host);
}

// "8 GPUs on every node" or "8 GPUs on 3 nodes; 7 on node-d".
std::string gpu_counts(const ProbeClusterView& view) {
  std::map<int, std::vector<std::string>> by_count;
  size_t measured = 0;
  for (const NodeProbe& n : view.nodes) {
    if (!n.ok) continue;
    by_count[n.gpus].push_back(n.host);
    ++measured;
  }
  if (by_count.empty()) return "no node measured";
  if (by_count.size() == 1) {
    const int gpus = by_count.begin()->first;
    if (measured == view.nodes.size()) {
      return fmt::format("{} GPU(s) on {}", gpus, measured == 1 ? "the node" : "every node");
    }
    return fmt::format("{} GPU(s) on each of the {} node(s) that measured", gpus, measured);
  }
  auto most = by_count.begin();
  for (auto it = by_count.begin(); it != by_count.end(); ++it) {
    if (it->second.size() > most->second.size()) most = it;
  }
  std::string out = fmt::format("{} GPU(s) on {} nodes", most->first, most->second.size());
  for (const auto& [count, hosts] : by_count) {
    if (count != most->first) out += fmt::format("; {} on {}", count, host_list(hosts));
  }
  return out;
}

std::string differ_section(const ProbeClusterView& view) {
  std::string out = fmt::format(
      "\nNodes that differ from the others (a bandwidth under {:.0f}% of the nodes' median, a "
      "latency over {:.2f}x it, or figures the other nodes have)\n",
      100 * probe::kNodeBandwidthShare, probe::kNodeLatencyFactor);
  int measured = 0;
  for (const NodeProbe& n : view.nodes)
    measured += n.ok ? 1 : 0;
  if (!view.compared) {
    return out + fmt::format(
                     "  not compared: {} node(s) measured, and naming the odd one out takes at "
                     "least {}; the figures are side by side below\n",
                     measured, probe::kMinNodesToCompare);
  }
  if (view.outliers.empty() && view.missing.empty()) {
    return out + "  none: every node gave every figure the others gave, within those bounds\n";
  }
  std::map<int, std::vector<const probe::NodeOutlier*>> by_rank;
  for (const probe::NodeOutlier& o : view.outliers)
    by_rank[o.rank].push_back(&o);
  std::map<int, const probe::MissingFigures*> missing;
  for (const probe::MissingFigures& m : view.missing)
    missing[m.rank] = &m;
  for (const NodeProbe& n : view.nodes) {
    auto outliers = by_rank.find(n.rank);
    if (outliers != by_rank.end()) {
      const auto& list = outliers->second;
      for (size_t i = 0; i < list.size() && i < kOutliersShownPerNode; ++i) {
        const probe::NodeOutlier& o = *list[i];
        out += fmt::format("  {}: {}: {} against the nodes' median of {} ({:.2f}x)\n",
                           node_name(o.host, o.rank), figure_name(o.measurement),
                           figure_text(o.measurement.summary.median, o.measurement.unit),
                           figure_text(o.nodes_median, o.measurement.unit), o.ratio);
        out += "      what to do: " + outlier_advice(o) + "\n";
      }
      if (list.size() > kOutliersShownPerNode) {
        out += fmt::format("  {}: and {} more figure(s) apart (--json lists every one)\n",
                           node_name(n.host, n.rank), list.size() - kOutliersShownPerNode);
      }
    }
    if (auto m = missing.find(n.rank); m != missing.end()) {
      out += fmt::format(
          "  {}: {} figure(s) most nodes gave are missing, such as {}\n"
          "      what to do: {}\n",
          node_name(n.host, n.rank), m->second->count, figure_name(m->second->example),
          missing_advice(*m->second));
    }
  }
  return out;
}

std::string verdict_section(const ProbeClusterView& view) {
  std::string lines;
  for (const NodeProbe& n : view.nodes) {
    for (const Measurement& m : n.measurements) {
      if (std::string s = verdict_sentence(m); !s.empty()) {
        lines += fmt::format("  {}: {}\n      what to do: on {}, {}\n", node_name(n.host, n.rank),
                             s, n.host, verdict_advice(m));
      }
    }
  }
  return fmt::format("\nAgainst each link's expected rate (LOW under {:.0f}%)\n",
                     100 * probe::kLowShare) +
         (lines.empty() ? "  every node's every figure is as expected\n" : lines);
}

std::string figures_section(const ProbeClusterView& view) {
  if (view.figures.empty()) return {};
  TextTable t({"probe", "what", "from", "to", "engine", "unit", "nodes", "median", "lowest", "on",
               "highest", "on", "expected"});
  for (const probe::FigureAcross& f : view.figures) {
    const Measurement& m = f.first;
    const bool by_rank = m.src_rank >= 0 && m.src == m.dst;
    t.add_row({m.probe, m.what,
               by_rank ? "rank" + std::to_string(m.src_rank) : endpoint_name(m.src),
               by_rank ? "rank" + std::to_string(m.dst_rank) : endpoint_name(m.dst),
               probe::to_string(m.engine), m.unit, std::to_string(f.nodes),
               figure_text(f.median, m.unit), figure_text(f.lowest, m.unit), f.lowest_host,
               figure_text(f.highest, m.unit), f.highest_host,
               m.expected > 0 ? fmt::format("{:.1f} ({})", m.expected, m.expected_basis) : "-"});
  }
  return "\nEvery figure across the nodes (each node's median of its batches; the nodes' median, "
         "lowest and highest)\n" +
         t.render();
}

std::string not_run_section(const ProbeClusterView& view) {
  std::map<std::string, std::vector<std::string>> hosts_by_reason;
  for (const NodeProbe& n : view.nodes) {
    for (const probe::Skipped& s : n.skipped) {
      hosts_by_reason[s.probe + ": not run: " + s.reason].push_back(n.host);
    }
  }
  std::string out;
  for (const auto& [reason, hosts] : hosts_by_reason) {
    out += fmt::format("\n{} (on {})\n", reason, host_list(hosts));
  }
  return out;
}

std::string failed_section(const ProbeClusterView& view) {
  std::string lines;
  for (const NodeProbe& n : view.nodes) {
    if (n.ok) continue;
    lines += fmt::format("  {}: exit {}: {}\n", node_name(n.host, n.rank), n.exit_code, n.error);
  }
  return lines.empty() ? "" : "\nNodes whose probe failed (no figure from them above)\n" + lines;
}

nlohmann::json figure_json(const Measurement& m) {
  nlohmann::json j = {
      {"probe", m.probe},
      {"what", m.what},
      {"engine", probe::to_string(m.engine)},
      {"src", m.src == probe::kHost ? nlohmann::json("host") : nlohmann::json(m.src)},
      {"dst", m.dst == probe::kHost ? nlohmann::json("host") : nlohmann::json(m.dst)},
      {"bidirectional", m.bidirectional},
      {"bytes", m.bytes},
      {"unit", m.unit}};
  if (m.src_rank >= 0) {
    j["src_rank"] = m.src_rank;
    j["dst_rank"] = m.dst_rank;
  }
  return j;
}

}  // namespace

std::string render_probe_cluster_text(const ProbeClusterView& view, const probe::ProbeRequest& q) {
  std::string out = fmt::format(
      "commtool probe across {} node(s), {} MPI rank(s): on each node its lowest rank measured "
      "the node's GPUs in turn, as on one machine; {}\n"
      "{} per copy, {} copies per timed batch, median of {} batches after {} warm-up copies; GB/s "
      "= "
      "1e9 bytes/s, bytes counted once; every batch's data verified\n",
      view.nodes.size(), view.ranks, gpu_counts(view), measure::format_byte_size(q.bytes), q.iters,
      q.batches, q.warmup);
  out += differ_section(view);
  out += verdict_section(view);
  out += figures_section(view);
  out += not_run_section(view);
  out += failed_section(view);
  return out;
}

nlohmann::json probe_cluster_to_json(const ProbeClusterView& view, const probe::ProbeRequest& q) {
  using nlohmann::json;
  json nodes = json::array();
  for (const NodeProbe& n : view.nodes) {
    json skipped = json::array();
    for (const probe::Skipped& s : n.skipped)
      skipped.push_back({{"probe", s.probe}, {"reason", s.reason}});
    json node = {{"host", n.host},
                 {"rank", n.rank},
                 {"node_ranks", n.node_ranks},
                 {"ok", n.ok},
                 {"gpus", n.gpus},
                 {"measurements", measurements_to_json(n.measurements)},
                 {"skipped", skipped}};
    if (!n.ok) {
      node["exit_code"] = n.exit_code;
      node["error"] = n.error;
    }
    nodes.push_back(node);
  }
  json across = json::array();
  for (const probe::FigureAcross& f : view.figures) {
    json j = figure_json(f.first);
    j["nodes"] = f.nodes;
    j["median"] = f.median;
    j["lowest"] = {{"value", f.lowest}, {"host", f.lowest_host}};
    j["highest"] = {{"value", f.highest}, {"host", f.highest_host}};
    j["expected"] = f.first.expected > 0 ? json(f.first.expected) : json(nullptr);
    j["expected_basis"] = f.first.expected_basis;
    across.push_back(j);
  }
  json differ = json::array();
  for (const probe::NodeOutlier& o : view.outliers) {
    json j = figure_json(o.measurement);
    j["host"] = o.host;
    j["rank"] = o.rank;
    j["median"] = o.measurement.summary.median;
    j["nodes_median"] = o.nodes_median;
    j["ratio"] = o.ratio;
    j["advice"] = outlier_advice(o);
    differ.push_back(j);
  }
  json missing = json::array();
  for (const probe::MissingFigures& m : view.missing) {
    missing.push_back({{"host", m.host},
                       {"rank", m.rank},
                       {"count", m.count},
                       {"example", figure_json(m.example)},
                       {"advice", missing_advice(m)}});
  }
  return {{"schema_version", kProbeSchemaVersion},
          {"command", "probe"},
          {"mpi",
           {{"ranks", view.ranks},
            {"nodes", view.nodes.size()},
            {"measured_by", "the lowest rank of each host"}}},
          {"settings", settings_to_json(q)},
          {"thresholds",
           {{"bandwidth_share_of_nodes_median", probe::kNodeBandwidthShare},
            {"latency_factor_of_nodes_median", probe::kNodeLatencyFactor},
            {"min_nodes_to_compare", probe::kMinNodesToCompare}}},
          {"compared", view.compared},
          {"nodes", nodes},
          {"across_nodes", across},
          {"differ", differ},
          {"missing", missing}};
}

std::string render_probe_cluster_csv(const ProbeClusterView& view) {
  std::string out = "host,rank," + csv_header() + "\n";
  for (const NodeProbe& n : view.nodes) {
    for (const Measurement& m : n.measurements) {
      out += fmt::format("{},{},{}\n", n.host, n.rank, csv_row(m));
    }
  }
  return out;
}

}  // namespace commtool::reports
