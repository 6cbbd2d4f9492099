// The two renderings of topo's cluster view (probes/topo/cluster.hpp): the text rank 0 prints,
// and the JSON document. The text leads with the verdict and the nodes that differ from the
// common configuration, then prints the common topology once, as the single-node report of
// the first rank that has it. Its length grows with the number of nodes that differ and with
// the number of nodes (their names), never with nodes x nodes or ranks x ranks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "probes/topo/cluster.hpp"
#include "probes/topo/cluster_wire.hpp"

namespace commtool::reports {

// Bumped when a field changes meaning or disappears; adding fields does not bump it.
inline constexpr int kTopoClusterSchemaVersion = 1;

// ranks[r].document is rank r's text report.
std::string render_cluster_text(const topo::ClusterView& view,
                                const std::vector<topo::RankPayload>& ranks);

// ranks[r].document is rank r's topo --json document; every node carries its first rank's.
// Throws Error(kUsage) naming the rank when a document is not JSON.
nlohmann::json cluster_to_json(const topo::ClusterView& view,
                               const std::vector<topo::RankPayload>& ranks);

// One line on a configuration: "8 GPU(s) (8x NVIDIA H100), 8 NIC(s), 4 NVSwitch(es); NVIDIA
// driver 580.159.04, CUDA 13.0, NCCL 2.28.3".
std::string summarise(const topo::NodeFacts& facts);

}  // namespace commtool::reports
