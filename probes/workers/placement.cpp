#include "probes/workers/placement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "probes/error.hpp"
#include "probes/topo/discover.hpp"

namespace commtool::workers {

namespace {

template <typename Key>
PlacementSummary summarize(const std::vector<Key>& gpu_of_rank) {
  std::map<Key, int> ranks_on;
  for (const Key& k : gpu_of_rank)
    ++ranks_on[k];
  PlacementSummary p;
  p.ranks = static_cast<int>(gpu_of_rank.size());
  p.gpus = static_cast<int>(ranks_on.size());
  for (const auto& [gpu, n] : ranks_on)
    p.most_ranks_on_a_gpu = std::max(p.most_ranks_on_a_gpu, n);
  return p;
}

}  // namespace

PlacementSummary summarize_placement(const std::vector<std::string>& bus_id_of_rank) {
  return summarize(bus_id_of_rank);
}

PlacementSummary summarize_placement(const std::vector<int>& device_of_rank) {
  return summarize(device_of_rank);
}

nlohmann::json to_json(const PlacementSummary& p) {
  return {{"ranks", p.ranks},
          {"gpus", p.gpus},
          {"shared_gpu", p.shared_gpu()},
          {"most_ranks_on_a_gpu", p.most_ranks_on_a_gpu}};
}

std::string shared_gpu_label(const PlacementSummary& p) {
  if (!p.shared_gpu()) return "";
  return fmt::format(
      "SHARED GPU: {} ranks on {} GPU(s), up to {} on one. A correctness run: its times are of "
      "processes time-slicing one GPU (NCCL between them goes through its socket transport "
      "over loopback), not of any link, and no verdict is drawn from them.",
      p.ranks, p.gpus, p.most_ranks_on_a_gpu);
}

std::string shared_gpu_withheld(const PlacementSummary& p) {
  if (!p.shared_gpu()) return "";
  return fmt::format(
      "withheld: {} ranks share {} GPU(s), so the times are of time-sliced processes over a "
      "socket and no difference between them says anything about this machine's links",
      p.ranks, p.gpus);
}

PlacementSummary Placement::summary() const {
  return summarize_placement(devices());
}

std::vector<WorkerSpec> Placement::specs() const {
  std::vector<WorkerSpec> out;
  for (int r = 0; r < nranks(); ++r)
    out.push_back({r, gpu[static_cast<size_t>(r)].index});
  return out;
}

std::vector<int> Placement::devices() const {
  std::vector<int> out;
  for (const topo::Gpu& g : gpu)
    out.push_back(g.index);
  return out;
}

Placement place_ranks(topo::Topology topology, const std::vector<int>& rank_devices) {
  if (!rank_devices.empty()) topo::select_gpus(topology, rank_devices);
  Placement p;
  if (rank_devices.empty()) {
    p.gpu = topology.gpus;
  } else {
    for (int d : rank_devices) {
      auto it = std::find_if(topology.gpus.begin(), topology.gpus.end(),
                             [&](const topo::Gpu& g) { return g.index == d; });
      p.gpu.push_back(*it);  // select_gpus refused an index the machine lacks
    }
  }
  p.topology = std::move(topology);
  return p;
}

Placement place_ranks(const std::vector<int>& rank_devices, const std::string& command) {
  // select_gpus keeps each listed GPU once however often it is listed.
  return place_ranks(topo::discover_for_launcher(rank_devices, command), rank_devices);
}

std::vector<std::string> shared_gpu_environment(int rank, const std::string& run_id,
                                                const std::vector<std::string>& user_env) {
  auto user_sets = [&](const std::string& name) {
    return std::any_of(user_env.begin(), user_env.end(),
                       [&](const std::string& e) { return e.starts_with(name + "="); });
  };
  std::vector<std::string> out;
  auto add = [&](const std::string& name, const std::string& value) {
    if (!user_sets(name)) out.push_back(name + "=" + value);
  };
  // NCCL hashes NCCL_HOSTID instead of the host name and boot id when it is set: a different
  // value per rank makes each rank a host of its own.
  add("NCCL_HOSTID", fmt::format("commtool-{}-rank{}", run_id, rank));
  // Between "hosts" NCCL uses a network: its socket transport, over loopback.
  add("NCCL_SOCKET_IFNAME", "lo");
  add("NCCL_IB_DISABLE", "1");
  return out;
}

}  // namespace commtool::workers
