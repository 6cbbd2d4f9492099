// What a failed worker group's account says, from progress board snapshots made by hand: the
// rank behind and why, and the first operation the ranks disagree on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "probes/base/workers/progress_report.hpp"

using namespace commtool::workers;

namespace {

OperationRecord op(int64_t seq, std::string name, uint64_t count) {
  return {seq, std::move(name), count};
}

// A running rank that enqueued allreduce #0..#last, each of `count` elements.
RankProgress running(int rank, int64_t last, int64_t started, int64_t completed,
                     uint64_t count = 1024) {
  RankProgress p;
  p.rank = rank;
  p.phase = Phase::kRunning;
  p.enqueued = last;
  p.started = started;
  p.completed = completed;
  for (int64_t seq = 0; seq <= last; ++seq)
    p.recent.push_back(op(seq, "allreduce", count));
  return p;
}

RankProgress in_phase(int rank, Phase phase) {
  RankProgress p;
  p.rank = rank;
  p.phase = phase;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(RankList, OneRankIsItsNumber) {
  EXPECT_EQ(rank_list({3}), "3");
}

TEST(RankList, TwoAdjacentRanksAreListedNotRanged) {
  EXPECT_EQ(rank_list({0, 1}), "0, 1");
}

TEST(RankList, ThreeAdjacentRanksAreARange) {
  EXPECT_EQ(rank_list({0, 1, 2}), "0-2");
}

TEST(RankList, GapSeparatesRuns) {
  EXPECT_EQ(rank_list({0, 2, 3}), "0, 2, 3");
}

TEST(RankList, UnsortedInputIsListedInOrder) {
  EXPECT_EQ(rank_list({7, 2, 0, 1}), "0-2, 7");
}

TEST(RankList, NoRanksIsEmpty) {
  EXPECT_EQ(rank_list({}), "");
}

TEST(FirstDivergence, NoneWhenEveryRankEnqueuedTheSame) {
  EXPECT_FALSE(first_divergence({running(0, 4, 4, 4), running(1, 4, 4, 4)}).has_value());
}

TEST(FirstDivergence, RankThatHasNotReachedASeqDoesNotDiverge) {
  EXPECT_FALSE(first_divergence({running(0, 4, 4, 4), running(1, 2, 2, 2)}).has_value());
}

TEST(FirstDivergence, CountZeroOnEveryRankComparesEqual) {
  EXPECT_FALSE(first_divergence({running(0, 2, 2, 2, 0), running(1, 2, 2, 2, 0)}).has_value());
}

TEST(FirstDivergence, SmallestDifferingSeqIsFound) {
  RankProgress odd = running(1, 5, 5, 5);
  odd.recent[3].count = 512;
  odd.recent[5].name = "allgather";
  const auto d = first_divergence({running(0, 5, 5, 5), odd});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->seq, 3);
}

TEST(FirstDivergence, MajorityIsTheReferenceAndTheOddRankIsAnOther) {
  RankProgress odd = running(1, 2, 2, 2);
  odd.recent[2].count = 512;
  const auto d = first_divergence({running(0, 2, 2, 2), odd, running(2, 2, 2, 2)});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->majority, (std::vector<int>{0, 2}));
  EXPECT_EQ(d->expected.count, 1024u);
  ASSERT_EQ(d->others.size(), 1u);
  EXPECT_EQ(d->others[0].first, 1);
  EXPECT_EQ(d->others[0].second.count, 512u);
}

TEST(FirstDivergence, DescriptionNamesTheSeqTheRankAndBothCounts) {
  RankProgress odd = running(1, 2, 2, 2);
  odd.recent[2].count = 512;
  const auto d = first_divergence({running(0, 2, 2, 2), odd, running(2, 2, 2, 2)});
  ASSERT_TRUE(d.has_value());
  const std::string text = describe(*d);
  EXPECT_TRUE(contains(text, "at #2")) << text;
  EXPECT_TRUE(contains(text,
                       "rank 1 enqueued allreduce of 512 elements where rank(s) 0, 2 "
                       "enqueued allreduce of 1024 elements"))
      << text;
}

TEST(ExplainProgress, RankStillStartingWhileOthersJoinIsNamed) {
  const std::string text = explain_progress(
      {in_phase(0, Phase::kJoining), in_phase(1, Phase::kStarting), in_phase(2, Phase::kJoining)},
      {}, 0);
  EXPECT_TRUE(
      contains(text, "rank(s) 1 never began joining the communicator, which rank(s) 0, 2 wait in"))
      << text;
}

TEST(ExplainProgress, RankStillJoiningWhileOthersRunIsNamed) {
  const std::string text =
      explain_progress({running(0, 1, 1, 0), in_phase(1, Phase::kJoining)}, {}, 0);
  EXPECT_TRUE(contains(text, "rank(s) 1 never joined the communicator that rank(s) 0 joined"))
      << text;
}

TEST(ExplainProgress, RankThatEnqueuedFewerOperationsIsNamed) {
  const std::string text =
      explain_progress({running(0, 5, 5, 4), running(1, 4, 4, 4), running(2, 5, 5, 4)}, {}, 0);
  EXPECT_TRUE(contains(text,
                       "rank(s) 1 never enqueued allreduce #5 (last enqueued: #4), which "
                       "rank(s) 0, 2 did"))
      << text;
}

TEST(ExplainProgress, RankWhoseGpuNeverStartedTheOperationIsNamed) {
  const std::string text =
      explain_progress({running(0, 5, 5, 4), running(1, 5, 4, 4), running(2, 5, 5, 4)}, {}, 0);
  EXPECT_TRUE(contains(text, "rank(s) 1 enqueued allreduce #5 but the GPU never started it"))
      << text;
  EXPECT_TRUE(contains(text, "while rank(s) 0, 2 started it")) << text;
}

TEST(ExplainProgress, NotStartedOnASharedGpuCarriesTheCaveat) {
  const std::string text =
      explain_progress({running(0, 5, 5, 4), running(1, 5, 4, 4)}, {}, 0, /*shared_gpu=*/true);
  EXPECT_TRUE(contains(text, "(the ranks share a GPU")) << text;
}

TEST(ExplainProgress, NotStartedOnOwnGpusHasNoCaveat) {
  const std::string text =
      explain_progress({running(0, 5, 5, 4), running(1, 5, 4, 4)}, {}, 0, /*shared_gpu=*/false);
  EXPECT_FALSE(contains(text, "share a GPU")) << text;
}

TEST(ExplainProgress, DivergenceIsGivenAsTheCause) {
  RankProgress odd = running(1, 5, 4, 4);
  odd.recent[3].count = 512;
  const std::string text = explain_progress({running(0, 5, 5, 4), odd}, {}, 0);
  EXPECT_TRUE(contains(text, "\n  cause: the ranks enqueued different operations at #3")) << text;
  EXPECT_FALSE(contains(text, "behind:")) << text;
}

TEST(ExplainProgress, OneLinePerRankUnderTheNamesGiven) {
  EXPECT_EQ(explain_progress({running(0, 5, 5, 5), running(1, 5, 5, 4)},
                             {"rank 0 (GPU 0)", "rank 1 (GPU 0)"}, 0),
            "where each rank stood (commtool's progress board):\n"
            "  rank 0 (GPU 0): running; last enqueued allreduce #5, complete\n"
            "  rank 1 (GPU 0): running; last enqueued allreduce #5, started on the GPU, not "
            "complete (last complete: #4)\n"
            "  behind: every rank that has not completed allreduce #5 started it on the GPU: the "
            "collective itself did not finish (NCCL, its transport, or a peer that died)");
}

TEST(ExplainProgress, BusyRankSaysHowLongItHasBeenInItsStep) {
  RankProgress busy = running(0, 5, 5, 4);
  busy.busy_since_ns = 1'000'000'000;
  const std::string text = explain_progress({busy}, {}, 3'500'000'000);
  EXPECT_TRUE(contains(text, "; in this step for 2.5 s")) << text;
}

TEST(StuckInStep, ARankIsStuckOnlyPastItsStepAndTheGrace) {
  RankProgress p;
  const std::chrono::duration<double> step(10.0);
  const int64_t s = 1'000'000'000;
  EXPECT_FALSE(stuck_in_step(p, step, 100 * s));  // not busy
  p.busy_since_ns = 5 * s;
  EXPECT_FALSE(stuck_in_step(p, step, 16 * s));  // 11 s: the bound itself
  EXPECT_TRUE(stuck_in_step(p, step, 16 * s + 1));
  const std::string text = stuck_in_step_text("rank 2 (GPU 0)", step);
  EXPECT_EQ(text.rfind("rank 2 (GPU 0) stayed inside one step for more than 11.0 s although a "
                       "step may take 10.0 s",
                       0),
            0u)
      << text;
}

// The GPU run of 2026-12-07 (stall:3:3 at 4 ranks, non-blocking communicators): rank 3 never
// started #3; rank 2 timed out in it, said so and exited, a zombie until reaped. The cause is
// rank 3, behind, not rank 2's exit.
TEST(ProgressAccount, ARankThatReportedItsTimeoutAndExitedIsNotTheCause) {
  using commtool::proc::ProcessLook;
  using commtool::proc::RunState;
  const std::vector<RankProgress> ranks = {running(0, 3, 3, 2), running(1, 3, 3, 2),
                                           running(2, 3, 3, 2), running(3, 3, 2, 2)};
  std::vector<std::optional<ProcessLook>> looks(4, ProcessLook{RunState::kRunning, "", 0, 1});
  looks[2]->state = RunState::kZombie;
  const std::string unfiltered = explain_progress(ranks, {}, 0, false, looks);
  EXPECT_TRUE(contains(unfiltered, "cause: rank 2's process is exited")) << unfiltered;

  forget_reported_exits(looks, {false, false, true, false});
  EXPECT_TRUE(ranks_that_cannot_run(looks).empty());
  const std::string text = explain_progress(ranks, {}, 0, false, looks);
  EXPECT_FALSE(contains(text, "cause:")) << text;
  EXPECT_TRUE(contains(text, "behind: rank(s) 3 enqueued")) << text;
}

// A zombie that never reported (it died) still holds the others, and so does a stopped one.
TEST(ProgressAccount, AZombieThatNeverReportedIsStillTheCause) {
  using commtool::proc::ProcessLook;
  using commtool::proc::RunState;
  std::vector<std::optional<ProcessLook>> looks(3, ProcessLook{RunState::kRunning, "", 0, 1});
  looks[1]->state = RunState::kZombie;
  looks[2]->state = RunState::kStopped;
  forget_reported_exits(looks, {true, false, true});
  EXPECT_EQ(ranks_that_cannot_run(looks), (std::vector<int>{1, 2}));
}
