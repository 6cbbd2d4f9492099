// topo under a real MPI launcher: mpirun starts four commtool processes on this machine, each
// reading its own NCCL topology file through --nccl-xml rank%r.xml (tests/fixtures/cluster/:
// ranks 0-2 a DGX H100, rank 3 the same without NIC mlx5_1 and with GPU 0000:29:00.0 at x8).
// Built and registered only where CMake found MPI; CI installs Open MPI (scripts/setup.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "mpi_launch.hpp"

namespace {

const std::string kFixtures = COMMTOOL_FIXTURES_DIR;

// mpirun with N ranks of commtool; `timeout` so that a hang fails the test rather than CI.
cli_test::CliResult mpirun(int ranks, const std::string& args, bool with_stderr = true) {
  const std::string cmd = "timeout 90 " + mpi_test::launch(ranks) + " " + COMMTOOL_BINARY + " " +
                          args + (with_stderr ? " 2>&1" : "");
  return cli_test::run_shell(cmd);
}

std::string hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

using cli_test::contains;

const std::string kEachRanksFile = "--nccl-xml " + kFixtures + "/cluster/rank%r.xml";

}  // namespace

TEST(MpiTopo, RankZeroAloneNamesTheOddNodeAndItsDifferences) {
  auto r = mpirun(4, "topo " + kEachRanksFile);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count(r.out, "commtool topo: cluster of 4 nodes, 4 MPI ranks on 1 host"), 1u) << r.out;
  EXPECT_TRUE(contains(r.out, "Verdict: 1 of 4 nodes differs from the common configuration"))
      << r.out;
  const size_t odd = r.out.find(hostname() + "/3 (rank 3, nccl-xml:");
  ASSERT_NE(odd, std::string::npos) << r.out;
  EXPECT_TRUE(contains(r.out, "[nic-missing] NIC mlx5_1 (0000:26:00.0)")) << r.out;
  EXPECT_TRUE(contains(r.out, "[pcie-max-width-below-common] GPU 0000:29:00.0")) << r.out;
  EXPECT_TRUE(contains(r.out, "x8 at best; common configuration: unknown now, Gen5 x16 at best"))
      << r.out;
  EXPECT_TRUE(contains(r.out,
                       "[nic-sharing-differs] GPUs 0000:1b:00.0, 0000:29:00.0 share NIC "
                       "mlx5_0 (0000:18:00.0), 2 to one"))
      << r.out;
  // The cluster view first, then the common topology once: one rank's report, not four.
  const size_t topology = r.out.find("Common topology, as rank 0 read it on " + hostname() + "/0");
  ASSERT_NE(topology, std::string::npos) << r.out;
  EXPECT_LT(odd, topology);
  EXPECT_EQ(count(r.out, "commtool topo: 8 GPU(s), 8 NIC(s)"), 1u) << r.out;
}

TEST(MpiTopo, JsonCarriesAllFourNodesAndTheComparison) {
  auto r = mpirun(4, "--json topo " + kEachRanksFile, /*with_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto doc = nlohmann::json::parse(r.out);  // one document: no rank but 0 printed
  EXPECT_EQ(doc["kind"], "cluster");
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["ranks"], 4);
  ASSERT_EQ(doc["nodes"].size(), 4u);
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(doc["nodes"][n]["ranks"], nlohmann::json{n});
    EXPECT_EQ(doc["nodes"][n]["topology"]["gpus"].size(), 8u);
    EXPECT_EQ(doc["nodes"][n]["topology"]["nics"].size(), n == 3 ? 7u : 8u);
  }
  EXPECT_EQ(doc["differing_nodes"], nlohmann::json{hostname() + "/3"});
  std::vector<std::string> codes;
  for (const auto& d : doc["configurations"][1]["differences"])
    codes.push_back(d["code"]);
  EXPECT_NE(std::find(codes.begin(), codes.end(), "nic-missing"), codes.end());
  EXPECT_NE(std::find(codes.begin(), codes.end(), "pcie-max-width-below-common"), codes.end());
}

TEST(MpiTopo, ARankThatCannotReadItsNodeIsNamedByRankZeroOnce) {
  // rank4.xml does not exist: rank 4 fails, the others wait for nobody.
  auto r = mpirun(5, "topo " + kEachRanksFile);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(count(r.out, "commtool: rank 4 on " + hostname() + ": "), 1u) << r.out;
  EXPECT_TRUE(contains(r.out, "rank4.xml")) << r.out;
  EXPECT_FALSE(contains(r.out, "cluster of")) << r.out;
}

TEST(MpiTopo, ACommandThatDoesNotRunUnderMpiIsRefusedOnceWithoutInitialisingMpi) {
  auto r = mpirun(4, "report /nonexistent");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(count(r.out,
                  "report does not run under MPI, only topo, probe, trace, diagnose and doctor do"),
            1u)
      << r.out;
}

// probe: the lowest rank of each host measures, the others wait. All ranks here share one host,
// so one rank measures; without a GPU (CI) it fails and rank 0 says so once, with a GPU (the GPU
// machine) rank 0 prints the one node's figures once.
TEST(MpiTopo, ProbeMeasuresEachHostFromOneRank) {
  auto r = mpirun(3, "-v probe --h2d --size 64MiB --batches 2");
  EXPECT_EQ(count(r.out, ", measuring this node"), 1u) << r.out;
  EXPECT_EQ(count(r.out, ", waiting"), 2u) << r.out;
  EXPECT_TRUE(contains(r.out, "probe: rank 0 of 3 on " + hostname() + ", measuring this node"))
      << r.out;
  if (r.code == 0) {
    EXPECT_EQ(count(r.out, "commtool probe across 1 node(s), 3 MPI rank(s)"), 1u) << r.out;
  } else {
    EXPECT_EQ(r.code, 3) << r.out;
    EXPECT_EQ(count(r.out, "commtool: rank 0 on " + hostname() + ": no NVIDIA GPU found"), 1u)
        << r.out;
    EXPECT_FALSE(contains(r.out, "commtool probe across")) << r.out;
  }
}

TEST(MpiTopo, AMalformedCommandLineIsSaidOnceByRankZero) {
  auto r = mpirun(3, "trace allreduce --iters 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(count(r.out, "--iters 0: out of range"), 1u) << r.out;
}

// diagnose ep --dry-run measures nothing, so it runs here: rank 0 prints the plan once and the
// other ranks, which served it, end with it (no GPU is needed to learn the job's hosts).
TEST(MpiTopo, AMeasuringCommandRunsAtRankZeroAndTheOtherRanksEndWithIt) {
  auto r = mpirun(3, "diagnose ep --dry-run --experts 6 --topk 2 --tokens 64");
  ASSERT_EQ(r.code, 0) << r.out;
  // A dry run plans for the job's ranks.
  EXPECT_EQ(count(r.out, "commtool diagnose ep: 3 rank(s), 64 tokens per rank"), 1u) << r.out;
}

// doctor: the lowest rank of each host examines it, the others wait; rank 0 prints one page for
// the job. All ranks here share one host: one node. Without a GPU (CI) the page says so and
// the job ends with 3; with one (the GPU machine) with the node's verdict.
TEST(MpiTopo, DoctorExaminesEachHostFromOneRankAndRankZeroPrintsOnePage) {
  auto r = mpirun(3, "-v doctor --kernel-log " + kFixtures + "/kernel_log/public_xid_lines.txt");
  EXPECT_EQ(count(r.out, ", examining this node"), 1u) << r.out;
  EXPECT_EQ(count(r.out, ", waiting"), 2u) << r.out;
  EXPECT_TRUE(contains(r.out, "doctor: rank 0 of 3 on " + hostname() + ", examining this node"))
      << r.out;
  EXPECT_EQ(count(r.out, "commtool doctor across 1 node(s), 3 MPI rank(s), level quick: FAIL"), 1u)
      << r.out;
  EXPECT_TRUE(contains(r.out, "FAIL  1 node(s): " + hostname() + " (rank 0)")) << r.out;
  if (r.code == 3) {
    EXPECT_TRUE(contains(r.out, "FAIL  node  GPUs: no NVIDIA GPU")) << r.out;
  } else {
    EXPECT_EQ(r.code, 7) << r.out;  // the fixture's Xids of GPUs this machine does not have
  }

  auto j = mpirun(3, "--json doctor --kernel-log " + kFixtures + "/kernel_log/public_xid_lines.txt",
                  /*with_stderr=*/false);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["cluster"], true);
  EXPECT_EQ(doc["ranks"], 3);
  ASSERT_EQ(doc["nodes"].size(), 1u);
  EXPECT_EQ(doc["nodes"][0]["node_ranks"], 3);
  EXPECT_EQ(doc["exit_code"], j.code);
}

// Under MPI each node reads doctor's files itself: one a node cannot read is that node's failure
// on the page (here the one node's, so the job's exit is its 2), never a rank left out of MPI.
TEST(MpiTopo, ADoctorThresholdsFileANodeCannotReadIsThatNodesFailureOnThePage) {
  auto r = mpirun(3, "doctor --thresholds /nonexistent/site.conf");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(count(r.out, "/nonexistent/site.conf"), 1u) << r.out;
  EXPECT_TRUE(contains(r.out, "FAIL  1 node(s): " + hostname() +
                                  " (rank 0)\n  doctor could not "
                                  "examine it: "))
      << r.out;
}
