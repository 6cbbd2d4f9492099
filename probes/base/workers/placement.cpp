#include "probes/base/workers/placement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "probes/base/error.hpp"

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
