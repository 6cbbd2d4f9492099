#include "probes/topo/rank_placement.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "probes/base/error.hpp"
#include "probes/topo/discover.hpp"

namespace commtool::topo {

workers::PlacementSummary RankPlacement::summary() const {
  if (hosts.empty()) return workers::summarize_placement(devices());
  std::vector<std::string> gpus;  // the same index on two hosts is two GPUs
  for (int r = 0; r < nranks(); ++r)
    gpus.push_back(hosts[static_cast<size_t>(r)] + "/" + gpu[static_cast<size_t>(r)].bdf);
  return workers::summarize_placement(gpus);
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
  Topology here = discover_for_launcher(rank_devices, command);
  if (workers::ClusterGroups* cluster = workers::active_cluster()) {
    const std::vector<nlohmann::json> answers =
        cluster->ask_all(kPlacementQuestion, {{"devices", rank_devices}, {"command", command}});
    return placement_from_answers(std::move(here), answers, cluster->hosts());
  }
  return place_ranks(std::move(here), rank_devices);
}

nlohmann::json answer_placement(const workers::ClusterRank& self, const nlohmann::json& args) {
  const auto rank_devices = args.value("devices", std::vector<int>{});
  return placement_answer(
      place_ranks(discover_for_launcher(rank_devices, args.value("command", "commtool")),
                  rank_devices),
      self, !rank_devices.empty());
}

nlohmann::json placement_answer(const RankPlacement& node, const workers::ClusterRank& self,
                                bool listed) {
  if (self.local_rank >= node.nranks()) {
    throw Error(
        ExitCode::kUsage,
        fmt::format("{} runs {} ranks of this MPI job but {} {} GPU(s): under MPI, "
                    "--devices lists each node's GPUs, one entry per rank of the node "
                    "(0,0 puts two ranks on GPU 0); start fewer ranks per node or list "
                    "more GPUs",
                    self.host, self.local_size, listed ? "--devices lists" : "has", node.nranks()));
  }
  const Gpu& g = node.gpu[static_cast<size_t>(self.local_rank)];
  return {{"index", g.index},
          {"cuda_ordinal", g.cuda_ordinal},
          {"bus_id", g.bdf},
          {"name", g.name},
          {"sm", g.sm},
          {"numa_node", g.numa_node},
          {"cpus", g.cpu_affinity}};
}

RankPlacement placement_from_answers(Topology topology, const std::vector<nlohmann::json>& answers,
                                     const std::vector<std::string>& hosts) {
  RankPlacement p;
  for (size_t r = 0; r < answers.size(); ++r) {
    const nlohmann::json& a = answers[r];
    Gpu g;
    try {
      g.index = a.at("index").get<int>();
      g.cuda_ordinal = a.value("cuda_ordinal", -1);
      g.bdf = a.at("bus_id").get<std::string>();
      g.name = a.value("name", "");
      g.sm = a.value("sm", 0);
      g.numa_node = a.value("numa_node", kUnknownNuma);
      g.cpu_affinity = a.value("cpus", "");
    } catch (const nlohmann::json::exception& e) {
      throw Error(ExitCode::kEnvironment,
                  fmt::format("rank {} on {} described its GPU in a way this commtool does not "
                              "read ({}): is every rank running the same commtool?",
                              r, r < hosts.size() ? hosts[r] : "an unknown host", e.what()));
    }
    p.gpu.push_back(std::move(g));
  }
  p.hosts = hosts;
  p.topology = std::move(topology);
  return p;
}

}  // namespace commtool::topo
