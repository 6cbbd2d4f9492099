#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "next_step_checks.hpp"
#include "probes/bandwidth/probe_plan.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "reports/probe/probe_report.hpp"

using namespace commtool;
using namespace commtool::probe;

namespace {

topo::Topology fixture(const std::string& name) {
  return topo::read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/" + name);
}

Measurement bandwidth(std::string probe, std::string what, Engine e, int src, int dst,
                      std::vector<double> samples) {
  return make_measurement(std::move(probe), std::move(what), e, src, dst, false, 512ull << 20, 8,
                          "GB/s", std::move(samples));
}

ProbeReport dgx_report(std::vector<Measurement> ms) {
  ProbeReport r;
  r.topology = fixture("dgx_h100.xml");
  r.analysis = topo::analyze(r.topology);
  r.measurements = std::move(ms);
  set_expectations(r.topology, r.analysis, r.measurements);
  return r;
}

}  // namespace

TEST(ExpectedRate, NvSwitchPairIsEighteenNvLink4Links) {
  auto t = fixture("dgx_h100.xml");
  auto a = topo::analyze(t);
  auto [gbps, basis] = expected_rate(t, a, 0, 5);
  EXPECT_DOUBLE_EQ(gbps, 450.0);
  EXPECT_EQ(basis, "NVLink4 x18");
}

TEST(ExpectedRate, HostTransferIsTheGpusPciePayloadRate) {
  auto t = fixture("dgx_h100.xml");
  auto a = topo::analyze(t);
  auto [gbps, basis] = expected_rate(t, a, kHost, 2);
  EXPECT_NEAR(gbps, 57.2, 0.05);
  EXPECT_EQ(basis, "PCIe Gen5 x16 payload");
}

TEST(ExpectedRate, PciePairIsTheSlowerGpusPayloadRate) {
  auto t = fixture("pcie_4gpu_2socket.xml");
  auto a = topo::analyze(t);
  auto [gbps, basis] = expected_rate(t, a, 1, 2);
  EXPECT_NEAR(gbps, 28.6, 0.05);  // Gen4 x16
  EXPECT_EQ(basis, "PCIe Gen4 x16 payload");
}

TEST(ExpectedRate, SameGpuHasNoExpectation) {
  auto t = fixture("dgx_h100.xml");
  EXPECT_EQ(expected_rate(t, topo::analyze(t), 3, 3).first, 0.0);
}

TEST(Verdict, UnderThreeQuartersIsLow) {
  Measurement m = bandwidth("h2d", "H2D", Engine::kCopyEngine, kHost, 0, {40});
  m.expected = 57.2;
  EXPECT_TRUE(judge(m).low);
  EXPECT_NEAR(judge(m).percent, 69.9, 0.1);
  m.samples = {55.5};
  m.summary = measure::summarize(m.samples);
  EXPECT_FALSE(judge(m).low);
  EXPECT_FALSE(judge(m).above);
}

TEST(Verdict, OverSpecIsFlaggedNotPraised) {
  Measurement m = bandwidth("p2p", "write", Engine::kSm, 0, 1, {470});
  m.expected = 450;
  EXPECT_TRUE(judge(m).above);
}

TEST(Verdict, LatencyAndUnknownExpectationHaveNoPercent) {
  Measurement m = bandwidth("h2d", "H2D", Engine::kCopyEngine, kHost, 0, {40});
  EXPECT_EQ(judge(m).percent, 0.0);
  m.unit = "us";
  m.expected = 1;
  EXPECT_EQ(judge(m).percent, 0.0);
}

TEST(MeasurementJson, RoundTripsThroughTheWorkerWire) {
  Measurement m = bandwidth("ipc", "write while reverse", Engine::kSm, 1, 0, {1, 2, 3});
  m.bidirectional = true;
  nlohmann::json j = m;
  Measurement back = j.get<Measurement>();
  EXPECT_EQ(back.probe, "ipc");
  EXPECT_EQ(back.engine, Engine::kSm);
  EXPECT_EQ(back.src, 1);
  EXPECT_TRUE(back.bidirectional);
  EXPECT_EQ(back.samples, m.samples);
  EXPECT_DOUBLE_EQ(back.summary.median, 2);
  Measurement host = bandwidth("h2d", "H2D", Engine::kCopyEngine, kHost, 0, {1});
  EXPECT_EQ(nlohmann::json(host)["src"], "host");
  EXPECT_EQ(nlohmann::json(host).get<Measurement>().src, kHost);
}

TEST(ProbeText, P2pMatrixShowsMedianAndShareOfTheLink) {
  auto r = dgx_report({bandwidth("p2p", "write", Engine::kCopyEngine, 0, 1, {390, 391, 392}),
                       bandwidth("p2p", "write", Engine::kCopyEngine, 1, 0, {389, 390, 391})});
  std::string text = reports::render_probe_text(r);
  EXPECT_NE(text.find("391.0 (87%)"), std::string::npos) << text;
  EXPECT_NE(text.find("row writes into column"), std::string::npos);
  EXPECT_NE(text.find("every figure is as expected"), std::string::npos);
}

TEST(ProbeText, LowFigureGetsAVerdictLineWithEvidence) {
  auto r = dgx_report({bandwidth("h2d", "H2D", Engine::kCopyEngine, kHost, 0, {20, 21, 22})});
  std::string text = reports::render_probe_text(r);
  EXPECT_NE(text.find("LOW h2d H2D host -> GPU0: 21.0 GB/s is 37% of 57.2 GB/s"), std::string::npos)
      << text;
}

TEST(ProbeText, RefusedPairAndSkippedProbeSayWhy) {
  auto r = dgx_report({});
  r.refused.push_back({0, 1, "the GPUs hang off different CPU sockets"});
  r.skipped.push_back({"ipc", "only one GPU: no pair of worker processes to measure", false});
  std::string text = reports::render_probe_text(r);
  EXPECT_NE(text.find("GPU0 -> GPU1: no P2P, so no figure: the GPUs hang off"), std::string::npos);
  EXPECT_NE(text.find("ipc: not run: only one GPU"), std::string::npos);
}

TEST(ProbeJson, CarriesSchemaSettingsAndEveryStatistic) {
  auto r = dgx_report({bandwidth("h2d", "D2H", Engine::kSm, 0, kHost, {50, 52, 51})});
  auto j = reports::probe_to_json(r);
  EXPECT_EQ(j["schema_version"], reports::kProbeSchemaVersion);
  EXPECT_EQ(j["settings"]["bytes"], 512ull << 20);
  const auto& m = j["measurements"][0];
  EXPECT_EQ(m["stats"]["median"], 51.0);
  EXPECT_EQ(m["samples"].size(), 3u);
  EXPECT_EQ(m["verdict"], "ok");
  EXPECT_NEAR(m["percent_of_expected"].get<double>(), 89.2, 0.1);
}

TEST(ProbeCsv, OneHeaderAndOneRowPerMeasurement) {
  auto r = dgx_report({bandwidth("h2d", "H2D", Engine::kCopyEngine, kHost, 0, {55}),
                       bandwidth("h2d", "D2H", Engine::kCopyEngine, 0, kHost, {55})});
  std::string csv = reports::render_probe_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("probe,what,engine,src,dst", 0), 0u);
  EXPECT_NE(csv.find("h2d,D2H,CE,GPU0,host,0,536870912,8,GB/s,1,55"), std::string::npos) << csv;
}

TEST(ProbeText, IpcRanksSharingAGpuAreShownByRankAndLabelledMeaningless) {
  Measurement m = bandwidth("ipc", "write", Engine::kCopyEngine, 0, 0, {100});
  m.src_rank = 0;
  m.dst_rank = 1;
  Measurement back = m;
  back.src_rank = 1;
  back.dst_rank = 0;
  back.samples = {200};
  back.summary = measure::summarize(back.samples);
  auto r = dgx_report({m, back});
  std::string text = reports::render_probe_text(r);
  EXPECT_NE(text.find("rank0"), std::string::npos) << text;
  EXPECT_NE(text.find("mean nothing"), std::string::npos);
  EXPECT_NE(text.find("100.0"), std::string::npos);
  EXPECT_NE(text.find("200.0"), std::string::npos);
}

TEST(Verdict, BidirectionalSmCopiesAreShownButNotJudged) {
  Measurement m = make_measurement("h2d", "H2D while D2H", Engine::kSm, kHost, 0, true,
                                   512ull << 20, 8, "GB/s", {34.6});
  m.expected = 57.2;
  Verdict v = judge(m);
  EXPECT_NEAR(v.percent, 60.5, 0.1);
  EXPECT_FALSE(v.judged);
  EXPECT_FALSE(v.low);
  m.engine = Engine::kCopyEngine;  // the copy engines are the link test: judged
  EXPECT_TRUE(judge(m).low);
}

TEST(IpcBlocker, APairWithoutP2pAmongTheRanksRulesIpcOut) {
  EXPECT_EQ(ipc_blocker({0, 1, 2, 3}, {{1, 3}}),
            "GPU 1 and GPU 3 have no P2P, which CUDA IPC needs");
  EXPECT_EQ(ipc_blocker({0, 1}, {{2, 3}}), "");  // the refused pair is not among the ranks
  EXPECT_EQ(ipc_blocker({0, 0, 0}, {}), "");
}

// Every verdict a figure can get says what to do next, for the link it measured.
TEST(ProbeText, EveryVerdictEndsWithWhatToDoNext) {
  auto r = dgx_report({bandwidth("h2d", "H2D", Engine::kCopyEngine, kHost, 2, {20, 21, 22}),
                       bandwidth("p2p", "write", Engine::kCopyEngine, 0, 5, {100, 101, 102}),
                       bandwidth("p2p", "write", Engine::kCopyEngine, 1, 3, {470, 471, 472}),
                       bandwidth("p2p", "write", Engine::kCopyEngine, 3, 1, {390, 391, 392})});
  const std::string text = reports::render_probe_text(r);
  const nlohmann::json doc = reports::probe_to_json(r);
  int judged = 0;
  for (size_t i = 0; i < r.measurements.size(); ++i) {
    const Measurement& m = r.measurements[i];
    const std::string sentence = reports::verdict_sentence(m);
    const std::string advice = reports::verdict_advice(m);
    if (sentence.empty()) {
      EXPECT_TRUE(advice.empty()) << advice;
      EXPECT_TRUE(doc["measurements"][i]["advice"].is_null());
      continue;
    }
    ++judged;
    next_step::expect_next_step(advice, sentence);
    EXPECT_NE(text.find("  " + sentence + "\n      what to do: " + advice + "\n"),
              std::string::npos)
        << text;
    EXPECT_EQ(doc["measurements"][i]["advice"], advice);
  }
  EXPECT_EQ(judged, 3);
  // The host link is GPU2's PCIe; the pair's is its path; above spec questions the expectation.
  EXPECT_NE(reports::verdict_advice(r.measurements[0]).find("check GPU2's PCIe link"),
            std::string::npos);
  EXPECT_NE(reports::verdict_advice(r.measurements[1])
                .find("check the path between GPU0 and GPU5 in `commtool topo`"),
            std::string::npos);
  EXPECT_NE(reports::verdict_advice(r.measurements[2]).find("compare the link commtool assumed"),
            std::string::npos);
}
