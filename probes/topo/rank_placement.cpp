#include "probes/topo/rank_placement.hpp"

#include <algorithm>

#include "probes/topo/discover.hpp"

namespace commtool::topo {

workers::PlacementSummary RankPlacement::summary() const {
  return workers::summarize_placement(devices());
}

std::vector<workers::WorkerSpec> RankPlacement::specs() const {
  std::vector<workers::WorkerSpec> out;
  for (int r = 0; r < nranks(); ++r)
    out.push_back({r, gpu[static_cast<size_t>(r)].index});
  return out;
}

std::vector<int> RankPlacement::devices() const {
  std::vector<int> out;
  for (const Gpu& g : gpu)
    out.push_back(g.index);
  return out;
}

RankPlacement place_ranks(Topology topology, const std::vector<int>& rank_devices) {
  if (!rank_devices.empty()) select_gpus(topology, rank_devices);
  RankPlacement p;
  if (rank_devices.empty()) {
    p.gpu = topology.gpus;
  } else {
    for (int d : rank_devices) {
      auto it = std::find_if(topology.gpus.begin(), topology.gpus.end(),
                             [&](const Gpu& g) { return g.index == d; });
      p.gpu.push_back(*it);  // select_gpus refused an index the machine lacks
    }
  }
  p.topology = std::move(topology);
  return p;
}

RankPlacement place_ranks(const std::vector<int>& rank_devices, const std::string& command) {
  // select_gpus keeps each listed GPU once however often it is listed.
  return place_ranks(discover_for_launcher(rank_devices, command), rank_devices);
}

}  // namespace commtool::topo
