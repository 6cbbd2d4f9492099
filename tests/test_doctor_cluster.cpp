// doctor under MPI, the pure half: the node payload, and one page for many nodes, grouped by
// their problems so that the odd node out of a thousand takes a few lines.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "probes/base/error.hpp"
#include "reports/doctor/doctor_cluster.hpp"
#include "reports/doctor/doctor_report.hpp"

namespace {

using namespace commtool;
using namespace commtool::reports::doctor;

Check gpu_check(int gpu, const std::string& area, Severity s, const std::string& evidence) {
  Check c;
  c.subject = "GPU" + std::to_string(gpu) + " 0000:" + std::to_string(10 + gpu) + ":00.0";
  c.gpu = gpu;
  c.area = area;
  c.severity = s;
  c.evidence = evidence;
  if (s == Severity::kWarn || s == Severity::kFail) c.advice = "look at " + area;
  return c;
}

Check h2d(int gpu, double gbps) {
  Check c = gpu_check(gpu, "H2D", Severity::kPass, std::to_string(gbps) + " GB/s at 64 MiB");
  c.figure = Figure{gbps, 64ull << 20, 0};
  return c;
}

// A healthy 8-GPU node: each GPU's Xid, ECC and H2D checks pass, the all-reduce too.
NodeDoctor healthy(const std::string& host, int rank, double h2d_gbps = 54.5) {
  NodeDoctor n;
  n.host = host;
  n.rank = rank;
  n.gpus = 8;
  n.seconds = 12.5;
  Check allreduce;
  allreduce.subject = "node";
  allreduce.area = "all-reduce";
  allreduce.evidence = "8 ranks, 64 MiB: 380 GB/s busbw";
  allreduce.figure = Figure{380, 64ull << 20, 8};
  n.checks.push_back(allreduce);
  for (int g = 0; g < 8; ++g) {
    n.checks.push_back(gpu_check(g, "Xid", Severity::kPass, "no Xid since boot"));
    n.checks.push_back(gpu_check(g, "ECC", Severity::kPass, "0 uncorrected"));
    n.checks.push_back(h2d(g, h2d_gbps + 0.1 * g));
  }
  return n;
}

void set(NodeDoctor& n, int gpu, const std::string& area, Severity s, const std::string& evidence) {
  for (Check& c : n.checks) {
    if (c.gpu == gpu && c.area == area) {
      c.severity = s;
      c.evidence = evidence;
      c.advice = "look at " + area;
      n.overall = std::max(n.overall, s);
      n.exit_code = s == Severity::kFail ? kExitFail : kExitWarn;
      return;
    }
  }
  FAIL() << "no " << area << " check on GPU " << gpu;
}

size_t lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST(DoctorCluster, NodePayloadRoundTripsEveryCheckAndFigure) {
  NodeDoctor n = healthy("node-7", 56);
  set(n, 3, "Xid", Severity::kFail, "Xid 79 at 12:00:01: fallen off the bus");
  n.skipped = {"p2p: not at --level quick"};
  const NodeDoctor back = decode_node_doctor(encode_node_doctor(n), 56);
  EXPECT_EQ(back.host, "node-7");
  EXPECT_EQ(back.rank, 56);
  EXPECT_EQ(back.overall, Severity::kFail);
  EXPECT_EQ(back.exit_code, kExitFail);
  EXPECT_EQ(back.gpus, 8);
  EXPECT_EQ(back.skipped, n.skipped);
  ASSERT_EQ(back.checks.size(), n.checks.size());
  for (size_t i = 0; i < n.checks.size(); ++i) {
    EXPECT_EQ(back.checks[i].subject, n.checks[i].subject);
    EXPECT_EQ(back.checks[i].gpu, n.checks[i].gpu);
    EXPECT_EQ(back.checks[i].severity, n.checks[i].severity);
    EXPECT_EQ(back.checks[i].evidence, n.checks[i].evidence);
    EXPECT_EQ(back.checks[i].advice, n.checks[i].advice);
    ASSERT_EQ(back.checks[i].figure.has_value(), n.checks[i].figure.has_value());
    if (n.checks[i].figure) {
      EXPECT_DOUBLE_EQ(back.checks[i].figure->value, n.checks[i].figure->value);
      EXPECT_EQ(back.checks[i].figure->bytes, n.checks[i].figure->bytes);
      EXPECT_EQ(back.checks[i].figure->ranks, n.checks[i].figure->ranks);
    }
  }
}

TEST(DoctorCluster, APayloadItCannotReadNamesTheRankAndTheField) {
  auto message = [](const std::string& bytes, int rank) {
    try {
      decode_node_doctor(bytes, rank);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("not json", 4).find("rank 4 sent a doctor page commtool cannot read: payload"),
            std::string::npos);
  EXPECT_NE(message(R"({"format":"commtool-probe-node","version":1})", 4).find("format"),
            std::string::npos);
  nlohmann::json j = nlohmann::json::parse(encode_node_doctor(healthy("a", 4)));
  j["rank"] = 5;
  EXPECT_NE(message(j.dump(), 4).find("rank: 5 is not the sender's"), std::string::npos);
  j["rank"] = 4;
  j["checks"][2]["severity"] = "GREAT";
  EXPECT_NE(message(j.dump(), 4).find("checks[2].severity: GREAT"), std::string::npos);
  j["checks"][2]["severity"] = "PASS";
  j["checks"][0]["figure"]["gbps"] = -1;
  EXPECT_NE(message(j.dump(), 4).find("checks[0].figure.gbps"), std::string::npos);
  j["checks"][0]["figure"]["gbps"] = 1;
  j["ok"] = false;
  EXPECT_NE(message(j.dump(), 4).find("exit_code: 0 for a node doctor could not examine"),
            std::string::npos);
  j.erase("seconds");
  EXPECT_NE(message(j.dump(), 4).find("seconds"), std::string::npos);
}

// 1,000 nodes: one with a GPU off the bus, two with the same ECC warning on GPU 5 (different
// counts), the rest healthy. The page: the FAIL first, the pair as one group, the 997 as one
// line; a few dozen lines, not thousands.
TEST(DoctorCluster, TheOddNodesOutOfAThousandComeFirstInAFewLines) {
  std::vector<NodeDoctor> nodes;
  for (int i = 0; i < 1000; ++i)
    nodes.push_back(healthy("node-" + std::to_string(i), i * 8));
  set(nodes[433], 3, "Xid", Severity::kFail, "Xid 79: GPU has fallen off the bus");
  set(nodes[17], 5, "ECC", Severity::kWarn, "12 corrected in 1 s");
  set(nodes[18], 5, "ECC", Severity::kWarn, "40 corrected in 1 s");
  const DoctorClusterView view = compare_doctor_nodes(nodes, 8000);
  EXPECT_EQ(view.overall, Severity::kFail);
  EXPECT_EQ(cluster_exit_code(view), kExitFail);
  EXPECT_EQ(view.count(Severity::kFail), 1);
  EXPECT_EQ(view.count(Severity::kWarn), 2);
  EXPECT_EQ(view.count(Severity::kPass), 997);
  ASSERT_EQ(view.groups.size(), 3u);
  EXPECT_EQ(view.groups[0].worst, Severity::kFail);
  EXPECT_EQ(view.groups[0].nodes, (std::vector<size_t>{433}));
  EXPECT_EQ(view.groups[1].nodes, (std::vector<size_t>{17, 18}));
  EXPECT_EQ(view.groups[2].nodes.size(), 997u);
  EXPECT_EQ(view.common, 2u);
  EXPECT_TRUE(view.figures_compared);

  const std::string text = render_doctor_cluster_text(view, "quick");
  EXPECT_EQ(text.rfind("commtool doctor across 1000 node(s), 8000 MPI rank(s), level quick: FAIL\n"
                       "  1 FAIL, 2 WARN, 997 PASS\n  3 node(s) differ from the state 997 of them "
                       "share\n",
                       0),
            0u)
      << text;
  const size_t fail = text.find(
      "FAIL  1 node(s): node-433 (rank 3464)\n  FAIL  GPU3 0000:13:00.0"
      "  Xid: Xid 79: GPU has fallen off the bus\n        what to do: ");
  const size_t warn = text.find(
      "WARN  2 node(s): node-17 (rank 136), node-18 (rank 144)\n  WARN  "
      "GPU5 0000:15:00.0  ECC: 12 corrected in 1 s\n");
  const size_t pass = text.find("PASS  997 node(s), common: node-0 (rank 0), node-1 (rank 8)");
  ASSERT_NE(fail, std::string::npos) << text;
  ASSERT_NE(warn, std::string::npos) << text;
  ASSERT_NE(pass, std::string::npos) << text;
  EXPECT_LT(fail, warn);
  EXPECT_LT(warn, pass);
  EXPECT_NE(text.find("and 989 more\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(values as on node-17; every node's own in --json)"), std::string::npos);
  EXPECT_LT(lines(text), 20u) << text;
}

TEST(DoctorCluster, ANodeSlowerThanTheOthersIsAWarnThoughItsOwnChecksPass) {
  std::vector<NodeDoctor> nodes;
  for (int i = 0; i < 5; ++i)
    nodes.push_back(healthy("n" + std::to_string(i), i));
  // n3's GPU 2 copies at 27 GB/s: a link at half width, which its own checks let pass.
  for (Check& c : nodes[3].checks)
    if (c.gpu == 2 && c.area == "H2D") {
      c.figure->value = 27.0;
      c.evidence = "27.0 GB/s at 64 MiB";
    }
  // 88% of the others on n4 (under 90%), 91% on n1 (within): only n3 and n4 stand apart.
  for (Check& c : nodes[4].checks)
    if (c.gpu == 0 && c.area == "H2D") c.figure->value = 54.5 * 0.88;
  for (Check& c : nodes[1].checks)
    if (c.gpu == 0 && c.area == "H2D") c.figure->value = 54.5 * 0.91;
  const DoctorClusterView view = compare_doctor_nodes(nodes, 5);
  EXPECT_EQ(view.overall, Severity::kWarn);
  EXPECT_EQ(cluster_exit_code(view), kExitWarn);
  EXPECT_EQ(view.count(Severity::kWarn), 2);
  EXPECT_EQ(view.nodes[1].overall, Severity::kPass);
  ASSERT_EQ(view.nodes[3].overall, Severity::kWarn);
  const std::string text = render_doctor_cluster_text(view, "quick");
  EXPECT_NE(text.find("WARN  GPU2 0000:12:00.0  H2D: 27.0 GB/s at 64 MiB; 49% of the median "
                      "54.7 GB/s of 5 nodes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("WARN  1 node(s): n3 (rank 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("WARN  1 node(s): n4 (rank 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("PASS  3 node(s), common: n0 (rank 0), n1 (rank 1), n2 (rank 2)"),
            std::string::npos)
      << text;
}

TEST(DoctorCluster, TwoNodesAreSideBySideButTheirFiguresAreNotJudged) {
  std::vector<NodeDoctor> nodes{healthy("a", 0), healthy("b", 1, 20.0)};
  const DoctorClusterView view = compare_doctor_nodes(nodes, 2);
  EXPECT_FALSE(view.figures_compared);
  EXPECT_EQ(view.overall, Severity::kPass);
  EXPECT_EQ(cluster_exit_code(view), 0);
  ASSERT_EQ(view.groups.size(), 1u);
  const std::string text = render_doctor_cluster_text(view, "standard");
  EXPECT_NE(text.find("PASS  2 node(s): a (rank 0), b (rank 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("Figures are compared across 3 or more nodes"), std::string::npos) << text;
  EXPECT_EQ(text.find("differ from the state"), std::string::npos) << text;
}

TEST(DoctorCluster, EveryNodeWithoutAGpuIsExit3AndANodeNotExaminedIsItsOwnFail) {
  auto no_gpu = [](const std::string& host, int rank) {
    NodeDoctor n;
    n.host = host;
    n.rank = rank;
    n.exit_code = static_cast<int>(ExitCode::kEnvironment);
    n.overall = Severity::kFail;
    Check c;
    c.subject = "node";
    c.area = "GPUs";
    c.severity = Severity::kFail;
    c.evidence = "no NVIDIA GPU found (sysfs)";
    n.checks.push_back(c);
    return n;
  };
  DoctorClusterView view = compare_doctor_nodes({no_gpu("a", 0), no_gpu("b", 4)}, 8);
  EXPECT_EQ(cluster_exit_code(view), 3);
  EXPECT_EQ(view.groups.size(), 1u);

  NodeDoctor broken;
  broken.host = "c";
  broken.rank = 8;
  broken.ok = false;
  broken.exit_code = 2;
  broken.error = "--kernel-log /var/log/k.log: cannot read it: No such file or directory";
  view = compare_doctor_nodes({healthy("a", 0), healthy("b", 4), broken}, 12);
  EXPECT_EQ(cluster_exit_code(view), kExitFail);
  EXPECT_EQ(view.count(Severity::kFail), 1);
  ASSERT_EQ(view.groups.size(), 2u);
  EXPECT_FALSE(view.groups[0].examined);
  const std::string text = render_doctor_cluster_text(view, "quick");
  EXPECT_NE(text.find("FAIL  1 node(s): c (rank 8)\n  doctor could not examine it: --kernel-log "
                      "/var/log/k.log"),
            std::string::npos)
      << text;
  const nlohmann::json j = doctor_cluster_to_json(view, "quick");
  EXPECT_EQ(j["nodes"][2]["error"], broken.error);
  EXPECT_EQ(j["nodes"][2]["verdict"], "FAIL");
  EXPECT_EQ(j["groups"][0]["examined"], false);
}

TEST(DoctorCluster, JsonCarriesEveryNodesOwnValuesAndTheGroups) {
  std::vector<NodeDoctor> nodes;
  for (int i = 0; i < 4; ++i)
    nodes.push_back(healthy("h" + std::to_string(i), i));
  set(nodes[1], 5, "ECC", Severity::kWarn, "12 corrected");
  set(nodes[2], 5, "ECC", Severity::kWarn, "40 corrected");
  const nlohmann::json j = doctor_cluster_to_json(compare_doctor_nodes(nodes, 4), "long");
  EXPECT_EQ(j["schema_version"], kDoctorSchemaVersion);
  EXPECT_EQ(j["command"], "doctor");
  EXPECT_EQ(j["cluster"], true);
  EXPECT_EQ(j["verdict"], "WARN");
  EXPECT_EQ(j["exit_code"], kExitWarn);
  EXPECT_EQ(j["level"], "long");
  EXPECT_EQ(j["counts"]["warn"], 2);
  EXPECT_EQ(j["counts"]["pass"], 2);
  ASSERT_EQ(j["groups"].size(), 2u);
  EXPECT_EQ(j["groups"][0]["hosts"], (nlohmann::json{"h1", "h2"}));
  EXPECT_EQ(j["groups"][0]["common"], false);
  EXPECT_EQ(j["groups"][1]["common"], true);
  ASSERT_EQ(j["nodes"].size(), 4u);
  std::string second;
  for (const auto& c : j["nodes"][2]["checks"])
    if (c["area"] == "ECC" && c["gpu"] == 5) second = c["evidence"];
  EXPECT_EQ(second, "40 corrected");
}

// The page of a real node (the H100 machine under mpirun): its node's checks travel as a
// payload unchanged, and a job of five such nodes where one copies at 60% and one has the real
// page's all-reduce failed reads as expected.
TEST(DoctorCluster, ARealH100PageTravelsAsAPayloadAndStandsBesideFourCopies) {
  std::ifstream in(std::string(COMMTOOL_SOURCE_DIR) +
                   "/tests/fixtures/doctor/h100_mpirun_2ranks.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json page = nlohmann::json::parse(in);
  EXPECT_EQ(page["cluster"], true);
  EXPECT_EQ(page["verdict"], "PASS");
  nlohmann::json node = page["nodes"][0];
  node["format"] = kNodeDoctorFormat;
  node["version"] = kNodeDoctorVersion;
  const NodeDoctor real = decode_node_doctor(node.dump(), 0);
  EXPECT_EQ(real.host, "vm");
  EXPECT_EQ(real.overall, Severity::kPass);
  EXPECT_EQ(real.checks.size(), 14u);
  const auto h2d_of = [](NodeDoctor& n) -> Check& {
    for (Check& c : n.checks)
      if (c.area == "H2D") return c;
    throw std::runtime_error("no H2D check");
  };
  NodeDoctor copy = real;
  ASSERT_TRUE(h2d_of(copy).figure.has_value());
  EXPECT_NEAR(h2d_of(copy).figure->value, 55.26, 0.01);

  std::vector<NodeDoctor> nodes;
  for (int i = 0; i < 5; ++i) {
    NodeDoctor n = real;
    n.host = "h100-" + std::to_string(i);
    n.rank = i * 8;
    nodes.push_back(n);
  }
  h2d_of(nodes[2]).figure->value *= 0.6;
  for (Check& c : nodes[4].checks) {
    if (c.area != "all-reduce") continue;
    c.severity = Severity::kFail;
    c.evidence = "wrong data: 12 elements differ";
  }
  const DoctorClusterView view = compare_doctor_nodes(nodes, 40);
  EXPECT_EQ(cluster_exit_code(view), kExitFail);
  ASSERT_EQ(view.groups.size(), 3u);
  EXPECT_EQ(view.groups[0].nodes, (std::vector<size_t>{4}));
  EXPECT_EQ(view.groups[1].nodes, (std::vector<size_t>{2}));
  EXPECT_EQ(view.common, 2u);
  const std::string text = render_doctor_cluster_text(view, "quick");
  EXPECT_NE(text.find("WARN  GPU0 0000:00:06.0  H2D: 55.3 GB/s [55.3-55.3] over 3 batches, data "
                      "checked, 97% of 57.2 GB/s (PCIe Gen5 x16 payload); 60% of the median "
                      "55.3 GB/s of 5 nodes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("FAIL  node  all-reduce: wrong data: 12 elements differ"), std::string::npos)
      << text;
}
