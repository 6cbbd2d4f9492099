// diagnose allreduce's verdicts on hand-made sweeps: which path wins at which size, when a win
// is claimed at all, and what the user is told to set, must follow from the numbers exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "reports/allreduce/allreduce_diagnosis.hpp"

using namespace commtool;
using namespace commtool::reports;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;

// A valid point with a tight spread: min and max 2% either side of the median.
using commtool::tracing::NcclChoice;
using commtool::tracing::NcclWay;

// What NCCL's profiler plugin saw: one way (20 operations), several, or none with a reason.
NcclChoice ran(std::string algo, std::string proto, int channels = 1) {
  return {{{std::move(algo), std::move(proto), channels, 20}}, ""};
}
NcclChoice ways(std::vector<NcclWay> w) {
  return {std::move(w), ""};
}
NcclChoice unknown(std::string why) {
  return {{}, std::move(why)};
}

AllReducePoint ok(uint64_t bytes, double median_us, NcclChoice ran = {}) {
  AllReducePoint p;
  p.bytes = bytes;
  p.time_us.n = 20;
  p.time_us.median = median_us;
  p.time_us.min = median_us * 0.98;
  p.time_us.max = median_us * 1.02;
  p.busbw_gbps = static_cast<double>(bytes) / (median_us * 1e3);
  p.nccl_ran = std::move(ran);
  return p;
}

AllReducePoint spread(uint64_t bytes, double median_us, double min_us, double max_us) {
  AllReducePoint p = ok(bytes, median_us);
  p.time_us.min = min_us;
  p.time_us.max = max_us;
  return p;
}

AllReducePoint bad(uint64_t bytes, AllReducePointStatus status, std::string reason) {
  AllReducePoint p;
  p.bytes = bytes;
  p.status = status;
  p.reason = std::move(reason);
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

AllReducePath two_shot(std::vector<AllReducePoint> points) {
  return {"IPC two-shot", AllReducePathKind::kIpcTwoShot, false, "", "", std::move(points)};
}

AllReduceSweep sweep(std::vector<AllReducePath> paths) {
  return {{8, 8, 1}, "float32", std::move(paths), {}};  // 8 ranks, one per GPU
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

std::string mismatch(const AllReducePath& path, const NcclChoice& ran) {
  return forced_setting_mismatch(path, ok(4 * KiB, 10, ran));
}

AllReduceSweep at_placement(AllReduceSweep s, workers::PlacementSummary placement) {
  s.placement = placement;
  return s;
}

// IPC one-shot wins up to 64 KiB, NCCL's default at 256 KiB, NCCL Ring/Simple from 1 MiB.
AllReduceSweep clean_crossover() {
  return sweep({
      nccl_default({ok(4 * KiB, 20, ran("RING", "LL")), ok(16 * KiB, 22, ran("RING", "LL")),
                    ok(64 * KiB, 30, ran("RING", "LL")), ok(256 * KiB, 60, ran("RING", "LL")),
                    ok(1 * MiB, 200, ran("TREE", "SIMPLE")),
                    ok(4 * MiB, 600, ran("TREE", "SIMPLE"))}),
      nccl_forced("Ring", "Simple",
                  {ok(4 * KiB, 40), ok(16 * KiB, 42), ok(64 * KiB, 50), ok(256 * KiB, 70),
                   ok(1 * MiB, 150), ok(4 * MiB, 450)}),
      one_shot({ok(4 * KiB, 8), ok(16 * KiB, 9), ok(64 * KiB, 14), ok(256 * KiB, 90),
                ok(1 * MiB, 400), ok(4 * MiB, 1500)}),
  });
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

TEST(AllReduceText, TableHasOneRowPerSizeThenCrossoversRecommendationAndExclusions) {
  AllReduceSweep s = clean_crossover();
  s.paths.push_back(two_shot({bad(1 * MiB, AllReducePointStatus::kFailedVerification, "")}));
  const std::string text = allreduce_text(s, diagnose_allreduce(s));
  EXPECT_NE(text.find("size"), std::string::npos);
  EXPECT_NE(text.find("4 KiB    IPC one-shot"), std::string::npos) << text;
  EXPECT_NE(text.find("RING/LL, 1 ch"), std::string::npos);
  EXPECT_NE(text.find("2.50x"), std::string::npos);
  EXPECT_NE(text.find("between 64 KiB and 256 KiB: IPC one-shot -> NCCL default"),
            std::string::npos);
  EXPECT_NE(text.find("  - up to 64 KiB use IPC one-shot"), std::string::npos);
  EXPECT_NE(text.find("  - IPC two-shot failed verification at every size measured: excluded"),
            std::string::npos);
}

TEST(AllReduceJson, CarriesVerdictsCrossoversAndSentences) {
  const AllReduceSweep s = clean_crossover();
  const nlohmann::json j = nlohmann::json::parse(allreduce_json(s, diagnose_allreduce(s)));
  EXPECT_EQ(j["ranks"], 8);
  EXPECT_EQ(j["paths"].size(), 3u);
  EXPECT_EQ(j["sizes"][0]["fastest"], "IPC one-shot");
  EXPECT_EQ(j["sizes"][0]["outcome"], "win");
  EXPECT_DOUBLE_EQ(j["sizes"][0]["speedup"].get<double>(), 2.5);
  EXPECT_EQ(j["crossovers"][1]["to"], "NCCL Ring/Simple");
  EXPECT_EQ(j["recommendation"].size(), 3u);
  EXPECT_TRUE(j["exclusions"].empty());
}

// An IPC point as the sweep makes it: the kernel's bytes and their rate at the median.
AllReducePoint ipc_ok(uint64_t bytes, double median_us, double kernel_bytes) {
  AllReducePoint p = ok(bytes, median_us);
  p.kernel_bytes = kernel_bytes;
  p.kernel_gbps = kernel_bytes / (median_us * 1e3);
  return p;
}

AllReduceSweep one_rank_with_kernel_rates() {
  AllReduceSweep s =
      sweep({nccl_default({ok(8, 6), ok(256 * MiB, 130)}),
             one_shot({ipc_ok(8, 5, 16), ipc_ok(256 * MiB, 160, 512.0 * MiB)}),
             two_shot({ipc_ok(8, 5.5, 16), bad(256 * MiB, AllReducePointStatus::kFailedVerification,
                                               "3 wrong byte(s) over 20 calls")})});
  s.placement = {1, 1, 1};
  return s;
}

TEST(AllReduceJson, IpcPointsCarryTheirKernelBytesAndRateNcclPointsNull) {
  const AllReduceSweep s = one_rank_with_kernel_rates();
  const nlohmann::json j = nlohmann::json::parse(allreduce_json(s, diagnose_allreduce(s)));
  const nlohmann::json& nccl = j["paths"][0]["points"][1];
  EXPECT_TRUE(nccl["kernel_bytes_read_written"].is_null());
  EXPECT_TRUE(nccl["kernel_gbps"].is_null());
  const nlohmann::json& one = j["paths"][1]["points"][1];
  EXPECT_DOUBLE_EQ(one["kernel_bytes_read_written"].get<double>(), 512.0 * MiB);
  EXPECT_NEAR(one["kernel_gbps"].get<double>(), 3355.4, 0.1);        // 512 MiB in 160 us
  EXPECT_TRUE(j["paths"][2]["points"][1]["kernel_gbps"].is_null());  // failed: no figure
}

TEST(AllReduceText, ListsTheIpcKernelsRatesPerSizeAndLeavesFailedPointsOut) {
  const AllReduceSweep s = one_rank_with_kernel_rates();
  const std::string text = allreduce_text(s, diagnose_allreduce(s));
  const size_t at = text.find("commtool's IPC kernels");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string table = text.substr(at);
  EXPECT_NE(table.find("IPC one-shot us"), std::string::npos) << table;
  EXPECT_NE(table.find("3355.4"), std::string::npos) << table;
  EXPECT_NE(table.find("160.0 [156.8-163.2]"), std::string::npos) << table;
  // Two-shot failed at 256 MiB: its cells there are empty, the one-shot's stay.
  const std::string row = table.substr(table.find("  256 MiB"));
  EXPECT_NE(row.find("3355.4  -                -"), std::string::npos) << table;
}

TEST(AllReduceText, NoIpcKernelTableWithoutIpcRates) {
  const AllReduceSweep s = clean_crossover();  // hand-made points without kernel bytes
  EXPECT_EQ(allreduce_text(s, diagnose_allreduce(s)).find("IPC kernels"), std::string::npos);
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
