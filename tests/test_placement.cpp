// Where the ranks of a worker group run: the summary every report labels, the ranks placed on a
// topology as the user listed them, and the environment that lets NCCL put ranks on one GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/workers/placement.hpp"
#include "probes/topo/rank_placement.hpp"

using namespace commtool;
using namespace commtool::workers;
using commtool::topo::place_ranks;
using commtool::topo::RankPlacement;

namespace {

// Three GPUs, 0..2, in PCI bus order.
topo::Topology three_gpus() {
  topo::Topology t;
  for (int i = 0; i < 3; ++i) {
    topo::Gpu g;
    g.index = i;
    g.bdf = "0000:0" + std::to_string(i + 1) + ":00.0";
    t.gpus.push_back(g);
  }
  return t;
}

PlacementSummary four_ranks_on_one_gpu() {
  return {4, 1, 4};
}

PlacementSummary one_rank_per_gpu() {
  return {2, 2, 1};
}

bool has_entry(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

bool sets(const std::vector<std::string>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& e) { return e.starts_with(name + "="); });
}

std::string value_of(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env) {
    if (e.starts_with(name + "=")) return e.substr(name.size() + 1);
  }
  return "";
}

}  // namespace

TEST(Placement, SummaryByBusIdCountsRanksDistinctGpusAndTheMostOnOne) {
  const PlacementSummary p =
      summarize_placement(std::vector<std::string>{"0000:01:00.0", "0000:02:00.0", "0000:01:00.0"});
  EXPECT_EQ(p.ranks, 3);
  EXPECT_EQ(p.gpus, 2);
  EXPECT_EQ(p.most_ranks_on_a_gpu, 2);
}

TEST(Placement, SummaryByIndexCountsRanksDistinctGpusAndTheMostOnOne) {
  const PlacementSummary p = summarize_placement(std::vector<int>{0, 0, 0, 1});
  EXPECT_EQ(p.ranks, 4);
  EXPECT_EQ(p.gpus, 2);
  EXPECT_EQ(p.most_ranks_on_a_gpu, 3);
}

TEST(Placement, TwoRanksOnOneGpuIsShared) {
  EXPECT_TRUE(summarize_placement(std::vector<int>{1, 1}).shared_gpu());
}

TEST(Placement, OneRankPerGpuIsNotShared) {
  EXPECT_FALSE(summarize_placement(std::vector<int>{0, 1, 2}).shared_gpu());
}

TEST(Placement, JsonCarriesRanksGpusSharedAndTheMostOnOneGpu) {
  EXPECT_EQ(to_json(four_ranks_on_one_gpu()),
            nlohmann::json::parse(
                R"({"ranks": 4, "gpus": 1, "shared_gpu": true, "most_ranks_on_a_gpu": 4})"));
}

TEST(Placement, JsonSaysNotSharedWhenEveryRankHasItsOwnGpu) {
  EXPECT_EQ(to_json(one_rank_per_gpu()).at("shared_gpu"), false);
}

TEST(Placement, NoSharedGpuLabelWhenEveryRankHasItsOwnGpu) {
  EXPECT_EQ(shared_gpu_label(one_rank_per_gpu()), "");
}

TEST(Placement, NothingWithheldWhenEveryRankHasItsOwnGpu) {
  EXPECT_EQ(shared_gpu_withheld(one_rank_per_gpu()), "");
}

TEST(Placement, SharedGpuLabelNamesRanksGpusAndTheMostOnOne) {
  EXPECT_TRUE(
      shared_gpu_label({5, 2, 3}).starts_with("SHARED GPU: 5 ranks on 2 GPU(s), up to 3 on one."));
}

TEST(Placement, SharedGpuWithheldNamesRanksAndGpus) {
  EXPECT_TRUE(
      shared_gpu_withheld(four_ranks_on_one_gpu()).starts_with("withheld: 4 ranks share 1 GPU(s)"));
}

TEST(PlaceRanks, EmptyListPutsOneRankOnEveryGpu) {
  const RankPlacement p = place_ranks(three_gpus(), {});
  EXPECT_EQ(p.devices(), (std::vector<int>{0, 1, 2}));
}

TEST(PlaceRanks, RepeatedIndexesKeepEveryRankInTheOrderGiven) {
  const RankPlacement p = place_ranks(three_gpus(), {0, 0, 1});
  ASSERT_EQ(p.nranks(), 3);
  EXPECT_EQ(p.gpu[0].index, 0);
  EXPECT_EQ(p.gpu[1].index, 0);
  EXPECT_EQ(p.gpu[2].index, 1);
  EXPECT_EQ(p.gpu[2].bdf, "0000:02:00.0");
}

TEST(PlaceRanks, TopologyKeepsEachListedGpuOnceAndNoOther) {
  const RankPlacement p = place_ranks(three_gpus(), {2, 0, 2});
  ASSERT_EQ(p.topology.gpus.size(), 2u);
  EXPECT_EQ(p.topology.gpus[0].index, 0);
  EXPECT_EQ(p.topology.gpus[1].index, 2);
}

TEST(PlaceRanks, SpecsNumberRanksFromZeroEachOnItsGpu) {
  const std::vector<WorkerSpec> specs = place_ranks(three_gpus(), {2, 0, 2}).specs();
  ASSERT_EQ(specs.size(), 3u);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(specs[static_cast<size_t>(r)].rank, r);
  EXPECT_EQ(specs[0].device, 2);
  EXPECT_EQ(specs[1].device, 0);
  EXPECT_EQ(specs[2].device, 2);
}

TEST(PlaceRanks, SummaryOfRanksSharingAGpuIsShared) {
  const PlacementSummary s = place_ranks(three_gpus(), {1, 1, 1}).summary();
  EXPECT_EQ(s.ranks, 3);
  EXPECT_EQ(s.gpus, 1);
  EXPECT_TRUE(s.shared_gpu());
}

TEST(PlaceRanks, IndexTheTopologyLacksIsAUsageError) {
  try {
    place_ranks(three_gpus(), {0, 3});
    FAIL() << "GPU 3 does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
  }
}

// Under MPI each rank names its GPU; the same bus id on two hosts is two GPUs.
nlohmann::json answer(int index, const std::string& bus) {
  return {{"index", index}, {"bus_id", bus}, {"name", "NVIDIA H200"}, {"sm", 90}};
}

TEST(ClusterPlacement, TheSameGpuOnTwoHostsIsTwoGpus) {
  const RankPlacement p = topo::placement_from_answers(
      three_gpus(), {answer(0, "0000:01:00.0"), answer(0, "0000:01:00.0")}, {"node-a", "node-b"});
  EXPECT_EQ(p.nranks(), 2);
  EXPECT_EQ(p.devices(), (std::vector<int>{0, 0}));
  EXPECT_EQ(p.gpu[1].name, "NVIDIA H200");
  EXPECT_FALSE(p.summary().shared_gpu());
  EXPECT_EQ(p.summary().gpus, 2);
}

TEST(ClusterPlacement, RanksOfOneHostOnOneGpuShareIt) {
  const RankPlacement p = topo::placement_from_answers(
      three_gpus(), {answer(0, "0000:01:00.0"), answer(0, "0000:01:00.0")}, {"node-a", "node-a"});
  EXPECT_TRUE(p.summary().shared_gpu());
}

TEST(ClusterPlacement, AnAnswerWithoutItsGpuNamesTheRankAndItsHost) {
  try {
    topo::placement_from_answers(three_gpus(), {answer(0, "0000:01:00.0"), {{"index", 1}}},
                                 {"node-a", "node-b"});
    FAIL() << "rank 1 gave no bus id";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 on node-b"), std::string::npos) << e.what();
  }
}

TEST(ClusterPlacement, EachRankTakesItsNodesEntryAtItsLocalRank) {
  ClusterRank self;
  self.host = "node-b";
  self.local_rank = 1;
  self.local_size = 3;
  const nlohmann::json a = topo::placement_answer(place_ranks(three_gpus(), {2, 0, 0}), self, true);
  EXPECT_EQ(a["index"], 0);
  EXPECT_EQ(a["bus_id"], "0000:01:00.0");
}

TEST(ClusterPlacement, ANodeWithMoreRanksThanListedGpusIsNamed) {
  ClusterRank self;
  self.host = "node-b";
  self.local_rank = 2;
  self.local_size = 3;
  try {
    topo::placement_answer(place_ranks(three_gpus(), {0, 0}), self, true);
    FAIL() << "two entries for three ranks";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(
        std::string(e.what()).find("node-b runs 3 ranks of this MPI job but --devices lists 2"),
        std::string::npos)
        << e.what();
  }
}

TEST(SharedGpuEnvironment, EachRankGetsItsOwnHostIdNamingTheRun) {
  const std::string id0 = value_of(shared_gpu_environment(0, "run42", {}), "NCCL_HOSTID");
  const std::string id1 = value_of(shared_gpu_environment(1, "run42", {}), "NCCL_HOSTID");
  EXPECT_NE(id0, id1);
  EXPECT_NE(id0.find("run42"), std::string::npos) << id0;
  EXPECT_NE(id1.find("run42"), std::string::npos) << id1;
}

TEST(SharedGpuEnvironment, NcclTalksOverLoopbackSocketsWithoutInfiniBand) {
  const std::vector<std::string> env = shared_gpu_environment(0, "r", {});
  EXPECT_TRUE(has_entry(env, "NCCL_SOCKET_IFNAME=lo"));
  EXPECT_TRUE(has_entry(env, "NCCL_IB_DISABLE=1"));
}

TEST(SharedGpuEnvironment, VariableTheUserSetIsLeftOut) {
  const std::vector<std::string> env =
      shared_gpu_environment(0, "r", {"PATH=/bin", "NCCL_SOCKET_IFNAME=eth0"});
  EXPECT_FALSE(sets(env, "NCCL_SOCKET_IFNAME"));
  EXPECT_TRUE(sets(env, "NCCL_HOSTID"));
  EXPECT_TRUE(sets(env, "NCCL_IB_DISABLE"));
}
