// Which GPU each rank of a worker group runs on. `--devices 0,1` is one rank per GPU; a GPU
// listed several times carries that many ranks (`--devices 0,0,0,0`: four ranks on GPU 0, a
// correctness run: see probes/base/workers/placement.hpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/base/workers/cluster_group.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/base/workers/placement.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::topo {

struct RankPlacement {
  Topology topology;     // the GPUs the ranks use, each once (on one machine; under MPI, rank 0's)
  std::vector<Gpu> gpu;  // by rank
  // Under MPI the host of each rank, by rank (a GPU is a host's and its index); empty on one
  // machine.
  std::vector<std::string> hosts;
  int nranks() const { return static_cast<int>(gpu.size()); }
  workers::PlacementSummary summary() const;
  std::vector<workers::WorkerSpec> specs() const;  // rank r on gpu[r]
  std::vector<int> devices() const;                // GPU index by rank
};

// The ranks of a launcher (trace, diagnose, probe --ipc): `rank_devices` as the user listed
// them, repeats and order kept; empty: one rank per GPU. Discovers the machine without
// initialising CUDA here. Throws Error(kEnvironment) naming `command` when there is no GPU,
// usage_error for an index the machine lacks.
RankPlacement place_ranks(const std::vector<int>& rank_devices, const std::string& command);
// The same from a topology already read (pure; tests use fixtures).
RankPlacement place_ranks(Topology topology, const std::vector<int>& rank_devices);

// Under MPI (a workers::ClusterScope alive), place_ranks asks every rank for its GPU: each node
// reads its own machine, `rank_devices` lists that node's GPUs one entry per rank of the node in
// local-rank order (empty: one rank per GPU), and a node with more ranks than entries is an
// error naming it. This is the answer of one rank; the name of the question is
// kPlacementQuestion.
inline constexpr const char* kPlacementQuestion = "placement";
nlohmann::json answer_placement(const workers::ClusterRank& self, const nlohmann::json& args);
// The answer from the node's ranks as placed on its own machine (pure; `listed`: --devices was
// given). Throws Error(kUsage) naming the host when the node has more ranks than entries.
nlohmann::json placement_answer(const RankPlacement& node, const workers::ClusterRank& self,
                                bool listed);
// The GPU of every rank from their answers (pure; tests use fixtures).
RankPlacement placement_from_answers(Topology topology, const std::vector<nlohmann::json>& answers,
                                     const std::vector<std::string>& hosts);

}  // namespace commtool::topo
