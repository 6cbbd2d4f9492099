// The rules that keep multi-rank figures honest: start lags across ranks, a recommendation
// withheld where no difference can be real, and a forced NCCL setting that NCCL did not run.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "reports/allreduce_diagnosis.hpp"
#include "tracing/attribution.hpp"

using namespace commtool;
using namespace commtool::reports;
using commtool::tracing::start_lags;
using commtool::tracing::StartLags;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;

// A valid point with a tight spread: min and max 2% either side of the median.
AllReducePoint ok(uint64_t bytes, double median_us, std::string ran = "") {
  AllReducePoint p;
  p.bytes = bytes;
  p.time_us.n = 20;
  p.time_us.median = median_us;
  p.time_us.min = median_us * 0.98;
  p.time_us.max = median_us * 1.02;
  p.nccl_ran = std::move(ran);
  return p;
}

AllReducePath nccl_default(std::vector<AllReducePoint> points) {
  return {"NCCL default", AllReducePathKind::kNccl, true, "", "", std::move(points)};
}

AllReducePath nccl_forced(std::string algo, std::string proto, std::vector<AllReducePoint> points) {
  std::string name = "NCCL " + algo + (algo.empty() || proto.empty() ? "" : "/") + proto;
  return {name, AllReducePathKind::kNccl, false, algo, proto, std::move(points)};
}

AllReducePath one_shot(std::vector<AllReducePoint> points) {
  return {"IPC one-shot", AllReducePathKind::kIpcOneShot, false, "", "", std::move(points)};
}

// IPC one-shot wins the small sizes, NCCL Ring/Simple the large ones: two crossovers at 8 ranks.
AllReduceSweep crossing_sweep(workers::PlacementSummary placement) {
  return {placement,
          "float32",
          {nccl_default({ok(4 * KiB, 20), ok(256 * KiB, 60), ok(4 * MiB, 600)}),
           nccl_forced("Ring", "Simple", {ok(4 * KiB, 40), ok(256 * KiB, 70), ok(4 * MiB, 450)}),
           one_shot({ok(4 * KiB, 8), ok(256 * KiB, 90), ok(4 * MiB, 1500)})}};
}

std::string mismatch(const AllReducePath& path, const std::string& ran) {
  return forced_setting_mismatch(path, ok(4 * KiB, 10, ran));
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(StartLags, NoneWhenNoRankHasAStart) {
  EXPECT_FALSE(start_lags({std::nullopt, std::nullopt}).has_value());
}

TEST(StartLags, SpreadIsFirstToLastStartInMicroseconds) {
  const std::optional<StartLags> l = start_lags({5'000'000, 5'003'000, 5'001'500});
  ASSERT_TRUE(l.has_value());
  EXPECT_DOUBLE_EQ(l->spread_us, 3.0);
}

TEST(StartLags, EachRankLagsBehindTheFirstToStart) {
  const std::optional<StartLags> l = start_lags({5'002'000, 5'000'000, 5'000'500});
  ASSERT_TRUE(l.has_value());
  ASSERT_EQ(l->lag_us.size(), 3u);
  EXPECT_DOUBLE_EQ(l->lag_us[0].value(), 2.0);
  EXPECT_DOUBLE_EQ(l->lag_us[1].value(), 0.0);
  EXPECT_DOUBLE_EQ(l->lag_us[2].value(), 0.5);
}

TEST(StartLags, RankWithoutAStartHasNoLag) {
  const std::optional<StartLags> l = start_lags({1'000, std::nullopt, 3'000});
  ASSERT_TRUE(l.has_value());
  ASSERT_EQ(l->lag_us.size(), 3u);
  EXPECT_FALSE(l->lag_us[1].has_value());
  EXPECT_DOUBLE_EQ(l->spread_us, 2.0);
}

TEST(RecommendationWithheld, OneRankSaysNcclAlgoChangesNothing) {
  const std::string why = recommendation_withheld({1, 1, 1});
  EXPECT_TRUE(why.starts_with("withheld: at one rank")) << why;
  EXPECT_TRUE(contains(why, "NCCL_ALGO")) << why;
}

TEST(RecommendationWithheld, RanksSharingAGpuAreWithheld) {
  const std::string why = recommendation_withheld({4, 1, 4});
  EXPECT_TRUE(why.starts_with("withheld: 4 ranks share 1 GPU(s)")) << why;
}

TEST(RecommendationWithheld, OneRankPerGpuIsNotWithheld) {
  EXPECT_EQ(recommendation_withheld({8, 8, 1}), "");
}

TEST(DiagnoseAllReduce, OneRankGivesOneWithheldLineInsteadOfARecommendation) {
  const AllReduceDiagnosis d = diagnose_allreduce(crossing_sweep({1, 1, 1}));
  ASSERT_EQ(d.recommendation.size(), 1u);
  EXPECT_TRUE(d.recommendation[0].starts_with("withheld")) << d.recommendation[0];
  EXPECT_EQ(d.withheld, d.recommendation[0]);
}

TEST(DiagnoseAllReduce, OneRankMovesNoCrossover) {
  ASSERT_FALSE(diagnose_allreduce(crossing_sweep({8, 8, 1})).crossovers.empty());
  const AllReduceDiagnosis d = diagnose_allreduce(crossing_sweep({1, 1, 1}));
  EXPECT_TRUE(d.crossovers.empty());
  EXPECT_TRUE(d.ranges.empty());
}

TEST(ForcedSetting, DefaultPathIsNeverAMismatch) {
  EXPECT_EQ(mismatch(nccl_default({}), "unknown"), "");
}

TEST(ForcedSetting, IpcPathIsNeverAMismatch) {
  EXPECT_EQ(mismatch(one_shot({}), ""), "");
}

TEST(ForcedSetting, WhatRanIsComparedWithoutCase) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "LL", {}), "RING/LL, 2 ch"), "");
}

TEST(ForcedSetting, OtherAlgorithmThanForcedIsNamed) {
  EXPECT_EQ(mismatch(nccl_forced("Tree", "LL", {}), "RING/LL, 2 ch"),
            "NCCL ran RING/LL, 2 ch where Tree/LL was forced");
}

TEST(ForcedSetting, ForcingOnlyTheAlgorithmAcceptsAnyProtocol) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "", {}), "RING/SIMPLE, 2 ch"), "");
}

TEST(ForcedSetting, UnknownRunIsNotConfirmed) {
  EXPECT_TRUE(mismatch(nccl_forced("Ring", "LL", {}), "unknown").starts_with("not confirmed"));
}

TEST(ForcedSetting, MissingRunIsNotConfirmed) {
  EXPECT_TRUE(mismatch(nccl_forced("Ring", "LL", {}), "").starts_with("not confirmed"));
}

TEST(ForcedSetting, MixedRunsWithAnotherProtocolAreAMismatch) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "LL", {}), "RING/LL, 1 ch x3; RING/SIMPLE, 2 ch x2"),
            "NCCL ran RING/LL, 1 ch x3; RING/SIMPLE, 2 ch x2 where Ring/LL was forced");
}

TEST(ForcedSetting, MixedRunsThatAllMatchAreNoMismatch) {
  EXPECT_EQ(mismatch(nccl_forced("Ring", "LL", {}), "RING/LL, 1 ch x3; RING/LL, 2 ch x2"), "");
}
