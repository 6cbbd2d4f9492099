// diagnose allreduce's verdicts on hand-made sweeps: which path wins at which size, when a win
// is claimed at all, and what the user is told to set, must follow from the numbers exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "allreduce_test_support.hpp"
#include "next_step_checks.hpp"
#include "probes/base/error.hpp"
#include "reports/allreduce/allreduce_diagnosis.hpp"

using namespace commtool;
using namespace commtool::reports;
using namespace allreduce_test;

namespace {

AllReducePoint spread(uint64_t bytes, double median_us, double min_us, double max_us) {
  AllReducePoint p = ok(bytes, median_us);
  p.time_us.min = min_us;
  p.time_us.max = max_us;
  return p;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines)
    out += l + "\n";
  return out;
}

TEST(AllReduceDiagnosis, CleanCrossoverFindsBothChangesOfWinner) {
  const AllReduceSweep s = clean_crossover();
  const AllReduceDiagnosis d = diagnose_allreduce(s);
  ASSERT_EQ(d.sizes.size(), 6u);
  EXPECT_EQ(d.sizes[0].fastest, 2);
  EXPECT_EQ(d.sizes[0].outcome, SizeOutcome::kWin);
  EXPECT_DOUBLE_EQ(d.sizes[0].speedup, 2.5);
  EXPECT_EQ(d.sizes[3].outcome, SizeOutcome::kDefaultFastest);
  EXPECT_EQ(d.sizes[5].fastest, 1);
  ASSERT_EQ(d.crossovers.size(), 2u);
  EXPECT_EQ(d.crossovers[0].last_bytes_before, 64 * KiB);
  EXPECT_EQ(d.crossovers[0].first_bytes_after, 256 * KiB);
  EXPECT_EQ(d.crossovers[0].from, 2);
  EXPECT_EQ(d.crossovers[0].to, 0);
  EXPECT_EQ(d.crossovers[1].last_bytes_before, 256 * KiB);
  EXPECT_EQ(d.crossovers[1].first_bytes_after, 1 * MiB);
  EXPECT_EQ(d.crossovers[1].to, 1);
}

TEST(AllReduceDiagnosis, CleanCrossoverRecommendationQuotesSpeedupEvidenceAndSetting) {
  const AllReduceDiagnosis d = diagnose_allreduce(clean_crossover());
  ASSERT_EQ(d.recommendation.size(), 3u) << joined(d.recommendation);
  EXPECT_EQ(
      d.recommendation[0],
      "up to 64 KiB use IPC one-shot: 2.14x-2.50x faster than NCCL's default (RING/LL, 1 ch) here "
      "(at 4 KiB: 8.0 vs 20.0 us median); to get it, route all-reduces of at most 65536 "
      "bytes to a custom IPC one-shot path (a size threshold in your own code; NCCL has no "
      "setting for it)");
  EXPECT_EQ(d.recommendation[1], "at 256 KiB NCCL's default (RING/LL, 1 ch) is fastest");
  EXPECT_EQ(
      d.recommendation[2],
      "from 1 MiB use NCCL Ring/Simple: 1.33x faster than NCCL's default (TREE/SIMPLE, 1 ch) here "
      "(at 1 MiB: 150.0 vs 200.0 us median); to get it, set NCCL_ALGO=Ring "
      "NCCL_PROTO=Simple (process-wide: it applies to every all-reduce of every size in "
      "the process, not only these)");
  EXPECT_TRUE(d.exclusions.empty());
}

TEST(AllReduceDiagnosis, TieWithinToleranceKeepsNcclDefault) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(64 * KiB, 10.0, ran("RING", "LL")), ok(128 * KiB, 12.0, ran("RING", "LL"))}),
      nccl_forced("Tree", "LL", {ok(64 * KiB, 9.8), ok(128 * KiB, 11.9)}),
  }));
  EXPECT_EQ(d.sizes[0].fastest, 0);
  EXPECT_EQ(d.sizes[0].outcome, SizeOutcome::kDefaultFastest);
  EXPECT_EQ(d.sizes[0].tied, std::vector<int>{1});
  EXPECT_TRUE(d.crossovers.empty());
  EXPECT_TRUE(has(d.recommendation, "NCCL's default is fastest at every size measured"));
  EXPECT_TRUE(has(d.recommendation,
                  "NCCL Tree/LL ties with NCCL's default (medians within 3%) "
                  "at 64 KiB and 128 KiB: the default is kept"));
}

TEST(AllReduceDiagnosis, TieBetweenOtherPathsPrefersTheOneAskingLeastOfTheUser) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(64 * KiB, 20), ok(128 * KiB, 20)}),
      two_shot({ok(64 * KiB, 4.9), ok(128 * KiB, 9.0)}),
      one_shot({ok(64 * KiB, 5.0), ok(128 * KiB, 5.0)}),
      nccl_forced("Tree", "", {ok(64 * KiB, 40), ok(128 * KiB, 5.1)}),
  }));
  EXPECT_EQ(d.sizes[0].fastest, 2);  // one-shot over two-shot
  EXPECT_EQ(d.sizes[0].tied, std::vector<int>{1});
  EXPECT_EQ(d.sizes[1].fastest, 3);  // an NCCL variable over custom code
  EXPECT_EQ(d.sizes[1].tied, std::vector<int>{2});
}

TEST(AllReduceDiagnosis, ToleranceIsConfigurable) {
  const AllReduceSweep s = sweep({
      nccl_default({ok(64 * KiB, 10.0)}),
      nccl_forced("Tree", "LL", {ok(64 * KiB, 9.8)}),
  });
  EXPECT_EQ(diagnose_allreduce(s).sizes[0].fastest, 0);
  EXPECT_EQ(diagnose_allreduce(s, {0.01}).sizes[0].fastest, 1);
}

TEST(AllReduceDiagnosis, WinnerSlowestSampleAboveDefaultMedianIsWithinNoise) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({spread(64 * KiB, 10, 9, 11)}),
      one_shot({spread(64 * KiB, 8, 5, 12)}),
  }));
  EXPECT_EQ(d.sizes[0].fastest, 1);
  EXPECT_EQ(d.sizes[0].outcome, SizeOutcome::kWithinNoise);
  EXPECT_EQ(d.sizes[0].use, 0);
  EXPECT_TRUE(has(d.recommendation, "NCCL's default is fastest at every size measured"));
  EXPECT_TRUE(has(d.recommendation,
                  "IPC one-shot has a lower median than NCCL's default at "
                  "64 KiB, but within noise"));
  EXPECT_FALSE(has(d.recommendation, "use IPC one-shot"));
}

TEST(AllReduceDiagnosis, DefaultFastestSampleBelowWinnerMedianIsWithinNoise) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({spread(64 * KiB, 10, 7.5, 10.5)}),
      one_shot({spread(64 * KiB, 8, 7.9, 8.1)}),
  }));
  EXPECT_EQ(d.sizes[0].outcome, SizeOutcome::kWithinNoise);
  EXPECT_FALSE(has(d.recommendation, "use IPC one-shot"));
}

TEST(AllReduceDiagnosis, FailedVerificationIsExcludedAndReported) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(1 * MiB, 100), ok(2 * MiB, 180)}),
      two_shot({bad(1 * MiB, AllReducePointStatus::kFailedVerification, "3 wrong elements"),
                ok(2 * MiB, 175)}),
  }));
  EXPECT_EQ(d.sizes[0].fastest, 0);  // the wrong result's time counts for nothing
  EXPECT_EQ(d.exclusions,
            std::vector<std::string>{
                "IPC two-shot failed verification at 1 MiB (3 wrong elements): excluded"});
}

TEST(AllReduceDiagnosis, PathThatFailedVerificationElsewhereIsRecommendedWithACaution) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(1 * MiB, 100), ok(2 * MiB, 180), ok(4 * MiB, 300)}),
      two_shot({ok(1 * MiB, 60), ok(2 * MiB, 190),
                bad(4 * MiB, AllReducePointStatus::kFailedVerification, "")}),
  }));
  ASSERT_EQ(d.recommendation.size(), 2u) << joined(d.recommendation);
  EXPECT_EQ(d.recommendation[0],
            "up to 1 MiB use IPC two-shot: 1.67x faster than NCCL's default here (at 1 MiB: 60.0 "
            "vs 100.0 us median); to get it, route all-reduces of at most 1048576 bytes to a "
            "custom IPC two-shot path (a size threshold in your own code; NCCL has no setting for "
            "it); caution: it failed verification at 4 MiB");
}

TEST(AllReduceDiagnosis, SingleSizeRangeInTheMiddleNamesThatSize) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(4 * KiB, 10), ok(8 * KiB, 20), ok(16 * KiB, 30)}),
      nccl_forced("Tree", "LL", {ok(4 * KiB, 5), ok(8 * KiB, 40), ok(16 * KiB, 60)}),
      one_shot({ok(4 * KiB, 50), ok(8 * KiB, 10), ok(16 * KiB, 90)}),
  }));
  ASSERT_EQ(d.ranges.size(), 3u);
  EXPECT_TRUE(has(d.recommendation, "at 8 KiB use IPC one-shot: 2.00x faster"));
  EXPECT_TRUE(has(d.recommendation, "route all-reduces of 8192 bytes to a custom IPC one-shot"));
  EXPECT_TRUE(has(d.recommendation, "up to 4 KiB use NCCL Tree/LL"));
  EXPECT_TRUE(has(d.recommendation, "from 16 KiB NCCL's default is fastest"));
}

TEST(AllReduceDiagnosis, RefusedAndNotApplicablePathsAreReported) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(4 * KiB, 10), ok(8 * KiB, 11)}),
      nccl_forced("Tree", "LL",
                  {bad(4 * KiB, AllReducePointStatus::kRefused, "ncclInvalidUsage"),
                   bad(8 * KiB, AllReducePointStatus::kRefused, "ncclInvalidUsage")}),
      nccl_forced("NVLS", "Simple",
                  {ok(4 * KiB, 30), bad(8 * KiB, AllReducePointStatus::kRefused, "")}),
      one_shot({bad(4 * KiB, AllReducePointStatus::kNotApplicable, "GPU 0 and GPU 2 have no P2P"),
                bad(8 * KiB, AllReducePointStatus::kNotApplicable, "GPU 0 and GPU 2 have no P2P")}),
  }));
  EXPECT_EQ(
      d.exclusions,
      (std::vector<std::string>{
          "NCCL Tree/LL refused by NCCL at every size measured: ncclInvalidUsage",
          "NCCL NVLS/Simple refused by NCCL at 8 KiB",
          "IPC one-shot not applicable at every size measured: GPU 0 and GPU 2 have no P2P"}));
  EXPECT_TRUE(has(d.recommendation, "NCCL's default is fastest at every size measured"));
}

TEST(AllReduceDiagnosis, SinglePathOnlySaysThereIsNothingToCompare) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(4 * KiB, 10), ok(1 * MiB, 100)}),
      one_shot({bad(4 * KiB, AllReducePointStatus::kNotApplicable, "no P2P"),
                bad(1 * MiB, AllReducePointStatus::kNotApplicable, "no P2P")}),
  }));
  EXPECT_EQ(
      d.recommendation,
      std::vector<std::string>{
          "only NCCL default has valid results (4 KiB to 1 MiB): nothing to compare it with"});
  EXPECT_EQ(d.exclusions.size(), 1u);
}

TEST(AllReduceDiagnosis, NcclDefaultFastestEverywhere) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(4 * KiB, 10, ran("RING", "LL")), ok(4 * MiB, 500, ran("RING", "SIMPLE"))}),
      nccl_forced("Tree", "Simple", {ok(4 * KiB, 15), ok(4 * MiB, 700)}),
      one_shot({ok(4 * KiB, 12), ok(4 * MiB, 2000)}),
  }));
  EXPECT_TRUE(d.crossovers.empty());
  ASSERT_EQ(d.ranges.size(), 1u);
  EXPECT_EQ(d.recommendation,
            std::vector<std::string>{"NCCL's default is fastest at every size measured (4 KiB to "
                                     "4 MiB): nothing to change"});
}

TEST(AllReduceDiagnosis, SingleSizeFlankedByTheSameWinnerIsABlipNotACrossover) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default(
          {ok(4 * KiB, 20), ok(8 * KiB, 20), ok(16 * KiB, 20), ok(32 * KiB, 22), ok(64 * KiB, 25)}),
      one_shot(
          {ok(4 * KiB, 8), ok(8 * KiB, 9), ok(16 * KiB, 30), ok(32 * KiB, 11), ok(64 * KiB, 60)}),
  }));
  EXPECT_TRUE(d.sizes[2].blip);
  EXPECT_EQ(d.sizes[2].use, 0);
  EXPECT_EQ(d.sizes[2].use_smoothed, 1);
  ASSERT_EQ(d.crossovers.size(), 1u);
  EXPECT_EQ(d.crossovers[0].last_bytes_before, 32 * KiB);
  EXPECT_EQ(d.crossovers[0].first_bytes_after, 64 * KiB);
  EXPECT_TRUE(has(d.recommendation, "up to 32 KiB use IPC one-shot"));
  EXPECT_TRUE(has(d.recommendation,
                  "at 16 KiB the path to use is NCCL default (default-fastest), "
                  "a single size between sizes where IPC one-shot is: a blip"));
}

TEST(AllReduceDiagnosis, DifferentWinnerAtTheLastSizeIsACrossoverNotABlip) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({ok(4 * KiB, 20), ok(8 * KiB, 20), ok(16 * KiB, 20)}),
      one_shot({ok(4 * KiB, 8), ok(8 * KiB, 9), ok(16 * KiB, 30)}),
  }));
  EXPECT_FALSE(d.sizes[2].blip);
  ASSERT_EQ(d.crossovers.size(), 1u);
  EXPECT_TRUE(has(d.recommendation, "from 16 KiB NCCL's default is fastest"));
}

TEST(AllReduceDiagnosis, AlternatingWinnersResolveToTheSmallestSizesPath) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default(
          {ok(1 * KiB, 20), ok(2 * KiB, 10), ok(4 * KiB, 20), ok(8 * KiB, 10), ok(16 * KiB, 20)}),
      one_shot(
          {ok(1 * KiB, 10), ok(2 * KiB, 20), ok(4 * KiB, 10), ok(8 * KiB, 20), ok(16 * KiB, 10)}),
  }));
  EXPECT_TRUE(d.crossovers.empty());
  ASSERT_EQ(d.ranges.size(), 1u);
  EXPECT_EQ(d.ranges[0].path, 1);
}

TEST(AllReduceDiagnosis, NoValidDefaultGivesTheFastestWithoutASpeedup) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default({bad(4 * KiB, AllReducePointStatus::kFailedVerification, "")}),
      one_shot({ok(4 * KiB, 8)}),
      two_shot({ok(4 * KiB, 12)}),
  }));
  EXPECT_EQ(d.sizes[0].outcome, SizeOutcome::kNoDefault);
  EXPECT_EQ(d.sizes[0].speedup, 0);
  EXPECT_TRUE(has(d.recommendation, "NCCL's default has no valid result"));
  EXPECT_TRUE(has(d.recommendation,
                  "use IPC one-shot: the fastest, with no valid result from "
                  "NCCL's default to compare; to get it, route every "
                  "all-reduce to a custom IPC one-shot path"));
  EXPECT_TRUE(has(d.exclusions, "NCCL default failed verification at every size measured"));
}

TEST(AllReduceDiagnosis, SizeWithNoValidResultMovesNoCrossover) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({
      nccl_default(
          {ok(4 * KiB, 20), bad(8 * KiB, AllReducePointStatus::kRefused, "x"), ok(16 * KiB, 20)}),
      one_shot({ok(4 * KiB, 8), bad(8 * KiB, AllReducePointStatus::kFailedVerification, ""),
                ok(16 * KiB, 9)}),
  }));
  EXPECT_EQ(d.sizes[1].outcome, SizeOutcome::kNoValidPath);
  EXPECT_TRUE(d.crossovers.empty());
  EXPECT_TRUE(has(d.recommendation, "at every size measured (4 KiB to 16 KiB)"));
}

TEST(AllReduceDiagnosis, RejectsBadInput) {
  EXPECT_THROW(diagnose_allreduce(sweep({nccl_default({ok(4 * KiB, 1)})}), {1.5}), Error);
  EXPECT_THROW(diagnose_allreduce(sweep({nccl_default({ok(4 * KiB, 1), ok(4 * KiB, 2)})})), Error);
  EXPECT_THROW(
      diagnose_allreduce(sweep({nccl_default({ok(4 * KiB, 1)}), nccl_default({ok(4 * KiB, 1)})})),
      Error);
  AllReducePoint empty = ok(4 * KiB, 1);
  empty.time_us.n = 0;
  EXPECT_THROW(diagnose_allreduce(sweep({nccl_default({empty})})), Error);
}

TEST(AllReduceDiagnosis, EmptySweepRecommendsNothing) {
  const AllReduceDiagnosis d = diagnose_allreduce(sweep({}));
  EXPECT_TRUE(d.sizes.empty());
  EXPECT_TRUE(has(d.recommendation, "nothing to recommend"));
}

}  // namespace

TEST(AllReduceDiagnosis, RunToRunDriftIsTheLargestRelativeGapAtACommonValidSize) {
  // 1 KiB: 10 vs 12 (20%); 1 MiB: 100 vs 90 (11%); 4 MiB only in the first run; 8 MiB failed
  // in the second run, so its 50% gap does not count.
  const AllReducePath first =
      nccl_default({ok(1024, 10), ok(1 << 20, 100), ok(4 << 20, 300), ok(8 << 20, 400)});
  const AllReducePath again =
      nccl_default({ok(1024, 12), ok(1 << 20, 90),
                    bad(8 << 20, AllReducePointStatus::kFailedVerification, "2 wrong")});
  EXPECT_DOUBLE_EQ(run_to_run_drift(first, again), 0.2);
  EXPECT_DOUBLE_EQ(run_to_run_drift(again, first), 0.2);
  EXPECT_DOUBLE_EQ(run_to_run_drift(first, nccl_default({})), 0.0);
}

// --- What to do next: every recommendation ends with one step ---

TEST(AllReduceAdvice, EveryRecommendationEndsWithWhatToDoNext) {
  AllReduceSweep one_rank = clean_crossover();
  one_rank.placement = {1, 1, 1};
  AllReduceSweep shared = clean_crossover();
  shared.placement = {4, 1, 4};
  const std::vector<std::pair<std::string, AllReduceSweep>> cases = {
      {"crossover", clean_crossover()},
      {"default fastest",
       sweep({nccl_default({ok(4 * KiB, 10), ok(4 * MiB, 500)}),
              nccl_forced("Tree", "Simple", {ok(4 * KiB, 15), ok(4 * MiB, 700)})})},
      {"single path",
       sweep({nccl_default({ok(4 * KiB, 10)}),
              one_shot({bad(4 * KiB, AllReducePointStatus::kNotApplicable, "no P2P")})})},
      {"empty", sweep({})},
      {"one rank", one_rank},
      {"shared GPU", shared},
      {"wrong data", sweep({nccl_default({ok(1 * MiB, 100), ok(2 * MiB, 180)}),
                            two_shot({bad(1 * MiB, AllReducePointStatus::kFailedVerification, "3"),
                                      ok(2 * MiB, 175)})})},
  };
  for (const auto& [name, s] : cases) {
    const AllReduceDiagnosis d = diagnose_allreduce(s);
    next_step::expect_next_step(d.advice, name);
    EXPECT_NE(allreduce_text(s, d).find("\nRecommendation\n"), std::string::npos);
    EXPECT_NE(allreduce_text(s, d).find("  what to do: " + d.advice + "\n"), std::string::npos)
        << name;
  }
}

TEST(AllReduceAdvice, SaysWhichSettingToTryAndWhatElseIsOwnCode) {
  const AllReduceDiagnosis d = diagnose_allreduce(clean_crossover());
  EXPECT_EQ(d.advice,
            "try NCCL_ALGO=Ring NCCL_PROTO=Simple in the job's environment (before it starts: NCCL "
            "reads it once per process) and compare the job's step time with and without: it "
            "changes every all-reduce, not only 1 MiB to 4 MiB; the gain from 4 KiB to 64 KiB "
            "needs an all-reduce of the job's own (IPC one-shot, behind a size threshold): weigh "
            "it against NCCL's default, which needs nothing");
  const AllReduceDiagnosis fastest = diagnose_allreduce(
      sweep({nccl_default({ok(4 * KiB, 10), ok(4 * MiB, 500)}),
             nccl_forced("Tree", "Simple", {ok(4 * KiB, 15), ok(4 * MiB, 700)})}));
  EXPECT_TRUE(fastest.advice.starts_with("nothing to change")) << fastest.advice;
  AllReduceSweep one_rank = clean_crossover();
  one_rank.placement = {1, 1, 1};
  EXPECT_TRUE(diagnose_allreduce(one_rank).advice.starts_with("run it again on 2 or more GPUs"));
  const AllReduceDiagnosis wrong = diagnose_allreduce(
      sweep({nccl_default({ok(1 * MiB, 100), ok(2 * MiB, 180)}),
             two_shot({bad(1 * MiB, AllReducePointStatus::kFailedVerification, "3"),
                       ok(2 * MiB, 175)})}));
  EXPECT_NE(wrong.advice.find("IPC two-shot returned wrong data"), std::string::npos)
      << wrong.advice;
}
