// probe under MPI, the pure half: who measures, the node payload, and the nodes side by side.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "next_step_checks.hpp"
#include "probes/bandwidth/probe_cluster.hpp"
#include "probes/base/cluster/per_host.hpp"
#include "probes/base/error.hpp"
#include "reports/probe/probe_report.hpp"

using namespace commtool;
using namespace commtool::probe;

namespace {

Measurement h2d(int gpu, double gbps) {
  Measurement m = make_measurement("h2d", "H2D", Engine::kCopyEngine, kHost, gpu, false,
                                   512ull << 20, 8, "GB/s", {gbps, gbps + 0.1, gbps - 0.1});
  m.expected = 57.2;
  m.expected_basis = "PCIe Gen5 x16 payload";
  return m;
}

Measurement round_trip(int gpu, double us) {
  return make_measurement("latency", "round trip", Engine::kSm, kHost, gpu, false, 8, 1, "us",
                          {us, us, us});
}

// A node of two GPUs: H2D at `gbps` on each, a host round trip of `us`.
NodeProbe node(const std::string& host, int rank, double gbps = 55.5, double us = 1.2) {
  NodeProbe n;
  n.host = host;
  n.rank = rank;
  n.gpus = 2;
  n.measurements = {h2d(0, gbps), h2d(1, gbps), round_trip(0, us)};
  return n;
}

NodeProbe failed(const std::string& host, int rank) {
  NodeProbe n;
  n.host = host;
  n.rank = rank;
  n.ok = false;
  n.exit_code = 5;
  n.error = "probe h2d on GPU 0: timed out after 60 s";
  return n;
}

}  // namespace

TEST(ProbeCluster, TheLowestRankOfEachHostMeasures) {
  using cluster::lowest_rank_per_host;
  EXPECT_EQ(lowest_rank_per_host({"a", "a", "b", "b", "a", "c"}), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(lowest_rank_per_host({"a"}), (std::vector<int>{0}));
  cluster::PerHostResult r;
  r.hosts = {"a", "a", "b", "b", "a", "c"};
  r.workers = {0, 2, 5};
  EXPECT_EQ(cluster::ranks_on_worker_hosts(r), (std::vector<int>{3, 2, 1}));
}

TEST(ProbeCluster, NodePayloadRoundTrips) {
  NodeProbe n = node("node-b", 4, 41.0);
  n.skipped.push_back({"p2p", "only one GPU: no pair to measure", true});
  const NodeProbe back = decode_node_probe(encode_node_probe(n), 4);
  EXPECT_EQ(back.host, "node-b");
  EXPECT_EQ(back.gpus, 2);
  ASSERT_EQ(back.measurements.size(), 3u);
  EXPECT_DOUBLE_EQ(back.measurements[0].summary.median, 41.0);
  EXPECT_DOUBLE_EQ(back.measurements[0].expected, 57.2);
  ASSERT_EQ(back.skipped.size(), 1u);
  EXPECT_TRUE(back.skipped[0].asked);

  const NodeProbe f = decode_node_probe(encode_node_probe(failed("node-c", 2)), 2);
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.exit_code, 5);
}

TEST(ProbeCluster, PayloadErrorsNameTheRankAndTheField) {
  auto message = [](std::string_view bytes, int rank) {
    try {
      decode_node_probe(bytes, rank);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("not json", 3).find("rank 3 sent a probe"), std::string::npos);
  // Another rank's payload, or one from another build.
  EXPECT_NE(message(encode_node_probe(node("a", 1)), 2).find("rank: 1 is not the sender's"),
            std::string::npos);
  nlohmann::json j = nlohmann::json::parse(encode_node_probe(node("a", 1)));
  j["version"] = 99;
  EXPECT_NE(message(j.dump(), 1).find("same commtool"), std::string::npos);
  j = nlohmann::json::parse(encode_node_probe(node("a", 1)));
  j["measurements"][0].erase("samples");
  EXPECT_NE(message(j.dump(), 1).find("measurements:"), std::string::npos);
  j = nlohmann::json::parse(encode_node_probe(node("a", 1)));
  j["exit_code"] = 4;  // ok with a failure's code
  EXPECT_NE(message(j.dump(), 1).find("exit_code"), std::string::npos);
}

TEST(ProbeCluster, TheSlowNodeStandsApart) {
  ProbeClusterView v =
      compare_nodes({node("a", 0), node("b", 2), node("c", 4, 27.0), node("d", 6)}, 8);
  EXPECT_TRUE(v.compared);
  ASSERT_EQ(v.figures.size(), 3u);
  EXPECT_EQ(v.figures[0].nodes, 4);
  EXPECT_DOUBLE_EQ(v.figures[0].median, 55.5);
  EXPECT_EQ(v.figures[0].lowest_host, "c");
  EXPECT_DOUBLE_EQ(v.figures[0].lowest, 27.0);
  ASSERT_EQ(v.outliers.size(), 2u);  // both of c's GPUs
  EXPECT_EQ(v.outliers[0].host, "c");
  EXPECT_NEAR(v.outliers[0].ratio, 27.0 / 55.5, 1e-9);
  EXPECT_TRUE(v.missing.empty());
}

TEST(ProbeCluster, WithinTheBoundsNoNodeStandsApart) {
  // 10% under the median is the edge: 50.0 of 55.5 is 0.901.
  ProbeClusterView v = compare_nodes(
      {node("a", 0), node("b", 1, 50.0, 1.49), node("c", 2, 55.6, 1.1), node("d", 3)}, 4);
  EXPECT_TRUE(v.outliers.empty());
  // Latency is judged upwards: 1.25x the median is the edge.
  v = compare_nodes({node("a", 0), node("b", 1, 55.5, 1.6), node("c", 2)}, 3);
  ASSERT_EQ(v.outliers.size(), 1u);
  EXPECT_EQ(v.outliers[0].measurement.unit, "us");
  EXPECT_EQ(v.outliers[0].host, "b");
}

TEST(ProbeCluster, TwoNodesAreShownButNotJudgedAgainstEachOther) {
  ProbeClusterView v = compare_nodes({node("a", 0), node("b", 1, 20.0)}, 2);
  EXPECT_FALSE(v.compared);
  EXPECT_TRUE(v.outliers.empty());
  EXPECT_EQ(v.figures[0].nodes, 2);
}

TEST(ProbeCluster, ANodeWithoutAGpuTheOthersHaveIsMissingFigures) {
  NodeProbe d = node("d", 3);
  d.gpus = 1;
  d.measurements.erase(d.measurements.begin() + 1);  // no GPU1
  ProbeClusterView v = compare_nodes({node("a", 0), node("b", 1), node("c", 2), d}, 4);
  ASSERT_EQ(v.missing.size(), 1u);
  EXPECT_EQ(v.missing[0].host, "d");
  EXPECT_EQ(v.missing[0].count, 1);
  EXPECT_EQ(v.missing[0].example.dst, 1);
  // A figure only one node has is not missing from the others.
  NodeProbe extra = node("e", 4);
  extra.measurements.push_back(h2d(7, 55.0));
  v = compare_nodes({node("a", 0), node("b", 1), node("c", 2), extra}, 5);
  EXPECT_TRUE(v.missing.empty());
}

TEST(ProbeCluster, FailedNodesCountForNothingButAreKept) {
  ProbeClusterView v = compare_nodes({node("a", 0), failed("b", 1), node("c", 2)}, 3);
  EXPECT_FALSE(v.compared);  // two measured
  EXPECT_EQ(v.nodes.size(), 3u);
  EXPECT_EQ(v.figures[0].nodes, 2);
}

TEST(ProbeClusterReport, TextNamesTheOddNodeFirstAndEveryFigureOnce) {
  NodeProbe d = node("d", 6);
  d.measurements.pop_back();  // no round trip
  ProbeClusterView v =
      compare_nodes({node("a", 0), node("b", 2), node("c", 4, 27.0), d, failed("e", 8)}, 10);
  const std::string text = reports::render_probe_cluster_text(v, ProbeRequest{});
  EXPECT_NE(text.find("across 5 node(s), 10 MPI rank(s)"), std::string::npos) << text;
  const size_t differ = text.find("Nodes that differ");
  const size_t odd = text.find(
      "c (rank 4): h2d H2D host -> GPU0 CE (GB/s): 27.0 against the "
      "nodes' median of 55.5 (0.49x)");
  const size_t every = text.find("Every figure across the nodes");
  ASSERT_NE(differ, std::string::npos) << text;
  ASSERT_NE(odd, std::string::npos) << text;
  ASSERT_NE(every, std::string::npos) << text;
  EXPECT_LT(differ, odd);
  EXPECT_LT(odd, every);
  EXPECT_NE(text.find("d (rank 6): 1 figure(s) most nodes gave are missing, such as latency "
                      "round trip host -> GPU0 SM (us)"),
            std::string::npos)
      << text;
  // c's H2D is also under 75% of its link's rate.
  EXPECT_NE(text.find("c (rank 4): LOW h2d H2D host -> GPU0"), std::string::npos) << text;
  EXPECT_NE(text.find("e (rank 8): exit 5: probe h2d on GPU 0: timed out"), std::string::npos)
      << text;
  EXPECT_NE(text.find("2 GPU(s) on each of the 4 node(s) that measured"), std::string::npos)
      << text;
  // O(nodes): a node that does not differ has no line of its own.
  EXPECT_EQ(text.find("a (rank 0)"), std::string::npos) << text;
}

TEST(ProbeClusterReport, JsonCarriesEveryNodeAndTheComparison) {
  ProbeClusterView v =
      compare_nodes({node("a", 0), node("b", 2), node("c", 4, 27.0), failed("e", 8)}, 9);
  const nlohmann::json j = reports::probe_cluster_to_json(v, ProbeRequest{});
  EXPECT_EQ(j["mpi"]["nodes"], 4);
  EXPECT_EQ(j["mpi"]["ranks"], 9);
  ASSERT_EQ(j["nodes"].size(), 4u);
  EXPECT_EQ(j["nodes"][2]["measurements"].size(), 3u);
  EXPECT_EQ(j["nodes"][3]["exit_code"], 5);
  EXPECT_TRUE(j["compared"]);
  ASSERT_EQ(j["differ"].size(), 2u);
  EXPECT_EQ(j["differ"][0]["host"], "c");
  EXPECT_EQ(j["across_nodes"][0]["lowest"]["host"], "c");
  EXPECT_EQ(j["across_nodes"][0]["nodes"], 3);
  const std::string csv = reports::render_probe_cluster_csv(v);
  EXPECT_EQ(csv.rfind("host,rank,probe,what,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nc,4,h2d,H2D,CE,host,GPU0,"), std::string::npos) << csv;
}

// A node that stands apart, lacks figures or has a LOW one: each line says what to do next on it.
TEST(ProbeClusterReport, EveryNodeThatDiffersEndsWithWhatToDoNext) {
  NodeProbe d = node("d", 6);
  d.measurements.pop_back();  // no round trip
  ProbeClusterView v = compare_nodes(
      {node("a", 0), node("b", 2), node("c", 4, 27.0), d, node("f", 10, 55.5, 3.0)}, 12);
  const std::string text = reports::render_probe_cluster_text(v, ProbeRequest{});
  const nlohmann::json doc = reports::probe_cluster_to_json(v, ProbeRequest{});
  ASSERT_EQ(doc["differ"].size(), 3u);  // c's two GPUs, f's round trip
  for (const nlohmann::json& o : doc["differ"]) {
    const std::string advice = o.at("advice");
    next_step::expect_next_step(advice, o.dump());
    EXPECT_NE(text.find("\n      what to do: " + advice + "\n"), std::string::npos) << text;
  }
  std::map<std::string, std::string> by_host;  // the first of each host's
  for (const nlohmann::json& o : doc["differ"])
    by_host.emplace(o.at("host"), o.at("advice"));
  EXPECT_NE(by_host["c"].find("on c, compare GPU0's PCIe link"), std::string::npos) << by_host["c"];
  EXPECT_NE(by_host["f"].find("on f, rerun `commtool probe --latency` there"), std::string::npos)
      << by_host["f"];
  ASSERT_EQ(doc["missing"].size(), 1u);
  const std::string missing = doc["missing"][0].at("advice");
  EXPECT_NE(missing.find("on d, see what it lacks"), std::string::npos) << missing;
  EXPECT_NE(text.find("\n      what to do: " + missing + "\n"), std::string::npos) << text;
  // c's LOW figures, each with the node's own next step.
  EXPECT_NE(text.find("\n      what to do: on c, check GPU0's PCIe link"), std::string::npos)
      << text;
}

// probe's exit policy is one rule on one machine and across nodes: a probe the user named that
// measured nothing anywhere is exit 3, with the reason the first node gave.
TEST(ProbeCluster, AProbeAskedForThatRanNowhereIsExit3OnOneMachineAndAcrossNodes) {
  ProbeReport one;
  one.measurements = {h2d(0, 55)};
  one.skipped = {{"latency", "not asked", false}};
  EXPECT_EQ(asked_but_not_run(one), std::nullopt);
  one.skipped.push_back({"p2p", "only one GPU: no pair to measure", true});
  EXPECT_EQ(asked_but_not_run(one), "--p2p was asked for but only one GPU: no pair to measure");

  std::vector<NodeProbe> nodes{node("a", 0), node("b", 1), node("c", 2)};
  nodes[0].skipped = {{"p2p", "only one GPU: no pair to measure", true}};
  nodes[1].skipped = nodes[0].skipped;
  EXPECT_EQ(asked_but_not_run(compare_nodes(nodes, 3)),
            "--p2p was asked for but ran on no node: only one GPU: no pair to measure");
  // One node measured it: the others' skips are in the report, not the exit status.
  nodes[2].measurements.push_back(make_measurement("p2p", "P2P", Engine::kCopyEngine, 0, 1, false,
                                                   512ull << 20, 8, "GB/s", {300, 301, 299}));
  EXPECT_EQ(asked_but_not_run(compare_nodes(nodes, 3)), std::nullopt);
}
