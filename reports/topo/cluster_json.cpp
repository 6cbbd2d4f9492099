#include <fmt/format.h>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "reports/topo/cluster_report.hpp"

namespace commtool::reports {

using namespace commtool::topo;
using nlohmann::json;

json cluster_to_json(const ClusterView& view, const std::vector<RankPayload>& ranks) {
  json nodes = json::array();
  for (const ClusterNode& n : view.nodes) {
    const auto rank = static_cast<size_t>(n.ranks.front());
    json topology;
    try {
      topology = files::parse_json_bounded(ranks[rank].document, fmt::format("rank {}", rank));
    } catch (const json::exception& e) {
      throw usage_error(
          fmt::format("rank {} sent a topology that is not JSON: {}", rank, e.what()));
    }
    nodes.push_back({{"label", n.label},
                     {"host", n.host},
                     {"source", n.source},
                     {"ranks", n.ranks},
                     {"configuration", n.configuration},
                     {"common", n.configuration == 0},
                     {"topology", std::move(topology)}});
  }
  json configurations = json::array();
  for (size_t c = 0; c < view.configurations.size(); ++c) {
    const Configuration& config = view.configurations[c];
    json labels = json::array();
    for (size_t n : config.nodes)
      labels.push_back(view.nodes[n].label);
    json differences = json::array();
    for (const Difference& d : config.differences) {
      differences.push_back({{"code", d.code},
                             {"message", d.message},
                             {"evidence", d.evidence},
                             {"advice", d.advice}});
    }
    configurations.push_back({{"index", c},
                              {"common", c == 0},
                              {"nodes", labels},
                              {"ranks", config.ranks},
                              {"summary", summarise(config.facts)},
                              {"differences", differences}});
  }
  json differing = json::array();
  for (const ClusterNode& n : view.nodes) {
    if (n.configuration != 0) differing.push_back(n.label);
  }
  return {{"schema_version", kTopoClusterSchemaVersion},
          {"command", "topo"},
          {"kind", "cluster"},
          {"ranks", view.ranks},
          {"hosts", view.hosts},
          {"node_count", view.nodes.size()},
          {"common_configuration", view.configurations.empty() ? json(nullptr) : json(0)},
          {"differing_nodes", differing},
          {"configurations", configurations},
          {"nodes", nodes}};
}

}  // namespace commtool::reports
