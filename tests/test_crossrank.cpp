// The cross-rank analysis (tracing/crossrank/crossrank.hpp): each rule, its order, the sets of
// ranks it writes, and its cost at 4,096 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "next_step_checks.hpp"
#include "tracing/crossrank/crossrank.hpp"

using namespace commtool::crossrank;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Call collective(std::string func, uint64_t count, std::string dtype) {
  Call c;
  c.func = std::move(func);
  c.count = count;
  c.datatype = std::move(dtype);
  return c;
}

Call all_reduce(uint64_t count = 1024, std::string dtype = "float32") {
  Call c = collective("AllReduce", count, std::move(dtype));
  c.redop = "sum";
  return c;
}

Call broadcast(uint64_t count, int root) {
  Call c = collective("Broadcast", count, "float32");
  c.root = root;
  return c;
}

Call p2p(std::string func, uint64_t count, int peer) {
  Call c;
  c.func = std::move(func);
  c.p2p = true;
  c.count = count;
  c.peer = peer;
  return c;
}

// `nranks` ranks that each completed `ops` identical all-reduces, #0 .. #ops-1.
Job lockstep(int nranks, uint64_t ops) {
  Job job;
  job.stuck = true;
  Group g{.id = "c0ffee", .name = "", .nranks = nranks, .ranks = {}};
  const uint32_t ar = job.call(all_reduce());
  for (int r = 0; r < nranks; ++r) {
    Rank rank{.rank = r, .where = "", .ops = {}, .finished = false, .life = {}};
    for (uint64_t s = 0; s < ops; ++s)
      rank.ops.push_back({.seq = s, .call = ar, .state = OpState::kCompleted});
    g.ranks.push_back(std::move(rank));
  }
  job.groups.push_back(std::move(g));
  return job;
}

Rank& rank(Job& job, int r) {
  for (Rank& x : job.groups[0].ranks)
    if (x.rank == r) return x;
  throw std::runtime_error("no such rank");
}

// Every rank but those in `skip` starts #seq and waits in it.
void start(Job& job, uint64_t seq, const std::vector<int>& skip = {}) {
  const uint32_t ar = job.call(all_reduce());
  for (Rank& r : job.groups[0].ranks) {
    if (std::find(skip.begin(), skip.end(), r.rank) != skip.end()) continue;
    r.ops.push_back({.seq = seq,
                     .call = ar,
                     .state = OpState::kStarted,
                     .start_wall_ns = 1'700'000'000'000'000'000});
  }
}

}  // namespace

TEST(Crossrank, CleanJobHasNoFinding) {
  Job job = lockstep(4, 10);
  normalise(job);
  const Verdict v = analyse(job);
  EXPECT_FALSE(v.error());
  EXPECT_FALSE(v.hang);
  EXPECT_TRUE(contains(render_text(job, v), "No disagreement"));
}

TEST(Crossrank, OtherCollectiveAtOnePositionIsTheVerdictBeforeTheHangItCauses) {
  Job job = lockstep(3, 8);
  rank(job, 1).ops[5].call = job.call(broadcast(1024, 0));
  start(job, 8);  // the hang that follows: every rank waits in #8
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_GE(v.findings.size(), 2u);
  const Finding& f = v.findings[0];
  EXPECT_EQ(f.rule, Rule::kDisagree);
  EXPECT_EQ(f.seq, 5u);
  ASSERT_EQ(f.sides.size(), 2u);
  EXPECT_EQ(f.sides[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(f.sides[1].ranks, (std::vector<int>{1}));
  EXPECT_EQ(f.field, "func");
  EXPECT_EQ(v.findings[1].rule, Rule::kBelow);  // a consequence, after it
  EXPECT_TRUE(v.hang);
  const std::string text = render_text(job, v);
  EXPECT_TRUE(contains(text,
                       "DISAGREE on communicator c0ffee (3 ranks) at #5: ranks 0,2 called "
                       "AllReduce #5 (1024 x float32, sum) but rank 1 called Broadcast #5 "
                       "(1024 x float32, root 0) (the func differs)"))
      << text;
  EXPECT_LT(text.find("DISAGREE"), text.find("BELOW NCCL"));
}

TEST(Crossrank, SizeMismatchWithoutHangIsAnError) {
  Job job = lockstep(3, 8);
  job.stuck = false;
  rank(job, 2).ops[3].call = job.call(all_reduce(2048));
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, Rule::kDisagree);
  EXPECT_EQ(v.findings[0].field, "count");
  EXPECT_FALSE(v.hang);
}

TEST(Crossrank, EachFieldIsCompared) {
  const Call a = all_reduce();
  EXPECT_EQ(differing_field(a, a), "");
  Call b = a;
  b.datatype = "bfloat16";
  EXPECT_EQ(differing_field(a, b), "datatype");
  b = a;
  b.redop = "max";
  EXPECT_EQ(differing_field(a, b), "redop");
  const Call x = broadcast(8, 0);
  Call y = x;
  y.root = 1;
  EXPECT_EQ(differing_field(x, y), "root");
  b = a;
  b.datatype = "";  // unknown: compares with nothing
  EXPECT_EQ(differing_field(a, b), "");
  const Call send = p2p("Send", 8, 1);
  const Call recv = p2p("Recv", 4, 0);
  EXPECT_EQ(differing_field(send, recv), "");
  EXPECT_EQ(differing_field(send, a), "func");
}

TEST(Crossrank, LaterDisagreementsAreCounted) {
  Job job = lockstep(2, 10);
  const uint32_t big = job.call(all_reduce(4096));
  rank(job, 1).ops[4].call = big;
  rank(job, 1).ops[7].call = big;
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].seq, 4u);
  EXPECT_EQ(v.findings[0].later, 1u);
  EXPECT_TRUE(contains(render_text(job, v), "1 later position disagree too"));
}

TEST(Crossrank, RankThatLeftIsMissingBeforeAnythingElse) {
  Job job = lockstep(3, 10);
  start(job, 10, {1});  // 0 and 2 wait in #10; rank 1 ended after #9
  rank(job, 1).finished = true;
  rank(job, 0).ops[2].call = job.call(all_reduce(7));  // a disagreement too: ranked after
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_GE(v.findings.size(), 2u);
  EXPECT_EQ(v.findings[0].rule, Rule::kMissing);
  EXPECT_EQ(v.findings[0].ranks, (std::vector<int>{1}));
  EXPECT_EQ(v.findings[0].waiting, (std::vector<int>{0, 2}));
  EXPECT_EQ(v.findings[1].rule, Rule::kDisagree);
  const std::string text = render_text(job, v);
  EXPECT_TRUE(contains(text, "rank 1 left without starting AllReduce #10")) << text;
  EXPECT_TRUE(contains(text, "its last completed operation is AllReduce #9")) << text;
}

TEST(Crossrank, RankWithoutRecordsIsMissing) {
  Job job = lockstep(4, 3);
  job.groups[0].ranks.pop_back();  // rank 3: never recorded
  start(job, 3);
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_FALSE(v.findings.empty());
  EXPECT_EQ(v.findings[0].rule, Rule::kMissing);
  EXPECT_EQ(v.findings[0].no_records, (std::vector<int>{3}));
  EXPECT_TRUE(contains(render_text(job, v), "rank 3 has no records")) << render_text(job, v);
}

TEST(Crossrank, RankThatNeverStartedIsBehindWithItsProcessState) {
  Job job = lockstep(3, 5);
  start(job, 5, {1});
  rank(job, 1).life = {Liveness::kStopped, "stopped by a signal (SIGSTOP, SIGTSTP)"};
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, Rule::kBehind);
  EXPECT_EQ(v.findings[0].ranks, (std::vector<int>{1}));
  const std::string text = render_text(job, v);
  EXPECT_TRUE(contains(text,
                       "BEHIND on communicator c0ffee (3 ranks): rank 1 never started "
                       "AllReduce #5 (1024 x float32, sum), which ranks 0,2 wait in since"))
      << text;
  EXPECT_TRUE(contains(text, "its process is stopped by a signal (SIGSTOP, SIGTSTP)")) << text;
}

TEST(Crossrank, AllStartedOneStoppedIsHeldNotBelowNccl) {
  Job job = lockstep(3, 5);
  start(job, 5);
  rank(job, 2).life = {Liveness::kStopped, ""};
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, Rule::kHeld);
  EXPECT_EQ(v.findings[0].ranks, (std::vector<int>{2}));
  EXPECT_FALSE(contains(render_text(job, v), "below the NCCL calls"));
}

TEST(Crossrank, AllStartedAllRunningIsBelowNccl) {
  Job job = lockstep(3, 5);
  start(job, 5);
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, Rule::kBelow);
  EXPECT_TRUE(contains(render_text(job, v), "below the NCCL calls"));
}

TEST(Crossrank, InFlightOfARunningJobIsNoFinding) {
  Job job = lockstep(3, 5);
  start(job, 5, {1});
  job.stuck = false;
  normalise(job);
  EXPECT_FALSE(analyse(job).error());
}

TEST(Crossrank, RingBuffersThatDroppedDifferentAmountsStillCompare) {
  Job job = lockstep(3, 20);
  auto& ops0 = rank(job, 0).ops;
  ops0.erase(ops0.begin(), ops0.begin() + 12);  // rank 0 holds #12-#19 only
  auto& ops2 = rank(job, 2).ops;
  ops2.erase(ops2.begin(), ops2.begin() + 5);
  rank(job, 1).ops[15].call = job.call(all_reduce(1024, "bfloat16"));
  normalise(job);
  const Verdict v = analyse(job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].seq, 15u);
  EXPECT_EQ(v.findings[0].field, "datatype");
}

TEST(Crossrank, UnnormalisedJobIsRefused) {
  Job job = lockstep(2, 3);
  std::swap(job.groups[0].ranks[0], job.groups[0].ranks[1]);
  EXPECT_THROW(analyse(job), std::logic_error);
}

TEST(Crossrank, RankSetsGrowWithGroupsNotRanks) {
  EXPECT_EQ(rank_set({3, 0, 1, 2, 5}, 0), "0-3,5");
  EXPECT_EQ(rank_set({1, 2, 4}, 0), "1,2,4");
  EXPECT_EQ(rank_set({0, 1, 2}, 3), "0-2");
  std::vector<int> all_but_17;
  for (int r = 0; r < 4096; ++r)
    if (r != 17) all_but_17.push_back(r);
  EXPECT_EQ(rank_set(all_but_17, 4096), "0-4095 except 17");
  EXPECT_EQ(rank_set({1, 3}, 4), "1,3");
  EXPECT_EQ(ranks_text({7}, 8), "rank 7");
}

TEST(Crossrank, ThousandsOfRanksAtOnePositionReadAsTwoSets) {
  Job job = lockstep(4096, 2000);
  rank(job, 17).ops.pop_back();
  start(job, 2000 - 1, {17});  // rank 17 behind: it never started #1999
  for (Rank& r : job.groups[0].ranks) {
    if (r.rank != 17) {
      r.ops.erase(r.ops.end() - 2);  // its completed #1999 replaced by the started one
    }
  }
  normalise(job);
  const auto t0 = std::chrono::steady_clock::now();
  const Verdict v = analyse(job);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, Rule::kBehind);
  const std::string text = render_text(job, v);
  EXPECT_TRUE(contains(text, "rank 17 never started AllReduce #1999")) << text;
  EXPECT_TRUE(contains(text, "ranks 0-4095 except 17 wait in")) << text;
  EXPECT_LT(text.size(), 1000u);
  RecordProperty("analyse_seconds", std::to_string(s));  // a figure, not an assertion
}

// --- what to do next: every finding says it, for its rule and its evidence ---

namespace {

// The verdict of `job`, every finding's advice checked and shown under it in the text.
Verdict checked(Job& job) {
  normalise(job);
  const Verdict v = analyse(job);
  const std::string text = render_text(job, v);
  for (size_t i = 0; i < v.findings.size(); ++i) {
    const std::string advice = finding_advice(job, v.findings[i]);
    next_step::expect_next_step(advice, to_string(v.findings[i].rule));
    EXPECT_TRUE(contains(text, finding_text(job, v.findings[i]) + ".\n" + (i == 0 ? "" : "  ") +
                                   "  what to do: " + advice + ".\n"))
        << text;
  }
  return v;
}

}  // namespace

TEST(CrossrankAdvice, EveryRuleEndsWithWhatToDoNext) {
  std::set<Rule> seen;
  const auto note = [&](const Verdict& v) {
    for (const Finding& f : v.findings)
      seen.insert(f.rule);
  };
  {
    Job job = lockstep(3, 10);  // a rank that left, a disagreement after it
    start(job, 10, {1});
    rank(job, 1).finished = true;
    rank(job, 0).ops[2].call = job.call(all_reduce(7));
    note(checked(job));
  }
  {
    Job job = lockstep(4, 3);  // a rank without records
    job.groups[0].ranks.pop_back();
    start(job, 3);
    note(checked(job));
  }
  for (Liveness l : {Liveness::kStopped, Liveness::kRunning, Liveness::kUninterruptible,
                     Liveness::kZombie, Liveness::kGone, Liveness::kSilent}) {
    Job behind = lockstep(3, 5);
    start(behind, 5, {1});
    rank(behind, 1).life = {l, ""};
    note(checked(behind));
    Job held = lockstep(3, 5);
    start(held, 5);
    rank(held, 2).life = {l, ""};
    note(checked(held));
  }
  {
    Job job = lockstep(3, 8);  // a disagreement, and the wait that follows from it
    rank(job, 1).ops[5].call = job.call(broadcast(1024, 0));
    start(job, 8);
    note(checked(job));
  }
  for (Rule r : {Rule::kMissing, Rule::kDisagree, Rule::kBehind, Rule::kHeld, Rule::kBelow})
    EXPECT_TRUE(seen.contains(r)) << to_string(r) << " was never made: the test misses a case";
}

TEST(CrossrankAdvice, NamesTheProcessToLookAtAndHowForWhatItDoes) {
  Job behind = lockstep(3, 5);
  start(behind, 5, {1});
  rank(behind, 1).where = "node-b pid 4711";
  Verdict v = checked(behind);
  EXPECT_EQ(finding_advice(behind, v.findings[0]),
            "look at what rank 1 (node-b pid 4711) is doing instead: its stack, `py-spy dump "
            "--pid 4711` for Python (pip package py-spy) or `gdb -p 4711 -batch -ex 'thread "
            "apply all bt'` (package gdb)");

  Job stopped = lockstep(3, 5);
  start(stopped, 5);
  rank(stopped, 2).life = {Liveness::kStopped, ""};
  rank(stopped, 2).where = "node-c pid 99";
  v = checked(stopped);
  EXPECT_TRUE(contains(finding_advice(stopped, v.findings[0]), "resume rank 2 (`kill -CONT 99`)"))
      << finding_advice(stopped, v.findings[0]);

  Job below = lockstep(3, 5);
  start(below, 5);
  v = checked(below);
  const std::string advice = finding_advice(below, v.findings[0]);
  EXPECT_TRUE(contains(advice, "on the hosts of ranks 0-2: the kernel log for Xid errors"))
      << advice;
  EXPECT_TRUE(contains(advice, "NCCL_DEBUG=INFO")) << advice;
  // The next step is said once, under the finding, not inside its sentence.
  EXPECT_FALSE(contains(finding_text(below, v.findings[0]), "Next:"));
}

TEST(CrossrankAdvice, ARankWithoutRecordsGetsTheArtifactsOwnCheck) {
  Job job = lockstep(4, 3);
  job.groups[0].ranks.pop_back();
  start(job, 3);
  job.absent_check = "look for its dump";
  const Verdict v = checked(job);
  EXPECT_TRUE(contains(finding_advice(job, v.findings[0]), "for rank 3: look for its dump"))
      << finding_advice(job, v.findings[0]);
}

TEST(CrossrankText, AnUnknownSizeOrTypeIsWrittenUnknown) {
  Job job = lockstep(2, 2);
  job.groups[0].nranks = 0;
  Call c;
  c.func = "AllReduce";
  c.count = 8;
  const uint32_t id = job.call(c);
  EXPECT_EQ(call_text(job, job.groups[0], id, 4), "AllReduce #4 (8 x unknown type)");
  rank(job, 1).ops[1].call = id;
  normalise(job);
  const std::string text = render_text(job, analyse(job));
  EXPECT_TRUE(contains(text, "communicator c0ffee (rank count unknown)")) << text;
  EXPECT_FALSE(contains(text, "?")) << text;
}
