// The three renderings of a topology: the human report, the JSON document, the Graphviz tree.
// Each takes the model and its analysis and returns text; none decides anything.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "probes/topo/classify.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::reports {

// Bumped when a field changes meaning or disappears; adding fields does not bump it.
inline constexpr int kTopoSchemaVersion = 1;

std::string render_topo_text(const topo::Topology& topo, const topo::Analysis& analysis);
nlohmann::json topo_to_json(const topo::Topology& topo, const topo::Analysis& analysis);
std::string render_topo_dot(const topo::Topology& topo);

}  // namespace commtool::reports
