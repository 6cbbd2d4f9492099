#include "probes/bandwidth/probe_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "probes/base/error.hpp"
#include "probes/base/measure/statistics.hpp"

namespace commtool::probe {

using nlohmann::json;

NodeProbe node_probe(const std::string& host, int rank, const ProbeReport& report) {
  NodeProbe node;
  node.host = host;
  node.rank = rank;
  node.gpus = static_cast<int>(report.topology.gpus.size());
  node.measurements = report.measurements;
  node.skipped = report.skipped;
  return node;
}

std::string encode_node_probe(const NodeProbe& node) {
  json skipped = json::array();
  for (const Skipped& s : node.skipped) {
    skipped.push_back({{"probe", s.probe}, {"reason", s.reason}, {"asked", s.asked}});
  }
  return json{{"format", kNodePayloadFormat},
              {"version", kNodePayloadVersion},
              {"host", node.host},
              {"rank", node.rank},
              {"ok", node.ok},
              {"exit_code", node.exit_code},
              {"error", node.error},
              {"gpus", node.gpus},
              {"measurements", node.measurements},
              {"skipped", skipped}}
      .dump();
}

NodeProbe decode_node_probe(std::string_view bytes, int rank) {
  auto fail = [rank](const std::string& field, const std::string& why) {
    return usage_error(
        fmt::format("rank {} sent a probe commtool cannot read: {}: {}", rank, field, why));
  };
  const json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw fail("payload", "not a JSON object");
  if (j.value("format", "") != kNodePayloadFormat || j.value("version", 0) != kNodePayloadVersion) {
    throw fail("format", fmt::format("{} version {}, expected {} version {} (is every rank "
                                     "running the same commtool?)",
                                     j.value("format", "none"), j.value("version", 0),
                                     kNodePayloadFormat, kNodePayloadVersion));
  }
  NodeProbe node;
  const char* field = "host";
  try {
    node.host = j.at("host").get<std::string>();
    field = "rank";
    node.rank = j.at("rank").get<int>();
    if (node.rank != rank) throw fail("rank", fmt::format("{} is not the sender's", node.rank));
    field = "ok";
    node.ok = j.at("ok").get<bool>();
    field = "exit_code";
    node.exit_code = j.at("exit_code").get<int>();
    field = "error";
    node.error = j.at("error").get<std::string>();
    field = "gpus";
    node.gpus = j.at("gpus").get<int>();
    field = "measurements";
    node.measurements = j.at("measurements").get<std::vector<Measurement>>();
    field = "skipped";
    for (const json& s : j.at("skipped")) {
      node.skipped.push_back({s.at("probe").get<std::string>(), s.at("reason").get<std::string>(),
                              s.at("asked").get<bool>()});
    }
  } catch (const json::exception& e) {
    throw fail(field, e.what());
  }
  if (node.host.empty()) throw fail("host", "empty");
  if (node.ok == (node.exit_code != 0)) {
    throw fail("exit_code", fmt::format("{} with ok {}", node.exit_code, node.ok));
  }
  for (const Measurement& m : node.measurements) {
    if (m.samples.empty() || !m.verified) {
      throw fail("measurements", fmt::format("{} {} has no verified samples", m.probe, m.what));
    }
  }
  return node;
}

namespace {

// What makes two nodes' figures the same figure.
using FigureKey =
    std::tuple<std::string, std::string, Engine, int, int, bool, int, int, std::string, uint64_t>;

FigureKey key_of(const Measurement& m) {
  return {m.probe,         m.what,     m.engine,   m.src,  m.dst,
          m.bidirectional, m.src_rank, m.dst_rank, m.unit, m.bytes};
}

bool stands_apart(const Measurement& m, double nodes_median) {
  if (nodes_median <= 0) return false;
  return m.unit == "us" ? m.summary.median > kNodeLatencyFactor * nodes_median
                        : m.summary.median < kNodeBandwidthShare * nodes_median;
}

}  // namespace

ProbeClusterView compare_nodes(std::vector<NodeProbe> nodes, int ranks) {
  ProbeClusterView view;
  view.ranks = ranks;
  view.nodes = std::move(nodes);

  // Each figure's nodes, in the order the figures were first measured.
  std::map<FigureKey, size_t> index;
  std::vector<std::vector<std::pair<const NodeProbe*, const Measurement*>>> members;
  int measured = 0;
  for (const NodeProbe& node : view.nodes) {
    if (!node.ok) continue;
    ++measured;
    for (const Measurement& m : node.measurements) {
      auto [it, fresh] = index.emplace(key_of(m), members.size());
      if (fresh) {
        members.emplace_back();
        FigureAcross figure;
        figure.first = m;
        view.figures.push_back(std::move(figure));
      }
      members[it->second].push_back({&node, &m});
    }
  }
  view.compared = measured >= kMinNodesToCompare;

  std::map<const NodeProbe*, MissingFigures> missing;
  for (size_t f = 0; f < view.figures.size(); ++f) {
    FigureAcross& figure = view.figures[f];
    std::vector<double> medians;
    for (auto [node, m] : members[f]) {
      medians.push_back(m->summary.median);
      if (figure.nodes == 0 || m->summary.median < figure.lowest) {
        figure.lowest = m->summary.median;
        figure.lowest_host = node->host;
      }
      if (figure.nodes == 0 || m->summary.median > figure.highest) {
        figure.highest = m->summary.median;
        figure.highest_host = node->host;
      }
      ++figure.nodes;
    }
    figure.median = measure::summarize(medians).median;
    if (!view.compared) continue;
    if (figure.nodes >= kMinNodesToCompare) {
      for (auto [node, m] : members[f]) {
        if (!stands_apart(*m, figure.median)) continue;
        view.outliers.push_back(
            {node->host, node->rank, *m, figure.median, m->summary.median / figure.median});
      }
    }
    // A figure most nodes have is missing where a node lacks it.
    if (2 * figure.nodes <= measured) continue;
    std::set<const NodeProbe*> having;
    for (auto [node, m] : members[f])
      having.insert(node);
    for (const NodeProbe& node : view.nodes) {
      if (!node.ok || having.count(&node) != 0) continue;
      MissingFigures& entry = missing[&node];
      if (entry.count++ == 0) {
        entry.host = node.host;
        entry.rank = node.rank;
        entry.example = figure.first;
      }
    }
  }
  for (const NodeProbe& node : view.nodes) {
    if (auto it = missing.find(&node); it != missing.end()) view.missing.push_back(it->second);
  }
  // Outliers by node, in rank order, then in the order the figures were measured.
  std::stable_sort(view.outliers.begin(), view.outliers.end(),
                   [](const NodeOutlier& a, const NodeOutlier& b) { return a.rank < b.rank; });
  return view;
}

namespace {

// The first probe, by name, that was asked for, skipped, and never measured.
std::optional<std::pair<std::string, std::string>> first_asked_not_run(
    const std::vector<const std::vector<Skipped>*>& skipped, const std::set<std::string>& ran) {
  std::map<std::string, std::string> asked;  // probe -> the first reason given
  for (const std::vector<Skipped>* list : skipped)
    for (const Skipped& s : *list)
      if (s.asked) asked.emplace(s.probe, s.reason);
  for (const auto& [name, reason] : asked)
    if (!ran.count(name)) return std::pair{name, reason};
  return std::nullopt;
}

}  // namespace

std::optional<std::string> asked_but_not_run(const ProbeReport& report) {
  std::set<std::string> ran;
  for (const Measurement& m : report.measurements)
    ran.insert(m.probe);
  const auto first = first_asked_not_run({&report.skipped}, ran);
  if (!first) return std::nullopt;
  return fmt::format("--{} was asked for but {}", first->first, first->second);
}

std::optional<std::string> asked_but_not_run(const ProbeClusterView& view) {
  std::set<std::string> ran;
  for (const FigureAcross& f : view.figures)
    ran.insert(f.first.probe);
  std::vector<const std::vector<Skipped>*> skipped;
  for (const NodeProbe& n : view.nodes)
    skipped.push_back(&n.skipped);
  const auto first = first_asked_not_run(skipped, ran);
  if (!first) return std::nullopt;
  return fmt::format("--{} was asked for but ran on no node: {}", first->first, first->second);
}

}  // namespace commtool::probe
