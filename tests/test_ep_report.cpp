// diagnose ep's figures and diagnosis on hand-made routings and times: what a user reads must
// follow from the matrices and the measurements exactly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "next_step_checks.hpp"
#include "reports/ep/ep_report.hpp"
#include "reports/ep/ep_words.hpp"
#include "synthetic_records.hpp"
#include "tracing/ep/ep_plan.hpp"

using namespace commtool;
using namespace commtool::reports;
using namespace commtool::tracing;

namespace {

// 2 ranks, 4 experts (rank 0 holds 0 and 1, rank 1 holds 2 and 3), top-1, 4 tokens per rank:
// expert 0 gets 6 of the 8 selections, expert 3 none.
EpSetup skewed_setup(int replicate) {
  EpSetup s;
  s.config.ranks = 2;
  s.config.tokens_per_rank = 4;
  s.config.hidden = 512;
  s.config.experts = 4;
  s.config.topk = 1;
  const RoutingCounts counts =
      parse_routing_counts(R"({"tokens_per_rank": 4, "topk": 1, "counts": [6, 1, 1, 0]})", "t");
  s.routing = routing_from_counts(counts, 0, 2, 4, 1);
  s.routing_source = "file t, layer 0";
  s.placement = contiguous_placement(4, 2);
  s.placement_source = "contiguous";
  const TokenBytes bytes = token_bytes(s.config);
  s.traffic = ep_traffic(dispatch_matrix(s.routing, s.placement), bytes);
  s.metrics = ep_metrics(s.routing, s.placement, s.traffic);
  s.replicate = replicate;
  if (replicate > 0) s.replication = plan_replication(s.routing, s.placement, replicate, bytes);
  return s;
}

PhaseTimes times(std::vector<std::vector<double>> rank_us) {
  PhaseTimes t;
  t.rank_us = std::move(rank_us);
  t.slowest_us = commtool::measure::slowest_per_operation(t.rank_us);
  return t;
}

// Routed dispatch `routed_us` per operation at rank 0 (the busiest), uniform 10 us, replicated
// `replicated_us`; combine 10 us everywhere.
EpMeasurement measurement(double routed_us, double replicated_us) {
  EpMeasurement m;
  m.nranks = 2;
  m.gpus = {"GPU 0", "GPU 1"};
  auto scenario = [](EpScenarioKind kind, double rank0_us) {
    EpScenarioTimes s;
    s.kind = kind;
    s.dispatch = times({{rank0_us, rank0_us, rank0_us}, {5, 5, 5}});
    s.combine = times({{10, 10, 10}, {10, 10, 10}});
    return s;
  };
  m.scenarios = {scenario(EpScenarioKind::kRouted, routed_us),
                 scenario(EpScenarioKind::kUniform, 10),
                 scenario(EpScenarioKind::kReplicated, replicated_us)};
  return m;
}

// A finding as one line, "[code] message | evidence", for searching and failure messages.
std::string line(const EpFinding& f) {
  return "[" + f.code + "] " + f.message + " | " + f.evidence;
}

bool has(const std::vector<EpFinding>& findings, const std::string& text) {
  return std::any_of(findings.begin(), findings.end(),
                     [&](const EpFinding& f) { return line(f).find(text) != std::string::npos; });
}

std::string all(const std::vector<EpFinding>& findings) {
  std::string out;
  for (const EpFinding& f : findings)
    out += line(f) + "\n";
  return out;
}

// The finding with `code`, or null.
const EpFinding* with_code(const std::vector<EpFinding>& findings, const std::string& code) {
  auto it = std::find_if(findings.begin(), findings.end(),
                         [&](const EpFinding& f) { return f.code == code; });
  return it == findings.end() ? nullptr : &*it;
}

// One rank's measured exchange: every token stays on it.
EpMeasurement one_rank_measurement() {
  EpMeasurement m;
  m.nranks = 1;
  m.gpus = {"GPU 0"};
  for (EpScenarioKind kind : {EpScenarioKind::kRouted, EpScenarioKind::kUniform}) {
    EpScenarioTimes t;
    t.kind = kind;
    t.dispatch = times({{7, 7}});
    t.combine = times({{6, 6}});
    m.scenarios.push_back(t);
  }
  return m;
}

}  // namespace

TEST(EpReport, PhaseFiguresCountBytesBetweenRanksAndTheBottleneck) {
  // Rank 0 receives 20 from rank 1, rank 1 receives 30 from rank 0; the diagonal stays local.
  const ByteMatrix m = {{10, 30}, {20, 40}};
  const PhaseFigures p = phase_figures(m, times({{1, 2, 3}, {4, 1, 1}}));
  EXPECT_EQ(p.bytes, 100u);
  EXPECT_EQ(p.moved_bytes, 50u);
  EXPECT_EQ(p.bottleneck_rank, 1);
  EXPECT_EQ(p.bottleneck_bytes, 30u);
  EXPECT_DOUBLE_EQ(p.time_us.median, 3.0);  // slowest per operation: 4, 2, 3
  EXPECT_DOUBLE_EQ(p.effective_gbps, 50.0 / 3e3);
  EXPECT_DOUBLE_EQ(p.bottleneck_gbps, 30.0 / 3e3);
  EXPECT_EQ(p.slowest_rank, 0);  // rank medians 2 and 1
}

TEST(EpReport, DryRunNamesTheBusiestRankHotAndDeadExpertsAndThePlan) {
  const EpSetup s = skewed_setup(1);
  const EpDiagnosis d = diagnose_ep(s, nullptr);
  EXPECT_TRUE(d.scenarios.empty());
  // Per selection (a counts file): rank 0 receives 7 of 8, imbalance 7/4 - 1.
  EXPECT_TRUE(has(d.findings, "rank 0 receives 87.5% of the dispatched tokens")) << all(d.findings);
  EXPECT_TRUE(has(d.findings, "imbalance 0.75")) << all(d.findings);
  EXPECT_TRUE(has(d.findings,
                  "1 hot expert (over 2x the mean expert's 25.00% of selections) | "
                  "expert (share, holders): 0 (75.0%, rank 0)"))
      << all(d.findings);
  EXPECT_TRUE(has(d.findings, "1 of 4 experts got no token (dead) | experts with 0 selections: 3"))
      << all(d.findings);
  EXPECT_TRUE(has(d.findings, "dispatch counted per selection")) << all(d.findings);
  EXPECT_TRUE(has(d.findings, "expert 0 also on rank 1")) << all(d.findings);
  EXPECT_TRUE(has(d.findings, "(planned; --dry-run measures nothing)")) << all(d.findings);
}

TEST(EpReport, MeasuredSkewGivesTheHeadlineWithItsEvidence) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = measurement(20, 12);
  const EpDiagnosis d = diagnose_ep(s, &m);
  ASSERT_EQ(d.scenarios.size(), 3u);
  EXPECT_EQ(line(d.findings.front()),
            "[skew-slowdown] rank 0 holds expert 0 which gets 75% of selections: dispatch takes "
            "2.00x the uniform time; replicating the top 1 expert brings it to 1.20x | dispatch "
            "median 20.0 us routed, 10.0 us uniform (the same bytes spread evenly)");
  EXPECT_TRUE(has(d.findings, "dispatch: 50% of the time is lost to the skew")) << all(d.findings);
  // Combine took the uniform time: nothing to blame on the skew there.
  EXPECT_TRUE(has(d.findings, "combine: the skew costs nothing measurable | 1.00x"))
      << all(d.findings);
  EXPECT_TRUE(has(d.findings,
                  "straggler: rank 0, the rank that receives the most tokens | its dispatch "
                  "median 20.0 us, the other ranks' median 5.0 us"))
      << all(d.findings);
}

TEST(EpReport, UniformTrafficIsMeasuredOnTheUniformMatrix) {
  const EpSetup s = skewed_setup(0);
  const EpMeasurement m = measurement(20, 12);
  const EpDiagnosis d = diagnose_ep(s, &m);
  const ScenarioFigures& uniform = d.scenarios[1];
  ASSERT_EQ(uniform.kind, EpScenarioKind::kUniform);
  // The same total, spread over the 4 pairs: half of it crosses between the two ranks.
  EXPECT_EQ(uniform.dispatch.bytes, matrix_total(s.traffic.dispatch_bytes));
  EXPECT_EQ(uniform.dispatch.moved_bytes, uniform.dispatch.bytes / 2);
}

TEST(EpReport, OneRankSaysTheExchangeIsALocalCopy) {
  EpSetup s;
  s.config.ranks = 1;
  s.config.experts = 8;
  s.config.topk = 2;
  s.config.tokens_per_rank = 64;
  s.routing = generate_routing(s.config);
  s.placement = contiguous_placement(8, 1);
  s.traffic = ep_traffic(dispatch_matrix(s.routing, s.placement), token_bytes(s.config));
  s.metrics = ep_metrics(s.routing, s.placement, s.traffic);
  const EpMeasurement m = one_rank_measurement();
  const EpDiagnosis d = diagnose_ep(s, &m);
  EXPECT_TRUE(has(d.findings, "one rank: every token stays on it")) << all(d.findings);
  EXPECT_TRUE(has(d.findings, "say nothing about the links")) << all(d.findings);
  EXPECT_FALSE(has(d.findings, "uniform time")) << all(d.findings);
}

TEST(EpReport, JsonAndHeatMapCarryTheMatrix) {
  const EpSetup s = skewed_setup(1);
  const EpDiagnosis d = diagnose_ep(s, nullptr);
  const std::string json = ep_json(s, d, nullptr);
  EXPECT_NE(json.find("\"schema_version\": 1"), std::string::npos);
  EXPECT_NE(json.find("\"measured\": false"), std::string::npos);
  EXPECT_NE(json.find("\"replication\""), std::string::npos);
  const std::string svg = ep_heat_map_svg(s);
  size_t cells = 0;
  for (size_t at = svg.find("class=\"cell\""); at != std::string::npos;
       at = svg.find("class=\"cell\"", at + 1))
    ++cells;
  EXPECT_EQ(cells, 4u);
  EXPECT_NE(svg.find("src 0 -&gt; dst 0"), std::string::npos);
}

// --trace: the split is its own section of the text (every traffic and phase, then the routed
// traffic per rank) and of the JSON; an untraced run has neither.
TEST(EpReport, TracedRunAddsTheSplitToTextAndJson) {
  const EpSetup s = skewed_setup(1);
  EpMeasurement m = measurement(20, 12);
  const EpDiagnosis untraced = diagnose_ep(s, &m);
  EXPECT_FALSE(untraced.split.has_value());
  EXPECT_EQ(ep_text(s, untraced, &m).find("CUPTI split"), std::string::npos);
  EXPECT_NE(ep_json(s, untraced, &m).find("\"split\": null"), std::string::npos);

  synthetic_records::add_ep_traces(m, 3, 500, 1000, 25.0);
  const EpDiagnosis d = diagnose_ep(s, &m);
  ASSERT_TRUE(d.split.has_value());
  EXPECT_EQ(d.split->rows.size(), 6u);  // three traffics, two phases
  const std::string text = ep_text(s, d, &m);
  EXPECT_NE(text.find("CUPTI split (--trace"), std::string::npos) << text;
  EXPECT_NE(text.find("Per rank, routed traffic"), std::string::npos) << text;
  EXPECT_NE(text.find("dispatch start lag us  combine enqueue us"), std::string::npos) << text;
  EXPECT_NE(text.find("  1     0.1                  3.0                 0.5"), std::string::npos)
      << text;
  // 25 us traced against the routed dispatch's 20 us untraced median: tracing's cost is said.
  EXPECT_NE(text.find("tracing slowed routed dispatch x1.25"), std::string::npos) << text;
  const nlohmann::json doc = nlohmann::json::parse(ep_json(s, d, &m));
  ASSERT_EQ(doc.at("split").at("rows").size(), 6u);
  EXPECT_DOUBLE_EQ(doc.at("split").at("rows")[0].at("rank_start_lag_us")[1].get<double>(), 0.5);
}

// --- Ranks sharing a GPU: times of time-sliced processes, no verdict from them ---

namespace {

// The skewed measurement of 2 ranks, both on one GPU.
EpMeasurement shared_gpu_measurement() {
  EpMeasurement m = measurement(20, 12);
  m.placement = workers::PlacementSummary{2, 1, 2};
  return m;
}

int count(const std::vector<EpFinding>& findings, const std::string& text) {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(), [&](const EpFinding& f) {
    return line(f).find(text) != std::string::npos;
  }));
}

}  // namespace

TEST(EpReportSharedGpu, FindingsWithholdTheTimeComparisonsInOneLine) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = shared_gpu_measurement();
  const EpDiagnosis d = diagnose_ep(s, &m);
  EXPECT_EQ(count(d.findings, "withheld"), 1) << all(d.findings);
}

TEST(EpReportSharedGpu, FindingsSayNothingOfTimeLostToTheSkew) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = shared_gpu_measurement();
  const EpDiagnosis d = diagnose_ep(s, &m);
  EXPECT_FALSE(has(d.findings, "lost to the skew")) << all(d.findings);
  EXPECT_FALSE(has(d.findings, "the skew costs nothing measurable")) << all(d.findings);
}

TEST(EpReportSharedGpu, FindingsNameNoStraggler) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = shared_gpu_measurement();
  const EpDiagnosis d = diagnose_ep(s, &m);
  EXPECT_FALSE(has(d.findings, "straggler: rank")) << all(d.findings);
}

TEST(EpReportSharedGpu, SameMeasurementOnGpusOfTheirOwnDoesNameTheStraggler) {
  // The control for the two tests above: only the placement differs.
  const EpSetup s = skewed_setup(1);
  EpMeasurement m = shared_gpu_measurement();
  m.placement = workers::PlacementSummary{2, 2, 1};
  const EpDiagnosis d = diagnose_ep(s, &m);
  EXPECT_TRUE(has(d.findings, "straggler: rank 0")) << all(d.findings);
}

TEST(EpReportSharedGpu, TextStartsWithTheSharedGpuLabel) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = shared_gpu_measurement();
  const std::string text = ep_text(s, diagnose_ep(s, &m), &m);
  EXPECT_EQ(text.rfind("SHARED GPU: 2 ranks on 1 GPU", 0), 0u) << text;
}

TEST(EpReportSharedGpu, JsonHasTheRankPlacement) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = shared_gpu_measurement();
  const nlohmann::json doc = nlohmann::json::parse(ep_json(s, diagnose_ep(s, &m), &m));
  EXPECT_EQ(doc.at("rank_placement"),
            nlohmann::json(
                {{"ranks", 2}, {"gpus", 1}, {"shared_gpu", true}, {"most_ranks_on_a_gpu", 2}}));
}

TEST(EpReport, JsonCarriesTheCommunicatorMode) {
  const EpSetup s = skewed_setup(1);
  EpMeasurement m = measurement(20, 12);
  m.comm = nccl::CommMode::kNonBlocking;
  const nlohmann::json doc = nlohmann::json::parse(ep_json(s, diagnose_ep(s, &m), &m));
  EXPECT_EQ(doc.at("comm"), "nonblocking");
}

// Findings have topo's shape: a stable code, a severity, the message and its evidence apart.
TEST(EpReport, FindingsCarryCodeSeverityMessageAndEvidence) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = measurement(20, 12);
  const EpDiagnosis d = diagnose_ep(s, &m);
  struct Expected {
    const char* code;
    EpSeverity severity;
  };
  for (const Expected& e :
       {Expected{"skew-slowdown", EpSeverity::kWarning},
        Expected{"skew-cost", EpSeverity::kWarning}, Expected{"no-skew-cost", EpSeverity::kNote},
        Expected{"straggler", EpSeverity::kNote}, Expected{"rank-imbalance", EpSeverity::kWarning},
        Expected{"hot-experts", EpSeverity::kWarning},
        Expected{"dead-experts", EpSeverity::kWarning},
        Expected{"dispatch-per-selection", EpSeverity::kNote},
        Expected{"replication-what-if", EpSeverity::kNote}}) {
    const EpFinding* f = with_code(d.findings, e.code);
    ASSERT_NE(f, nullptr) << e.code << "\n" << all(d.findings);
    EXPECT_EQ(f->severity, e.severity) << line(*f);
    EXPECT_FALSE(f->message.empty()) << line(*f);
    EXPECT_FALSE(f->evidence.empty()) << line(*f);
  }
}

TEST(EpReport, BalancedRoutingIsANoteAndNoHotExpertSaysWhichIsBusiest) {
  EpSetup s = skewed_setup(0);
  s.metrics.imbalance = 0.19;
  s.metrics.hot.clear();
  const EpDiagnosis d = diagnose_ep(s, nullptr);
  const EpFinding* balance = with_code(d.findings, "rank-imbalance");
  ASSERT_NE(balance, nullptr) << all(d.findings);
  EXPECT_EQ(balance->severity, EpSeverity::kNote);
  const EpFinding* none = with_code(d.findings, "no-hot-expert");
  ASSERT_NE(none, nullptr) << all(d.findings);
  EXPECT_EQ(none->evidence,
            "the busiest, expert 0, gets 75.00% of selections; the mean expert 25.00%");
}

TEST(EpReport, JsonFindingsHaveCodeSeverityMessageAndEvidence) {
  const EpSetup s = skewed_setup(1);
  const nlohmann::json doc = nlohmann::json::parse(ep_json(s, diagnose_ep(s, nullptr), nullptr));
  ASSERT_FALSE(doc.at("findings").empty());
  const nlohmann::json& first = doc.at("findings")[0];
  EXPECT_EQ(first.at("code"), "rank-imbalance");
  EXPECT_EQ(first.at("severity"), "warning");
  EXPECT_EQ(first.at("message"),
            "rank 0 receives 87.5% of the dispatched tokens (an even share is 50.0%)");
  EXPECT_EQ(first.at("evidence").get<std::string>().rfind("imbalance 0.75", 0), 0u);
  for (const nlohmann::json& f : doc.at("findings")) {
    EXPECT_EQ(f.size(), 5u) << f;
    EXPECT_FALSE(f.at("advice").get<std::string>().empty()) << f;
    EXPECT_TRUE(f.at("severity") == "warning" || f.at("severity") == "note") << f;
  }
}

TEST(EpReport, TextTagsEachFindingAsTopoDoesWithItsEvidenceUnderIt) {
  const EpSetup s = skewed_setup(1);
  const std::string text = ep_text(s, diagnose_ep(s, nullptr), nullptr);
  EXPECT_NE(text.find("\nDiagnosis\n  WARNING [rank-imbalance] rank 0 receives 87.5% of the "
                      "dispatched tokens (an even share is 50.0%)\n      evidence: imbalance 0.75"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  note [replication-what-if] what-if (EPLB-style) expert 0 also on rank "
                      "1\n      evidence: imbalance 0.75 -> "),
            std::string::npos)
      << text;
}

// --- What to do next: every finding says it, for its evidence ---

namespace {

// Every code diagnose_ep can give (the split's host-bound-exchange is test_ep_split.cpp's).
const std::set<std::string> kEpCodes = {"one-rank",
                                        "rank-imbalance",
                                        "no-hot-expert",
                                        "hot-experts",
                                        "dead-experts",
                                        "few-selections",
                                        "dispatch-per-selection",
                                        "skew-slowdown",
                                        "no-skew-cost",
                                        "skew-cost",
                                        "straggler",
                                        "one-rank-measured",
                                        "verdicts-withheld",
                                        "replication-nowhere",
                                        "replication-what-if"};

EpSetup generated(int ranks, int tokens, int experts, int topk, const std::string& skew,
                  uint64_t seed, int replicate = 0) {
  EpPlanRequest q;
  q.config.ranks = ranks;
  q.config.tokens_per_rank = tokens;
  q.config.hidden = 64;
  q.config.experts = experts;
  q.config.topk = topk;
  q.config.skew = parse_skew(skew);
  q.config.seed = seed;
  q.replicate = replicate;
  return plan_ep(q);
}

}  // namespace

TEST(EpReport, EveryFindingEndsWithWhatToDoNext) {
  std::set<std::string> seen;
  const auto check = [&](const EpSetup& s, const EpMeasurement* m, const std::string& where) {
    const EpDiagnosis d = diagnose_ep(s, m);
    for (const EpFinding& f : d.findings) {
      EXPECT_TRUE(kEpCodes.contains(f.code))
          << where << ": a code the test does not know: " << line(f);
      next_step::expect_next_step(f.advice, where + ": " + f.code);
      seen.insert(f.code);
    }
    // The text gives it under each finding, the JSON as "advice".
    const std::string text = ep_text(s, d, m);
    const nlohmann::json doc = nlohmann::json::parse(ep_json(s, d, m));
    for (size_t i = 0; i < d.findings.size(); ++i) {
      EXPECT_NE(text.find("\n      what to do: " + d.findings[i].advice + "\n"), std::string::npos)
          << where << "\n"
          << text;
      EXPECT_EQ(doc.at("findings")[i].at("advice"), d.findings[i].advice) << where;
    }
  };
  check(skewed_setup(1), nullptr, "skewed dry run");
  const EpMeasurement skewed = measurement(20, 12);
  check(skewed_setup(1), &skewed, "skewed, measured");
  const EpMeasurement even = measurement(10, 10);
  check(skewed_setup(0), &even, "skewed, costing nothing");
  const EpMeasurement shared = shared_gpu_measurement();
  check(skewed_setup(1), &shared, "ranks sharing a GPU");
  EpSetup one = generated(1, 64, 8, 2, "uniform", 1, 1);
  check(one, nullptr, "one rank, dry run");
  const EpMeasurement one_measured = one_rank_measurement();
  check(one, &one_measured, "one rank, measured");
  check(generated(8, 4, 256, 8, "uniform", 1), nullptr, "generated, few tokens");
  for (const std::string& code : kEpCodes)
    EXPECT_TRUE(seen.contains(code)) << code << " was never made: the test misses a case";
}

TEST(EpReport, NextStepsNameTheRanksAndExpertsOfTheEvidence) {
  const EpSetup s = skewed_setup(1);
  const EpMeasurement m = measurement(20, 12);
  const EpDiagnosis d = diagnose_ep(s, &m);
  // Rank 0 receives the most; its busiest expert is 0; rank 1 receives the least.
  // The plan of --replicate 1 evens the two ranks out: that is the step.
  EXPECT_EQ(with_code(d.findings, "rank-imbalance")->advice,
            "the --replicate 1 plan below brings the imbalance to 0.00: put its replicas in the "
            "model's expert placement (EPLB's replica map)");
  EXPECT_EQ(
      with_code(d.findings, "hot-experts")
          ->advice.rfind(
              "the --replicate 1 plan below gives expert 0 a replica: see the imbalance it "
              "leaves; in training, a router this skewed also points at the load-balancing loss",
              0),
      0u)
      << with_code(d.findings, "hot-experts")->advice;
  // Without the plan: which experts, to where.
  const EpSetup plain = skewed_setup(0);
  const EpDiagnosis p = diagnose_ep(plain, nullptr);
  EXPECT_EQ(with_code(p.findings, "rank-imbalance")->advice,
            "spread rank 0's load: replicate its busiest experts 0 and 1 on other ranks "
            "(--replicate 2 plans it, EPLB-style, and prints the imbalance left), or move one to "
            "rank 1, which receives the least, with a --placement file");
  EXPECT_EQ(with_code(p.findings, "hot-experts")
                ->advice.rfind("give expert 0 a replica on other "
                               "ranks (--replicate 1 plans it",
                               0),
            0u)
      << with_code(p.findings, "hot-experts")->advice;
  // Measured, the replicated plan brings the dispatch from 2.00x to 1.20x: that is the step.
  EXPECT_EQ(with_code(d.findings, "skew-slowdown")->advice,
            "replicate expert 0 as the plan does (EPLB-style, in the model's expert placement): "
            "measured, it takes the dispatch from 2.00x to 1.20x the uniform time");
  // The straggler is the busiest rank: its load, not its GPU.
  EXPECT_EQ(with_code(d.findings, "straggler")->advice.rfind("expected of the rank", 0), 0u);
}

TEST(EpReport, AStragglerThatIsNotTheBusiestRankPointsAtItsGpu) {
  const EpSetup s = skewed_setup(0);  // rank 0 receives the most
  EpMeasurement m = measurement(10, 10);
  m.gpus = {"GPU 0 (0000:00:06.0, NVIDIA H200)", "GPU 1 (0000:00:07.0, NVIDIA H200)"};
  for (EpScenarioTimes& t : m.scenarios)
    t.dispatch = times({{4, 4, 4}, {12, 12, 12}});  // rank 1 is the slow one
  const EpDiagnosis d = diagnose_ep(s, &m);
  const EpFinding* f = with_code(d.findings, "straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("rank 1 (GPU 1 (0000:00:07.0, NVIDIA H200)) is slow with no more to "
                           "receive than the others"),
            std::string::npos)
      << f->advice;
  next_step::expect_next_step(f->advice, "straggler");
}

// --- Rank imbalance: a generated routing's own noise is no finding ---

// The noise of a generated routing that favours no rank never crosses the bound, from DeepSeek-V3's
// defaults down to a token per rank, at many seeds; a skewed routing still crosses it.
TEST(EpReport, UniformRoutingGivesNoRankImbalanceFindingAtAnySeed) {
  struct Case {
    int ranks, tokens, experts, topk, seeds;
  };
  for (const Case& c :
       {Case{8, 4096, 256, 8, 20}, Case{8, 16, 256, 8, 300}, Case{8, 1, 256, 8, 300},
        Case{2, 1, 8, 2, 300}, Case{4, 128, 16, 1, 300}, Case{16, 64, 64, 4, 300},
        Case{64, 32, 256, 8, 50}, Case{3, 256, 30, 2, 300}}) {
    double worst = 0;
    for (int seed = 1; seed <= c.seeds; ++seed) {
      const EpSetup s =
          generated(c.ranks, c.tokens, c.experts, c.topk, "uniform", static_cast<uint64_t>(seed));
      worst = std::max(worst, s.metrics.imbalance / ep_words::imbalance_noise(s));
      const EpDiagnosis d = diagnose_ep(s, nullptr);
      EXPECT_EQ(with_code(d.findings, "rank-imbalance"), nullptr)
          << c.ranks << " ranks, " << c.tokens << " tokens, " << c.experts << " experts, top-"
          << c.topk << ", seed " << seed << ": imbalance " << s.metrics.imbalance << ", bound "
          << ep_words::imbalance_noise(s);
    }
    // Not even close: the worst seed stays well inside the bound.
    EXPECT_LT(worst, 0.8) << c.ranks << " ranks, " << c.tokens << " tokens";
  }
}

TEST(EpReport, SkewedRoutingStillGivesARankImbalanceFinding) {
  for (const std::string skew : {"hot:8:0.5", "zipf:1.2"}) {
    for (uint64_t seed : {1, 2, 3}) {
      const EpSetup s = generated(8, 4096, 256, 8, skew, seed);
      const EpDiagnosis d = diagnose_ep(s, nullptr);
      const EpFinding* f = with_code(d.findings, "rank-imbalance");
      ASSERT_NE(f, nullptr) << skew << " seed " << seed;
      EXPECT_EQ(f->severity, EpSeverity::kWarning) << skew << ": " << line(*f);
      EXPECT_NE(f->evidence.find("sampling noise explains up to 0.0"), std::string::npos)
          << line(*f);
    }
  }
  // Skewed at a few tokens: still above the (larger) noise there.
  const EpSetup small = generated(8, 64, 256, 8, "hot:8:0.5", 1);
  const EpDiagnosis small_d = diagnose_ep(small, nullptr);
  EXPECT_NE(with_code(small_d.findings, "rank-imbalance"), nullptr)
      << small.metrics.imbalance << " against " << ep_words::imbalance_noise(small);
}

// --- Hot and dead experts: a generated routing's own draws are no finding either ---

// At a few selections per expert, a routing that favours no expert already leaves experts
// unpicked and some over twice the mean: one note says so, no hot or dead warning; at a real
// batch neither appears, and no note.
TEST(EpReport, UniformRoutingGivesNoHotOrDeadExpertAtAnySeed) {
  struct Case {
    int ranks, tokens, experts, topk;
    bool few;  // whether chance explains what the draw shows
  };
  for (const Case& c :
       {Case{8, 4, 256, 8, true}, Case{8, 1, 256, 8, true}, Case{2, 16, 64, 2, true},
        Case{8, 4096, 256, 8, false}, Case{4, 512, 16, 1, false}}) {
    int notes = 0;
    for (uint64_t seed = 1; seed <= 100; ++seed) {
      const EpSetup s = generated(c.ranks, c.tokens, c.experts, c.topk, "uniform", seed);
      const EpDiagnosis d = diagnose_ep(s, nullptr);
      const std::string where = fmt::format("{} ranks, {} tokens, {} experts, top-{}, seed {}",
                                            c.ranks, c.tokens, c.experts, c.topk, seed);
      EXPECT_EQ(with_code(d.findings, "hot-experts"), nullptr) << where << "\n" << all(d.findings);
      EXPECT_EQ(with_code(d.findings, "dead-experts"), nullptr) << where << "\n" << all(d.findings);
      const EpFinding* few = with_code(d.findings, "few-selections");
      if (few != nullptr) {
        ++notes;
        EXPECT_EQ(few->severity, EpSeverity::kNote) << line(*few);
        next_step::expect_next_step(few->advice, "few-selections");
      }
      if (!c.few) {
        EXPECT_EQ(few, nullptr) << where << ": " << line(*few);
      }
    }
    // At a few selections per expert some seed always shows what chance does.
    if (c.few) {
      EXPECT_GT(notes, 50) << c.ranks << " ranks, " << c.tokens << " tokens";
    }
  }
}

TEST(EpReport, SkewedRoutingStillGivesHotExpertsAtFewTokens) {
  // hot:4:0.6 at top-8: experts 0-3 draw far past chance even at 16 tokens per rank.
  const EpSetup s = generated(8, 16, 256, 8, "hot:4:0.6", 1);
  const EpDiagnosis d = diagnose_ep(s, nullptr);
  const EpFinding* hot = with_code(d.findings, "hot-experts");
  ASSERT_NE(hot, nullptr) << all(d.findings);
  EXPECT_EQ(hot->severity, EpSeverity::kWarning);
  EXPECT_EQ(hot->message.rfind("4 hot experts", 0), 0u) << line(*hot);
  // The other 252 share 40% of the draws, less than uniform's each: more of them go unpicked
  // (24) than chance leaves at these counts (up to 19), which is the skew's doing.
  const EpFinding* dead = with_code(d.findings, "dead-experts");
  ASSERT_NE(dead, nullptr) << all(d.findings);
  EXPECT_EQ(dead->message, "24 of 256 experts got no token (dead)");
  EXPECT_NE(dead->advice.find("(up to 19)"), std::string::npos) << dead->advice;
  // A fifth expert over 2x the mean is what chance gives: said once, as a note, not as hot.
  const EpFinding* few = with_code(d.findings, "few-selections");
  ASSERT_NE(few, nullptr) << all(d.findings);
  EXPECT_NE(few->message.find(": 1 expert over 2x the mean is what"), std::string::npos)
      << line(*few);
}

TEST(EpReport, TheExpertNoiseBoundsAtDeepSeekV3DefaultsAndForACountsFile) {
  const ep_words::ExpertNoise n = ep_words::expert_noise(generated(8, 4096, 256, 8, "uniform", 1));
  EXPECT_TRUE(n.generated);
  EXPECT_DOUBLE_EQ(n.mean, 1024.0);
  EXPECT_GT(n.hot_above, 1024.0 + 150);
  EXPECT_LT(n.hot_above, 2 * 1024.0);  // a hot expert is never chance here
  EXPECT_EQ(n.dead_up_to, 0);
  // 32 tokens x top-8 over 256 experts: 92.7 unpicked expected, a few dozen more possible.
  const ep_words::ExpertNoise few = ep_words::expert_noise(generated(8, 4, 256, 8, "uniform", 1));
  EXPECT_GT(few.dead_up_to, 93);
  EXPECT_LT(few.dead_up_to, 160);
  EXPECT_FALSE(ep_words::expert_noise(skewed_setup(0)).generated);
}

TEST(EpReport, TheNoiseBoundShrinksWithTheTokensAndIsNoneForACountsFile) {
  const double at_16 = ep_words::imbalance_noise(generated(8, 16, 256, 8, "uniform", 1));
  const double at_4096 = ep_words::imbalance_noise(generated(8, 4096, 256, 8, "uniform", 1));
  EXPECT_GT(at_16, 10 * at_4096);
  EXPECT_NEAR(at_4096, 0.023, 0.002);
  // A file's counts are the model's: their imbalance is that batch's, not commtool's noise.
  EXPECT_EQ(ep_words::imbalance_noise(skewed_setup(0)), 0.0);
}
