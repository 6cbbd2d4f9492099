// topo under MPI, the parts that need no MPI: the per-rank path pattern, the facts each
// rank sends and their wire form, and the cluster view rank 0 makes of them (which nodes are
// one, the common configuration, every difference with its evidence, output that grows with
// the nodes).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "cli/topo_command.hpp"
#include "next_step_checks.hpp"
#include "probes/base/error.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/cluster.hpp"
#include "probes/topo/cluster_wire.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "probes/topo/node_facts.hpp"
#include "reports/topo/cluster_report.hpp"
#include "reports/topo/topo_report.hpp"

using namespace commtool;
using namespace commtool::topo;

namespace {

NodeFacts facts_of(const std::string& fixture) {
  Topology t = read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/" + fixture);
  return node_facts(t, analyze(t), {"13.0", "2.28.3"});
}

// The DGX H100 of tests/fixtures/nccl_xml, and the odd node the MPI test gives rank 3: NIC
// mlx5_1 taken out and GPU 0000:29:00.0's link at x8 (tests/fixtures/cluster/rank3.xml).
NodeFacts dgx() {
  return facts_of("nccl_xml/dgx_h100.xml");
}
NodeFacts odd_dgx() {
  return facts_of("cluster/rank3.xml");
}

const Difference* find(const std::vector<Difference>& ds, const std::string& code) {
  auto it = std::find_if(ds.begin(), ds.end(), [&](const Difference& d) { return d.code == code; });
  return it == ds.end() ? nullptr : &*it;
}

std::vector<std::string> codes(const std::vector<Difference>& ds) {
  std::vector<std::string> out;
  for (const Difference& d : ds)
    out.push_back(d.code);
  return out;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

RankPayload payload(const std::string& host, const NodeFacts& facts,
                    const std::string& source = "sysfs:/sys") {
  RankPayload p;
  p.host = host;
  p.source = source;
  p.facts = facts;
  p.document = "commtool topo: the report of " + host + "\n";
  return p;
}

GpuFacts* gpu(NodeFacts& f, const std::string& bus_id) {
  for (GpuFacts& g : f.gpus) {
    if (g.bus_id == bus_id) return &g;
  }
  return nullptr;
}

}  // namespace

// --- the per-rank path pattern ---

TEST(RankPattern, PercentRIsTheRankAndDoublePercentIsAPercent) {
  EXPECT_EQ(cli::expand_rank_pattern("caps/node%r/sys", 12, "--sysfs-root"), "caps/node12/sys");
  EXPECT_EQ(cli::expand_rank_pattern("a%%r-%r", 3, "--nccl-xml"), "a%r-3");
  EXPECT_EQ(cli::expand_rank_pattern("plain", 3, "--nccl-xml"), "plain");
}

TEST(RankPattern, AnyOtherPercentIsAUsageErrorNamingOptionAndValue) {
  try {
    cli::expand_rank_pattern("topo-%d.xml", 0, "--nccl-xml");
    FAIL() << "accepted %d";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_TRUE(contains(e.what(), "--nccl-xml topo-%d.xml")) << e.what();
    EXPECT_TRUE(contains(e.what(), "%r")) << e.what();
  }
  EXPECT_THROW(cli::expand_rank_pattern("trailing%", 0, "--sysfs-root"), Error);
}

// --- the facts a rank sends ---

TEST(NodeFacts, TakeModelLinkNvlinksAndPairingFromTheTopology) {
  NodeFacts f = dgx();
  ASSERT_EQ(f.gpus.size(), 8u);
  ASSERT_EQ(f.nics.size(), 8u);
  EXPECT_EQ(f.nvswitches, 4);
  const GpuFacts& g = f.gpus[1];
  EXPECT_EQ(g.bus_id, "0000:29:00.0");
  EXPECT_EQ(g.pcie_max_gen, 5);
  EXPECT_EQ(g.pcie_max_width, 16);
  EXPECT_EQ(g.nvlinks_active, 18);
  EXPECT_EQ(g.nic, "0000:26:00.0");  // mlx5_1, the second NIC of its switch
  EXPECT_EQ(g.nic_path, "PIX");
  EXPECT_EQ(f.nccl_version, "2.28.3");
}

TEST(NodeFacts, EqualFactsHaveOneFingerprintAndAnyChangeAnother) {
  NodeFacts a = dgx(), b = dgx();
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  b.gpus[7].numa_node = 0;
  EXPECT_NE(fingerprint(a), fingerprint(b));
  // Where one field ends and the next begins is part of the print: name "a" and kind "bc" are
  // not name "ab" and kind "c".
  NodeFacts c = dgx(), d = dgx();
  c.nics[0].name = "a";
  c.nics[0].kind = "bc";
  d.nics[0].name = "ab";
  d.nics[0].kind = "c";
  EXPECT_NE(fingerprint(c), fingerprint(d));
}

TEST(RankPayloadWire, RoundTripsEveryField) {
  RankPayload p = payload("node-7", odd_dgx(), "nccl-xml:x.xml");
  p.facts.driver_version = "580.159.04";
  const RankPayload back = decode_rank_payload(encode_rank_payload(p), 7);
  EXPECT_TRUE(back.ok);
  EXPECT_EQ(back.host, "node-7");
  EXPECT_EQ(back.source, "nccl-xml:x.xml");
  EXPECT_EQ(back.facts, p.facts);
  EXPECT_EQ(back.document, p.document);
}

TEST(RankPayloadWire, AFailedRankCarriesItsErrorCodeAndHost) {
  RankPayload p;
  p.ok = false;
  p.exit_code = 2;
  p.error = "--sysfs-root /x: not a sysfs tree";
  p.host = "node-3";
  const RankPayload back = decode_rank_payload(encode_rank_payload(p), 3);
  EXPECT_FALSE(back.ok);
  EXPECT_EQ(back.exit_code, 2);
  EXPECT_EQ(back.error, p.error);
  EXPECT_EQ(back.host, "node-3");
}

// Rank 0 reads every rank's payload; the first rank that failed ends the view with its own exit
// code, the others that failed counted after it.
TEST(RankPayloadWire, TheFirstFailedRankIsNamedWithItsCodeAndTheOthersCounted) {
  RankPayload bad;
  bad.ok = false;
  bad.exit_code = 5;
  bad.error = "topo: timed out";
  bad.host = "node-3";
  const std::string good = encode_rank_payload(payload("h", dgx()));
  EXPECT_EQ(decode_rank_payloads({good, good}).size(), 2u);
  try {
    decode_rank_payloads(
        {good, encode_rank_payload(bad), good, encode_rank_payload(bad), encode_rank_payload(bad)});
    ADD_FAILURE() << "no error";
  } catch (const commtool::Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kTimeout);
    EXPECT_EQ(std::string(e.what()),
              "rank 1 on node-3: topo: timed out (and 2 more rank(s) failed: ranks 3-4)");
  }
}

TEST(RankPayloadWire, MalformedPayloadsAreUsageErrorsNamingRankAndField) {
  const std::string good = encode_rank_payload(payload("h", dgx()));
  auto expect_refused = [](const std::string& bytes, const std::string& what) {
    try {
      decode_rank_payload(bytes, 5);
      ADD_FAILURE() << "accepted: " << bytes.substr(0, 120);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      EXPECT_TRUE(contains(e.what(), "rank 5")) << e.what();
      EXPECT_TRUE(contains(e.what(), what)) << e.what();
    }
  };
  expect_refused("not json", "not JSON");
  expect_refused("{}", "format");
  std::string v2 = good;
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  expect_refused(v2, "another commtool build");
  std::string wide = good;
  wide.replace(wide.find("\"pcie_max_width\":16"), 19, "\"pcie_max_width\":99");
  expect_refused(wide, "facts.gpus[0].pcie_max_width");
  std::string no_host = good;
  no_host.replace(no_host.find("\"host\":\"h\""), 10, "\"host\":\"\"");
  expect_refused(no_host, "host");
}

// --- how one node differs from the common configuration ---

TEST(Differences, NoneBetweenEqualNodes) {
  EXPECT_TRUE(differences(dgx(), dgx()).empty());
}

TEST(Differences, TheOddFixtureShowsTheMissingNicAndTheX8Link) {
  const auto ds = differences(dgx(), odd_dgx());
  const Difference* nic = find(ds, "nic-missing");
  ASSERT_NE(nic, nullptr) << testing::PrintToString(codes(ds));
  EXPECT_TRUE(contains(nic->message, "mlx5_1 (0000:26:00.0)")) << nic->message;
  EXPECT_TRUE(contains(nic->evidence, "this node 7, common configuration 8")) << nic->evidence;
  // NCCL's file gives a link's width without a current/max split: it is the most it can train.
  const Difference* link = find(ds, "pcie-max-width-below-common");
  ASSERT_NE(link, nullptr) << testing::PrintToString(codes(ds));
  EXPECT_TRUE(contains(link->message, "0000:29:00.0")) << link->message;
  EXPECT_TRUE(contains(link->evidence, "x8 at best")) << link->evidence;
  EXPECT_TRUE(contains(link->evidence, "x16 at best")) << link->evidence;
  // Without mlx5_1 its GPU falls back to the other NIC of its switch.
  const Difference* pairing = find(ds, "nic-pairing-differs");
  ASSERT_NE(pairing, nullptr);
  EXPECT_TRUE(contains(pairing->message, "mlx5_0 (0000:18:00.0) through PIX")) << pairing->message;
  // ... which now carries two GPUs where every GPU of the common configuration has its own.
  const Difference* sharing = find(ds, "nic-sharing-differs");
  ASSERT_NE(sharing, nullptr) << testing::PrintToString(codes(ds));
  EXPECT_TRUE(contains(sharing->message, "share NIC mlx5_0 (0000:18:00.0), 2 to one"))
      << sharing->message;
  EXPECT_TRUE(contains(sharing->message, "each has a NIC of its own")) << sharing->message;
  EXPECT_TRUE(contains(sharing->evidence,
                       "this node 8 GPU(s) on 7 NIC(s) (mlx5_0 (0000:18:00.0) "
                       "carries 2); common configuration 8 GPU(s) on 8 NIC(s) "
                       "(one each)"))
      << sharing->evidence;
  EXPECT_EQ(ds.size(), 4u) << testing::PrintToString(codes(ds));
  EXPECT_EQ(ds.front().code, "nic-missing");  // a missing device leads
}

TEST(Differences, ANicCarryingMoreGpusThanInTheCommonConfigurationGivesEachItsShare) {
  NodeFacts common = dgx();
  for (NicFacts& n : common.nics)
    n.port_rate_gbps = 400;
  // Two GPUs of one switch on one NIC, the other NIC of that switch still there but unused.
  NodeFacts node = common;
  gpu(node, "0000:29:00.0")->nic = gpu(node, "0000:1b:00.0")->nic;
  const auto ds = differences(common, node);
  const Difference* sharing = find(ds, "nic-sharing-differs");
  ASSERT_NE(sharing, nullptr) << testing::PrintToString(codes(ds));
  EXPECT_TRUE(contains(sharing->message, "GPUs 0000:1b:00.0, 0000:29:00.0 share NIC mlx5_0"))
      << sharing->message;
  EXPECT_TRUE(contains(sharing->message,
                       "each can expect 25.0 GB/s where the common "
                       "configuration gives 50.0 GB/s"))
      << sharing->message;
  EXPECT_EQ(std::count_if(ds.begin(), ds.end(),
                          [](const Difference& d) { return d.code == "nic-sharing-differs"; }),
            1);

  // The other way round: the common configuration shares, this node gives each GPU its own.
  const auto back = differences(node, common);
  const auto shared_less = std::count_if(back.begin(), back.end(), [&](const Difference& d) {
    return d.code == "nic-sharing-differs" && contains(d.message, "to itself") &&
           contains(d.message, "shares its NIC among 2 GPUs");
  });
  EXPECT_EQ(shared_less, 2) << testing::PrintToString(codes(back));
}

TEST(Differences, EqualSharingIsNoDifferenceEvenWhenTheNicsAreOthers) {
  // Two GPUs swap their NICs, one GPU to each still: pairings differ, sharing does not.
  NodeFacts node = dgx();
  std::swap(gpu(node, "0000:1b:00.0")->nic, gpu(node, "0000:29:00.0")->nic);
  const auto ds = differences(dgx(), node);
  EXPECT_NE(find(ds, "nic-pairing-differs"), nullptr) << testing::PrintToString(codes(ds));
  EXPECT_EQ(find(ds, "nic-sharing-differs"), nullptr) << testing::PrintToString(codes(ds));
}

TEST(Differences, AGpuTrainedNarrowerOrDownIsNamedWithBothWidths) {
  NodeFacts common = dgx();
  gpu(common, "0000:43:00.0")->pcie_width = 16;
  NodeFacts narrow = common;
  gpu(narrow, "0000:43:00.0")->pcie_width = 8;
  auto ds = differences(common, narrow);
  ASSERT_EQ(codes(ds), std::vector<std::string>{"pcie-width-below-common"});
  EXPECT_TRUE(contains(ds[0].message, "trained at x8, narrower than the common x16"));
  NodeFacts down = common;
  gpu(down, "0000:43:00.0")->pcie_width = 0;
  ds = differences(common, down);
  ASSERT_EQ(codes(ds), std::vector<std::string>{"pcie-link-down"});
}

TEST(Differences, ALowerGenerationAndAMissingGpuAreNamed) {
  NodeFacts node = dgx();
  gpu(node, "0000:9d:00.0")->pcie_max_gen = 4;
  node.gpus.erase(node.gpus.begin() + 7);  // 0000:d1:00.0
  const auto ds = differences(dgx(), node);
  const Difference* missing = find(ds, "gpu-missing");
  ASSERT_NE(missing, nullptr);
  EXPECT_TRUE(contains(missing->message, "0000:d1:00.0")) << missing->message;
  EXPECT_TRUE(contains(missing->evidence, "this node 7, common configuration 8"));
  const Difference* gen = find(ds, "pcie-gen-below-common");
  ASSERT_NE(gen, nullptr);
  EXPECT_TRUE(contains(gen->message, "Gen4")) << gen->message;
  EXPECT_TRUE(contains(gen->message, "Gen5")) << gen->message;
}

TEST(Differences, AnotherNumaNodeAndNicPairingAreNamed) {
  NodeFacts node = dgx();
  GpuFacts* g = gpu(node, "0000:1b:00.0");
  g->numa_node = 1;
  g->nic = "0000:9c:00.0";  // mlx5_4, across the sockets
  g->nic_path = "SYS";
  const auto ds = differences(dgx(), node);
  ASSERT_NE(find(ds, "gpu-numa-differs"), nullptr) << testing::PrintToString(codes(ds));
  const Difference* pairing = find(ds, "nic-pairing-differs");
  ASSERT_NE(pairing, nullptr);
  EXPECT_TRUE(contains(pairing->message, "mlx5_4 (0000:9c:00.0) through SYS"));
  EXPECT_TRUE(contains(pairing->message, "mlx5_0 (0000:18:00.0) through PIX"));

  // The same NIC on a longer path (the GPU moved to another switch) is a different pairing too.
  NodeFacts moved = dgx();
  gpu(moved, "0000:1b:00.0")->nic_path = "NODE";
  ASSERT_EQ(codes(differences(dgx(), moved)), std::vector<std::string>{"nic-pairing-differs"});
}

TEST(Differences, DriverCudaAndNcclVersionsAreCompared) {
  NodeFacts common = dgx(), node = dgx();
  common.driver_version = "580.159.04";
  node.driver_version = "570.86.15";
  node.cuda_version = "12.8";
  node.nccl_version = "";
  const auto ds = differences(common, node);
  ASSERT_EQ(codes(ds), (std::vector<std::string>{"driver-version-differs", "cuda-version-differs",
                                                 "nccl-version-differs"}));
  EXPECT_TRUE(contains(ds[0].evidence, "this node 570.86.15, common configuration 580.159.04"));
  EXPECT_TRUE(contains(ds[2].message, "NCCL unknown where the common configuration has 2.28.3"));
}

TEST(Differences, NvlinksDownAndANicAtAnotherRateAreNamed) {
  NodeFacts node = dgx();
  gpu(node, "0000:c3:00.0")->nvlinks_active = 12;
  node.nics[3].port_rate_gbps = 200;
  const auto ds = differences(dgx(), node);
  ASSERT_NE(find(ds, "nvlink-count-differs"), nullptr) << testing::PrintToString(codes(ds));
  const Difference* rate = find(ds, "nic-rate-differs");
  ASSERT_NE(rate, nullptr);
  EXPECT_TRUE(contains(rate->message, "200 Gbit/s")) << rate->message;
  EXPECT_TRUE(contains(rate->message, "400 Gbit/s")) << rate->message;
}

// --- ranks to nodes, the common configuration ---

TEST(ClusterView, RanksOfOneHostWithOneSourceAndOneTopologyAreOneNode) {
  // 8 ranks per node, as one rank per GPU runs them.
  std::vector<RankPayload> ranks;
  for (int r = 0; r < 16; ++r)
    ranks.push_back(payload(r < 8 ? "a" : "b", dgx()));
  const ClusterView v = compare_cluster(ranks);
  ASSERT_EQ(v.nodes.size(), 2u);
  EXPECT_EQ(v.hosts, 2);
  EXPECT_EQ(v.nodes[0].label, "a");
  EXPECT_EQ(v.nodes[1].ranks, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(v.configurations.size(), 1u);
  EXPECT_EQ(v.differing_nodes(), 0u);
}

TEST(ClusterView, RanksOfOneHostReadingDifferentFilesAreNodesLabelledHostSlashRank) {
  std::vector<RankPayload> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(
        payload("ci", r == 3 ? odd_dgx() : dgx(), "nccl-xml:rank" + std::to_string(r) + ".xml"));
  }
  const ClusterView v = compare_cluster(ranks);
  ASSERT_EQ(v.nodes.size(), 4u);
  EXPECT_EQ(v.nodes[3].label, "ci/3");
  ASSERT_EQ(v.configurations.size(), 2u);
  EXPECT_EQ(v.configurations[0].nodes.size(), 3u);
  EXPECT_EQ(v.configurations[1].nodes, std::vector<size_t>{3});
  EXPECT_EQ(v.nodes[3].configuration, 1u);
}

TEST(ClusterView, RanksOfOneHostThatFoundDifferentFactsAreDifferentNodes) {
  NodeFacts other = dgx();
  other.gpus.pop_back();
  const ClusterView v = compare_cluster({payload("h", dgx()), payload("h", other)});
  ASSERT_EQ(v.nodes.size(), 2u);
  EXPECT_EQ(v.nodes[0].label, "h/0");
  EXPECT_EQ(v.nodes[1].label, "h/1");
}

TEST(ClusterView, TheCommonConfigurationIsTheOneMostNodesHaveWhereverItsFirstRankIs) {
  NodeFacts odd = odd_dgx();
  // The odd node is rank 0: the common configuration is still the other three's.
  const ClusterView v = compare_cluster(
      {payload("n0", odd), payload("n1", dgx()), payload("n2", dgx()), payload("n3", dgx())});
  ASSERT_EQ(v.configurations.size(), 2u);
  EXPECT_EQ(v.configurations[0].facts, dgx());
  EXPECT_EQ(v.configurations[1].nodes, std::vector<size_t>{0});
  EXPECT_FALSE(v.configurations[1].differences.empty());
  EXPECT_TRUE(v.configurations[0].differences.empty());
}

TEST(ClusterView, BetweenEqualNodeCountsTheConfigurationWithMoreRanksIsCommon) {
  // Two nodes: "a" runs 3 ranks, "b" (odd) runs 5.
  std::vector<RankPayload> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(payload("a", dgx()));
  for (int r = 0; r < 5; ++r)
    ranks.push_back(payload("b", odd_dgx()));
  const ClusterView v = compare_cluster(ranks);
  ASSERT_EQ(v.configurations.size(), 2u);
  EXPECT_EQ(v.configurations[0].ranks, 5);
  EXPECT_EQ(v.nodes[v.configurations[1].nodes[0]].label, "a");
}

TEST(ClusterView, RankRangesAreCompact) {
  EXPECT_EQ(rank_ranges({0, 1, 2, 5, 7, 8, 9}), "0-2,5,7-9");
  EXPECT_EQ(rank_ranges({4}), "4");
  EXPECT_EQ(rank_ranges({}), "");
}

// --- what rank 0 prints ---

TEST(ClusterText, LeadsWithTheNodesThatDifferThenPrintsTheCommonTopologyOnce) {
  std::vector<RankPayload> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(payload("ci", r == 3 ? odd_dgx() : dgx(), "nccl-xml:r" + std::to_string(r)));
  const std::string text = reports::render_cluster_text(compare_cluster(ranks), ranks);
  EXPECT_TRUE(text.starts_with("commtool topo: cluster of 4 nodes, 4 MPI ranks on 1 host\n"))
      << text;
  EXPECT_TRUE(contains(text, "Verdict: 1 of 4 nodes differs from the common configuration"));
  const size_t differ = text.find("Nodes that differ");
  const size_t odd = text.find("ci/3 (rank 3, nccl-xml:r3)");
  const size_t topology = text.find("Common topology, as rank 0 read it on ci/0");
  ASSERT_NE(differ, std::string::npos) << text;
  ASSERT_NE(odd, std::string::npos) << text;
  ASSERT_NE(topology, std::string::npos) << text;
  EXPECT_LT(differ, odd);
  EXPECT_LT(odd, topology);
  EXPECT_TRUE(contains(text, "[nic-missing] NIC mlx5_1 (0000:26:00.0)")) << text;
  EXPECT_TRUE(contains(text, "[pcie-max-width-below-common] GPU 0000:29:00.0")) << text;
  // The common topology is rank 0's own report, once.
  EXPECT_TRUE(text.ends_with("commtool topo: the report of ci\n")) << text;
  EXPECT_EQ(text.find("the report of"), text.rfind("the report of"));
}

TEST(ClusterText, SaysSoWhenAllNodesAgree) {
  const std::string text =
      reports::render_cluster_text(compare_cluster({payload("a", dgx()), payload("b", dgx())}),
                                   {payload("a", dgx()), payload("b", dgx())});
  EXPECT_TRUE(contains(text, "Verdict: all 2 nodes have the same configuration")) << text;
  EXPECT_FALSE(contains(text, "Nodes that differ")) << text;
}

// 1,000 nodes, two of them odd: the text names exactly those two among the nodes that differ,
// and its length grows with the nodes, not their square.
TEST(ClusterText, AThousandNodesWithTwoOddOnesNameExactlyTheTwoInLinesLinearInNodes) {
  constexpr int kNodes = 1000;
  NodeFacts no_gpu = dgx();
  no_gpu.gpus.erase(no_gpu.gpus.begin() + 2);
  NodeFacts old_driver = dgx();
  old_driver.driver_version = "535.54.03";
  std::vector<RankPayload> ranks;
  for (int n = 0; n < kNodes; ++n) {
    const std::string host = fmt::format("gpu{:04}", n);
    ranks.push_back(payload(host, n == 137 ? no_gpu : n == 802 ? old_driver : dgx()));
  }
  const ClusterView view = compare_cluster(ranks);
  const std::string text = reports::render_cluster_text(view, ranks);
  const std::string differ =
      text.substr(text.find("Nodes that differ"),
                  text.find("Common topology") - text.find("Nodes that differ"));
  std::vector<std::string> named;
  for (size_t at = differ.find("gpu"); at != std::string::npos; at = differ.find("gpu", at + 1)) {
    if (at + 7 <= differ.size() && std::isdigit(static_cast<unsigned char>(differ[at + 3]))) {
      named.push_back(differ.substr(at, 7));
    }
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  EXPECT_EQ(named, (std::vector<std::string>{"gpu0137", "gpu0802"})) << differ;
  EXPECT_TRUE(contains(text, "Verdict: 2 of 1000 nodes differ")) << text.substr(0, 300);
  EXPECT_TRUE(contains(differ, "[gpu-missing] GPU 0000:43:00.0")) << differ;
  EXPECT_TRUE(contains(differ, "[driver-version-differs]")) << differ;
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_LE(lines, 40) << text;  // a fixed header, 2 odd nodes with their evidence, one report

  // JSON carries every node, and grows with them too.
  for (RankPayload& p : ranks)
    p.document = R"({"command": "topo", "gpus": []})";
  const auto doc = reports::cluster_to_json(view, ranks);
  EXPECT_EQ(doc["nodes"].size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(doc["differing_nodes"], (nlohmann::json{"gpu0137", "gpu0802"}));
}

TEST(ClusterJson, CarriesEveryNodesTopologyAndTheComparison) {
  std::vector<RankPayload> ranks;
  for (int r = 0; r < 4; ++r) {
    Topology t = read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) +
                                    (r == 3 ? "/cluster/rank3.xml" : "/nccl_xml/dgx_h100.xml"));
    RankPayload p = payload("ci", node_facts(t, analyze(t), {}), "nccl-xml:" + std::to_string(r));
    p.document = reports::topo_to_json(t, analyze(t)).dump();
    ranks.push_back(std::move(p));
  }
  const auto doc = reports::cluster_to_json(compare_cluster(ranks), ranks);
  EXPECT_EQ(doc["schema_version"], reports::kTopoClusterSchemaVersion);
  EXPECT_EQ(doc["command"], "topo");
  EXPECT_EQ(doc["kind"], "cluster");
  ASSERT_EQ(doc["nodes"].size(), 4u);
  EXPECT_EQ(doc["nodes"][3]["topology"]["nics"].size(), 7u);
  EXPECT_EQ(doc["nodes"][0]["topology"]["nics"].size(), 8u);
  EXPECT_EQ(doc["differing_nodes"], nlohmann::json{"ci/3"});
  const auto& odd = doc["configurations"][1];
  EXPECT_EQ(odd["nodes"], nlohmann::json{"ci/3"});
  EXPECT_EQ(odd["differences"][0]["code"], "nic-missing");
  EXPECT_TRUE(odd["differences"][0]["advice"].get<std::string>().starts_with("on these nodes"));
}

TEST(ClusterJson, ARankWhoseDocumentIsNotJsonIsNamed) {
  std::vector<RankPayload> ranks{payload("a", dgx())};
  ranks[0].document = "{";
  try {
    reports::cluster_to_json(compare_cluster(ranks), ranks);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "rank 0")) << e.what();
  }
}

// Every kind of difference, each made by one change to the DGX, says what to do next.
TEST(Differences, EveryDifferenceEndsWithWhatToDoNext) {
  std::set<std::string> all;
  std::istringstream names(
      "pcie-link-down pcie-width-below-common pcie-width-differs pcie-gen-below-common "
      "pcie-gen-differs pcie-max-width-below-common pcie-max-width-differs gpu-model-differs "
      "nvlink-count-differs gpu-numa-differs nic-pairing-differs nic-kind-differs "
      "nic-rate-differs nic-pcie-width-differs nic-numa-differs nic-sharing-differs gpu-missing "
      "gpu-extra nic-missing nic-extra nvswitch-count-differs driver-version-differs "
      "cuda-version-differs nccl-version-differs");
  all.insert(std::istream_iterator<std::string>(names), {});
  NodeFacts common = dgx();
  gpu(common, "0000:43:00.0")->pcie_width = 16;
  common.driver_version = "580.159.04";
  const std::vector<std::function<void(NodeFacts&)>> changes = {
      [](NodeFacts& f) { gpu(f, "0000:43:00.0")->pcie_width = 0; },
      [](NodeFacts& f) { gpu(f, "0000:43:00.0")->pcie_width = 8; },
      [](NodeFacts& f) { gpu(f, "0000:43:00.0")->pcie_width = 32; },
      [](NodeFacts& f) { gpu(f, "0000:9d:00.0")->pcie_max_gen = 4; },
      [](NodeFacts& f) { gpu(f, "0000:9d:00.0")->pcie_max_gen = 6; },
      [](NodeFacts& f) { gpu(f, "0000:9d:00.0")->pcie_max_width = 8; },
      [](NodeFacts& f) { gpu(f, "0000:9d:00.0")->pcie_max_width = 32; },
      [](NodeFacts& f) { gpu(f, "0000:c3:00.0")->model = "NVIDIA A100-SXM4-80GB"; },
      [](NodeFacts& f) { gpu(f, "0000:c3:00.0")->nvlinks_active = 12; },
      [](NodeFacts& f) { gpu(f, "0000:c3:00.0")->numa_node = 0; },
      [](NodeFacts& f) { gpu(f, "0000:1b:00.0")->nic_path = "NODE"; },
      [](NodeFacts& f) { f.nics[2].kind = "Ethernet"; },
      [](NodeFacts& f) { f.nics[3].port_rate_gbps = 200; },
      [](NodeFacts& f) { f.nics[3].pcie_width = 8; },
      [](NodeFacts& f) { f.nics[3].numa_node = 7; },
      [](NodeFacts& f) { gpu(f, "0000:29:00.0")->nic = gpu(f, "0000:1b:00.0")->nic; },
      [](NodeFacts& f) { f.gpus.erase(f.gpus.begin() + 7); },
      [](NodeFacts& f) {
        GpuFacts added;
        added.bus_id = "0000:e1:00.0";
        added.model = "NVIDIA H100";
        f.gpus.push_back(added);
      },
      [](NodeFacts& f) { f.nics.erase(f.nics.begin() + 1); },
      [](NodeFacts& f) {
        f.nics.push_back({"0000:f1:00.0", "mlx5_9", "RoCE"});
      },
      [](NodeFacts& f) { f.nvswitches = 2; },
      [](NodeFacts& f) {
        std::tie(f.driver_version, f.cuda_version, f.nccl_version) =
            std::tuple{"570.86.15", "12.8", "2.27.3"};
      },
  };
  std::set<std::string> seen;
  for (size_t i = 0; i < changes.size(); ++i) {
    NodeFacts node = common;
    changes[i](node);
    const auto ds = differences(common, node);
    EXPECT_FALSE(ds.empty()) << "change " << i;
    for (const Difference& d : ds) {
      EXPECT_TRUE(all.contains(d.code)) << "a code the test does not know: " << d.code;
      next_step::expect_next_step(d.advice, d.code);
      seen.insert(d.code);
    }
  }
  for (const std::string& code : all)
    EXPECT_TRUE(seen.contains(code)) << code << " was never made: the test misses a case";
}

TEST(Differences, NextStepsNameTheDeviceAndTheCommonValue) {
  const auto ds = differences(dgx(), odd_dgx());
  const Difference* link = find(ds, "pcie-max-width-below-common");
  ASSERT_NE(link, nullptr);
  EXPECT_TRUE(contains(link->advice, "GPU 0000:29:00.0 sits in a slot or riser with fewer lanes"))
      << link->advice;
  EXPECT_TRUE(contains(link->advice, "`lspci -vv -s 0000:29:00.0` (package pciutils"))
      << link->advice;
  const Difference* nic = find(ds, "nic-missing");
  ASSERT_NE(nic, nullptr);
  EXPECT_TRUE(contains(nic->advice, "`ibstat mlx5_1` (package infiniband-diags)")) << nic->advice;
  NodeFacts old = dgx(), common = dgx();
  std::tie(common.nccl_version, old.nccl_version) = std::pair{"2.28.3", "2.27.3"};
  const auto versions = differences(common, old);
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_TRUE(contains(versions[0].advice, "run one NCCL (2.28.3) on every node"))
      << versions[0].advice;
}

TEST(ClusterText, EachDifferenceHasWhatToDoUnderItsEvidence) {
  std::vector<RankPayload> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(payload("ci", r == 3 ? odd_dgx() : dgx(), "nccl-xml:r" + std::to_string(r)));
  const ClusterView view = compare_cluster(ranks);
  const std::string text = reports::render_cluster_text(view, ranks);
  for (const Difference& d : view.configurations[1].differences) {
    EXPECT_TRUE(contains(
        text, "        evidence: " + d.evidence + "\n        what to do: " + d.advice + "\n"))
        << text;
  }
}
