// What diagnose allreduce withholds or qualifies: a recommendation where no difference can be
// real, a forced setting NCCL did not run, and a measured sweep's drift and notes.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "allreduce_test_support.hpp"
#include "reports/allreduce/allreduce_diagnosis.hpp"

using namespace commtool;
using namespace commtool::reports;
using namespace allreduce_test;

namespace {

// What NCCL's profiler plugin saw: several ways, or none with a reason.
NcclChoice ways(std::vector<NcclWay> w) {
  return {std::move(w), ""};
}
NcclChoice unknown(std::string why) {
  return {{}, std::move(why)};
}

std::string mismatch(const AllReducePath& path, const NcclChoice& ran) {
  return forced_setting_mismatch(path, ok(4 * KiB, 10, ran));
}

AllReduceSweep at_placement(AllReduceSweep s, workers::PlacementSummary placement) {
  s.placement = placement;
  return s;
}

}  // namespace

// Where no difference can be real, and a forced setting NCCL did not run.

TEST(RecommendationWithheld, OneRankSaysNcclAlgoChangesNothing) {
  const std::string why = recommendation_withheld({1, 1, 1});
  EXPECT_TRUE(why.starts_with("withheld: at one rank")) << why;
  EXPECT_TRUE(why.find("NCCL_ALGO") != std::string::npos) << why;
}

TEST(RecommendationWithheld, RanksSharingAGpuAreWithheld) {
  const std::string why = recommendation_withheld({4, 1, 4});
  EXPECT_TRUE(why.starts_with("withheld: 4 ranks share 1 GPU(s)")) << why;
}

TEST(RecommendationWithheld, OneRankPerGpuIsNotWithheld) {
  EXPECT_EQ(recommendation_withheld({8, 8, 1}), "");
}

TEST(DiagnoseAllReduce, OneRankGivesOneWithheldLineInsteadOfARecommendation) {
  const AllReduceDiagnosis d = diagnose_allreduce(at_placement(clean_crossover(), {1, 1, 1}));
  ASSERT_EQ(d.recommendation.size(), 1u);
  EXPECT_TRUE(d.recommendation[0].starts_with("withheld")) << d.recommendation[0];
  EXPECT_EQ(d.withheld, d.recommendation[0]);
}

TEST(DiagnoseAllReduce, OneRankMovesNoCrossover) {
  ASSERT_FALSE(diagnose_allreduce(clean_crossover()).crossovers.empty());
  const AllReduceDiagnosis d = diagnose_allreduce(at_placement(clean_crossover(), {1, 1, 1}));
  EXPECT_TRUE(d.crossovers.empty());
  EXPECT_TRUE(d.ranges.empty());
}

TEST(ForcedSetting, DefaultPathIsNeverAMismatch) {
  EXPECT_EQ(mismatch(nccl_default({}), unknown("")), "");
}

TEST(ForcedSetting, IpcPathIsNeverAMismatch) {
  EXPECT_EQ(mismatch(one_shot({}), {}), "");
}

TEST(ForcedSetting, WhatRanIsComparedWithoutCase) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "LL", {}), ran("RING", "LL", 2)), "");
}

TEST(ForcedSetting, OtherAlgorithmThanForcedIsNamed) {
  EXPECT_EQ(mismatch(nccl_forced("Tree", "LL", {}), ran("RING", "LL", 2)),
            "NCCL ran RING/LL, 2 ch where Tree/LL was forced");
}

TEST(ForcedSetting, ForcingOnlyTheAlgorithmAcceptsAnyProtocol) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "", {}), ran("RING", "SIMPLE", 2)), "");
}

TEST(ForcedSetting, UnknownRunIsNotConfirmed) {
  EXPECT_TRUE(mismatch(nccl_forced("Ring", "LL", {}), unknown("")).starts_with("not confirmed"));
}

TEST(ForcedSetting, MissingRunIsNotConfirmed) {
  EXPECT_TRUE(mismatch(nccl_forced("Ring", "LL", {}), {}).starts_with("not confirmed"));
}

TEST(ForcedSetting, MixedRunsWithAnotherProtocolAreAMismatch) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "LL", {}),
                     ways({{"RING", "LL", 1, 3}, {"RING", "SIMPLE", 2, 2}})),
            "NCCL ran RING/LL, 1 ch x3; RING/SIMPLE, 2 ch x2 where Ring/LL was forced");
}

TEST(ForcedSetting, MixedRunsThatAllMatchAreNoMismatch) {
  EXPECT_EQ(
      mismatch(nccl_forced("Ring", "LL", {}), ways({{"RING", "LL", 1, 3}, {"RING", "LL", 2, 2}})),
      "");
}

TEST(ForcedSetting, AnUnknownChoiceIsNotConfirmedWhateverItsReason) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "LL", {}), unknown("see NCCL profiler plugin below")),
            "not confirmed: NCCL's profiler plugin did not say what ran");
}

// ---- a measured sweep: drift and notes ----------------------------------------------------------

TEST(MeasuredSweep, DriftBetweenTheDefaultsRunsSetsTheTieTolerance) {
  // The default ran at 10 us first and 11.5 us last: 15% drift, so a path 10% faster ties.
  AllReduceSweep s = sweep({nccl_default({ok(8, 10)}), one_shot({ok(8, 9)})});
  s.default_again = nccl_default({ok(8, 11.5)});
  const AllReduceDiagnosis d = diagnose_measured_sweep(s);
  EXPECT_NEAR(d.tie_tolerance, 0.15, 1e-9);
  ASSERT_EQ(d.sizes.size(), 1u);
  EXPECT_EQ(d.sizes[0].outcome, SizeOutcome::kDefaultFastest);
  ASSERT_FALSE(d.notes.empty());
  EXPECT_EQ(d.notes.back(),
            "NCCL's default, run first and again last, differed by up to 15.0% at one size: "
            "medians within 15.0% are ties");
}

TEST(MeasuredSweep, SmallDriftKeepsTheDefaultToleranceAndHugeDriftIsCapped) {
  AllReduceSweep calm = sweep({nccl_default({ok(8, 10)})});
  calm.default_again = nccl_default({ok(8, 10.1)});
  EXPECT_NEAR(diagnose_measured_sweep(calm).tie_tolerance, 0.03, 1e-9);
  AllReduceSweep wild = sweep({nccl_default({ok(8, 10)})});
  wild.default_again = nccl_default({ok(8, 40)});
  EXPECT_NEAR(diagnose_measured_sweep(wild).tie_tolerance, 0.95, 1e-9);
}

TEST(MeasuredSweep, NcclsReasonForAnUnknownChoiceIsOneNoteAndTheRowsSayUnknown) {
  const NcclChoice why = unknown("the profiler plugin was not loaded");
  AllReduceSweep s = sweep({nccl_default({ok(8, 10, why), ok(16, 10, why)}),
                            nccl_forced("Ring", "LL", {ok(8, 10, why)}), one_shot({ok(8, 9)})});
  s.default_again = nccl_default({ok(8, 10, why)});
  const AllReduceDiagnosis d = diagnose_measured_sweep(s);
  const std::string note = "what NCCL ran is unknown (the profiler plugin was not loaded)";
  EXPECT_EQ(std::count(d.notes.begin(), d.notes.end(), note), 1);
  const std::string text = allreduce_text(s, d);
  EXPECT_NE(text.find("\nNotes\n  - " + note + "\n"), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(allreduce_json(s, d));
  EXPECT_EQ(j.at("notes").size(), d.notes.size());
  // The rows say "unknown" (the reason is the note); an IPC path's say nothing.
  EXPECT_EQ(j.at("paths")[0].at("points")[1].at("nccl_ran"), "unknown");
  EXPECT_EQ(j.at("paths")[1].at("points")[0].at("nccl_ran"), "unknown");
  EXPECT_EQ(j.at("paths")[2].at("points")[0].at("nccl_ran"), "");
}

TEST(MeasuredSweep, ASweepWithoutNotesPrintsNoNotesSection) {
  const AllReduceSweep s = sweep({nccl_default({ok(8, 10)})});
  const AllReduceDiagnosis d = diagnose_allreduce(s);
  EXPECT_EQ(allreduce_text(s, d).find("Notes"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(allreduce_json(s, d)).contains("notes"));
}
