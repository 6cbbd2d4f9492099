// Worker groups that span an MPI job (probes/base/workers/cluster_group.hpp) under a real
// mpirun: four ranks of the test worker's cluster driver on this machine, each its own commtool
// process with one worker, running the worker-layer test tasks. What crosses MPI here is what
// crosses it between nodes: the barriers, the allgathers, the results, and how a rank failed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli_run.hpp"
#include "mpi_launch.hpp"

namespace {

using cli_test::contains;
using nlohmann::json;

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

struct ClusterRun {
  int code = -1;
  json outcome;     // rank 0's line
  std::string all;  // everything printed, for messages
  double seconds = 0;
};

// mpirun -np 4 test_worker __cluster TASK TIMEOUT [NAME=VALUE]; `timeout 120` so that a hang
// fails the test instead of CI.
ClusterRun run_cluster(const json& task, double timeout_s, const std::string& root_sets = "") {
  const std::string cmd = "timeout 120 " + mpi_test::launch(4) + " " + COMMTOOL_TEST_WORKER +
                          " __cluster '" + task.dump() + "' " + std::to_string(timeout_s) + " " +
                          root_sets + " 2>&1";
  ClusterRun r;
  const auto started = std::chrono::steady_clock::now();
  cli_test::CliResult ran = cli_test::run_shell(cmd);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.code = ran.code;
  r.all = std::move(ran.out);
  for (size_t at = 0; at < r.all.size();) {
    const size_t end = std::min(r.all.find('\n', at), r.all.size());
    if (r.all.compare(at, 11, "{\"failure\":") == 0)
      r.outcome = json::parse(r.all.substr(at, end - at));
    at = end + 1;
  }
  return r;
}

}  // namespace

TEST(MpiGroups, AllgatherAndBarriersCrossMpiAndEveryResultReachesRankZero) {
  const ClusterRun r = run_cluster({{"name", "test-exchange"}}, 10);
  ASSERT_EQ(r.code, 0) << r.all;
  ASSERT_TRUE(r.outcome.is_object()) << r.all;
  EXPECT_TRUE(r.outcome["failure"].is_null()) << r.all;
  ASSERT_EQ(r.outcome["results"].size(), 4u) << r.all;
  for (int rank = 0; rank < 4; ++rank) {
    const json& result = r.outcome["results"][static_cast<size_t>(rank)];
    EXPECT_EQ(result["rank"], rank) << r.all;
    EXPECT_EQ(result["gathered"], json({"rank-0", "rank-1", "rank-2", "rank-3"})) << r.all;
  }
}

TEST(MpiGroups, AWorkerThatDiesIsNamedWithItsHostAndTheGroupEndsWithinTheBound) {
  const ClusterRun r = run_cluster({{"name", "test-die"}, {"victim", 2}}, 5);
  ASSERT_EQ(r.code, 5) << r.all;
  ASSERT_TRUE(r.outcome.is_object()) << r.all;
  EXPECT_EQ(r.outcome["failure"]["rank"], 2) << r.all;
  const std::string what = r.outcome["failure"]["what"];
  EXPECT_TRUE(
      contains(what, "worker for rank 2 (" + hostname() + " GPU 0) died: killed by signal 9"))
      << what;
  EXPECT_LT(r.seconds, 5 + 30) << r.all;  // mpirun's own start and stop included
}

TEST(MpiGroups, AWorkerStuckInABoundedStepIsStoppedAndEveryRankSaysWhereItStood) {
  const ClusterRun r = run_cluster({{"name", "test-busy-hang"}, {"victim", 1}}, 3);
  ASSERT_EQ(r.code, 5) << r.all;
  ASSERT_TRUE(r.outcome.is_object()) << r.all;
  EXPECT_EQ(r.outcome["failure"]["rank"], 1) << r.all;
  const std::string what = r.outcome["failure"]["what"];
  EXPECT_TRUE(contains(what, "rank 1 (" + hostname() + " GPU 0) stayed inside one step")) << what;
  // The board of every rank travelled to rank 0: the account names all four.
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(contains(what, "rank " + std::to_string(rank) + " (" + hostname())) << what;
}

TEST(MpiGroups, AWorkersOwnErrorKeepsItsWordsAndItsExitCode) {
  const ClusterRun r = run_cluster({{"name", "test-error"}, {"victim", 3}}, 10);
  ASSERT_TRUE(r.outcome.is_object()) << r.all;
  EXPECT_EQ(r.outcome["failure"]["rank"], 3) << r.all;
  EXPECT_EQ(r.outcome["failure"]["what"], "rank 3: wrong data") << r.all;
  EXPECT_EQ(r.outcome["failure"]["code"], 4) << r.all;
  EXPECT_EQ(r.code, 4) << r.all;
}

TEST(MpiGroups, RanksThatEnqueueDifferentOperationsAreNamedAsTheCause) {
  const ClusterRun r = run_cluster({{"name", "test-diverge"}, {"victim", 2}}, 2);
  ASSERT_EQ(r.code, 5) << r.all;
  ASSERT_TRUE(r.outcome.is_object()) << r.all;
  const std::string what = r.outcome["failure"]["what"];
  EXPECT_TRUE(contains(what, "the ranks enqueued different operations at #0")) << what;
  EXPECT_TRUE(contains(what, "rank 2 enqueued allreduce float sum of 4 elements")) << what;
}

TEST(MpiGroups, AnIdleWorkerThatNeverArrivesIsNamedAfterTheTimeout) {
  const ClusterRun r = run_cluster({{"name", "test-hang"}, {"victim", 0}}, 2);
  ASSERT_EQ(r.code, 5) << r.all;
  ASSERT_TRUE(r.outcome.is_object()) << r.all;
  EXPECT_EQ(r.outcome["failure"]["rank"], 0) << r.all;
  EXPECT_TRUE(contains(r.outcome["failure"]["what"].get<std::string>(),
                       "rank 0 (" + hostname() + " GPU 0) made no progress for 2.0 s"))
      << r.all;
}

TEST(MpiGroups, RanksSharingAGpuGetHostIdsOfTheirOwnAndRankZerosNcclSettings) {
  const ClusterRun r = run_cluster({{"name", "test-env"}}, 10, "NCCL_ALGO=Tree");
  ASSERT_EQ(r.code, 0) << r.all;
  ASSERT_EQ(r.outcome["results"].size(), 4u) << r.all;
  std::set<std::string> host_ids;
  for (const json& result : r.outcome["results"]) {
    ASSERT_TRUE(result["NCCL_HOSTID"].is_string()) << r.all;
    host_ids.insert(result["NCCL_HOSTID"].get<std::string>());
    EXPECT_EQ(result["NCCL_SOCKET_IFNAME"], "lo") << r.all;
    // Set in rank 0's environment only, as run_allreduce_sweep sets it: every worker has it.
    EXPECT_EQ(result["NCCL_ALGO"], "Tree") << r.all;
  }
  EXPECT_EQ(host_ids.size(), 4u) << r.all;
}
