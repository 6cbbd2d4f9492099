// Where every rank stands: each rule of tracing/record/standing.hpp and the sentence it makes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "recording_builder.hpp"
#include "tracing/record/record_text.hpp"
#include "tracing/record/recording.hpp"
#include "tracing/record/standing.hpp"

namespace fs = std::filesystem;
using namespace commtool::record;
using namespace commtool::testing;

namespace {

const fs::path kFixtures = fs::path(COMMTOOL_FIXTURES_DIR) / "recordings";
constexpr uint64_t kComm = 0xc0ffee;

// The fixture's standing when the launcher saw the hang (or, without one, when the job ended).
Standing fixture_standing(const std::string& name) {
  const Recording rec = load_recording(kFixtures / name);
  const RecordingMeta& m = *rec.meta;
  const int64_t now = m.hang ? launcher_wall_ns(m, m.hang->monotonic_ns)
                             : m.started_realtime_ns + static_cast<int64_t>(m.ended->wall_s * 1e9);
  return where_everyone_stands(
      rec, StandingOptions{.now_wall_ns = now, .job_ended = !m.hang, .stuck = true, .lives = {}});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A recording read as the hang monitor reads it.
Standing standing_of(const RecordingDir& dir, int64_t now_mono_ns) {
  RecordingReader reader(dir.path, Retention::kStanding);
  reader.poll();
  return where_everyone_stands(
      reader.recording(),
      StandingOptions{
          .now_wall_ns = kRealtime0 + now_mono_ns - kMono0, .stuck = false, .lives = {}});
}

// The first line of the text: the verdict.
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

TEST(Standing, TheRankThatNeverStartedIsNamedWithItsLastOperation) {
  const Standing s = fixture_standing("hang_rank3");
  ASSERT_EQ(s.comms.size(), 1u);
  EXPECT_EQ(s.comms[0].nranks, 4);
  ASSERT_EQ(s.verdict.findings.size(), 1u);
  const commtool::crossrank::Finding& f = s.verdict.findings[0];
  EXPECT_EQ(f.rule, commtool::crossrank::Rule::kBehind);
  EXPECT_EQ(f.ranks, (std::vector<int>{3}));
  EXPECT_EQ(f.waiting, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f.seq, 5u);
  EXPECT_TRUE(s.verdict.hang);
  EXPECT_EQ(s.in_flight, 3u);
  EXPECT_EQ(s.completed, 20u);
  for (const ProcessStanding& p : s.processes)
    EXPECT_EQ(p.state, ProcessState::kRunning) << p.file;
  const std::string text = render_standing_text(s);
  EXPECT_EQ(first_line(text),
            "BEHIND on communicator 00000000000c0ffe (4 ranks): rank 3 never started AllReduce op "
            "5 (1048576 x ncclFloat32), which ranks 0-2 wait in since 12:00:01 UTC; its last "
            "completed operation is AllReduce op 4 (1048576 x ncclFloat32); its process is "
            "running.")
      << text;
}

TEST(Standing, AMismatchIsNamedFirstWithBothValuesAndTheWaitFollowsFromIt) {
  const Standing s = fixture_standing("mismatch");
  ASSERT_EQ(s.verdict.findings.size(), 2u);
  const commtool::crossrank::Finding& f = s.verdict.findings[0];
  EXPECT_EQ(f.rule, commtool::crossrank::Rule::kDisagree);
  EXPECT_EQ(f.seq, 2u);
  EXPECT_EQ(f.field, "count");
  const std::string text = render_standing_text(s);
  EXPECT_EQ(first_line(text),
            "DISAGREE on communicator 0123456789abcdef (2 ranks) at op 2: rank 0 called AllReduce "
            "op 2 (1024 x ncclFloat32) but rank 1 called AllReduce op 2 (2048 x ncclFloat32) (the "
            "count differs): NCCL hangs or mixes data.")
      << text;
  EXPECT_TRUE(contains(text,
                       "ranks 0,1 wait in AllReduce op 2 (1024 x ncclFloat32) since "
                       "12:00:01 UTC, which follows from the disagreement above"))
      << text;
  EXPECT_FALSE(contains(text, "below the NCCL calls")) << text;
}

TEST(Standing, AFunctionOrTypeMismatchIsNamedToo) {
  RecordingDir dir;
  auto a = start_line(kComm, 0, 0, kMono0, "AllReduce");
  auto b = start_line(kComm, 1, 0, kMono0, "ReduceScatter");
  dir.append("a-1.jsonl", lines_of({proc_line(1), a}));
  dir.append("a-2.jsonl", lines_of({proc_line(2), b}));
  Standing s = standing_of(dir, kMono0 + kSecond);
  ASSERT_EQ(s.verdict.findings.size(), 1u);  // not stuck: only the disagreement
  EXPECT_EQ(s.verdict.findings[0].field, "func");
  EXPECT_TRUE(contains(render_standing_text(s),
                       "rank 0 called AllReduce op 0 (1024 x ncclFloat32) but rank 1 called "
                       "ReduceScatter op 0"))
      << render_standing_text(s);
  RecordingDir types;
  b = start_line(kComm, 1, 0, kMono0, "AllReduce");
  b.datatype = "ncclBfloat16";
  types.append("a-1.jsonl", lines_of({proc_line(1), a}));
  types.append("a-2.jsonl", lines_of({proc_line(2), b}));
  s = standing_of(types, kMono0 + kSecond);
  ASSERT_EQ(s.verdict.findings.size(), 1u);
  EXPECT_EQ(s.verdict.findings[0].field, "datatype");
}

TEST(Standing, ADisagreementThatEndedIsStillNamedWhileTheMonitorKeepsIt) {
  // Rank 1 broadcast where rank 0 all-reduced (op 0), both ended; the hang comes at op 1.
  RecordingDir dir;
  const auto a0 = start_line(kComm, 0, 0, kMono0, "AllReduce");
  const auto b0 = start_line(kComm, 1, 0, kMono0, "Broadcast");
  const auto a1 = start_line(kComm, 0, 1, kMono0 + kUs, "AllReduce");
  const auto b1 = start_line(kComm, 1, 1, kMono0 + kUs, "AllReduce");
  dir.append("a-1.jsonl",
             lines_of({proc_line(1), comm_line(kComm, 0, 2), a0, end_line(a0, kMono0, kUs), a1,
                       np::AliveLine{kMono0 + 9 * kSecond}}));
  dir.append("a-2.jsonl",
             lines_of({proc_line(2), comm_line(kComm, 1, 2), b0, end_line(b0, kMono0, kUs), b1,
                       np::AliveLine{kMono0 + 9 * kSecond}}));
  RecordingReader reader(dir.path, Retention::kStanding);
  reader.poll();
  const Standing s = where_everyone_stands(
      reader.recording(),
      StandingOptions{.now_wall_ns = kRealtime0 + 10 * kSecond, .stuck = true, .lives = {}});
  ASSERT_EQ(s.verdict.findings.size(), 2u);
  EXPECT_EQ(s.verdict.findings[0].rule, commtool::crossrank::Rule::kDisagree);
  EXPECT_EQ(s.verdict.findings[0].seq, 0u);
  EXPECT_TRUE(s.verdict.findings[1].after_disagreement) << render_standing_text(s);
}

TEST(Standing, PointToPointPartnersAreNoMismatch) {
  RecordingDir dir;
  auto send = start_line(kComm, 0, 0, kMono0, "Send");
  auto recv = start_line(kComm, 1, 0, kMono0, "Recv");
  send.kind = recv.kind = np::OpKind::kP2p;
  send.seq = recv.seq = std::nullopt;
  send.peer = 1;
  recv.peer = 0;
  dir.append("a-1.jsonl", lines_of({proc_line(1), send}));
  dir.append("a-2.jsonl", lines_of({proc_line(2), recv}));
  const Standing s = standing_of(dir, kMono0 + kSecond);
  EXPECT_FALSE(s.verdict.error());
  EXPECT_TRUE(contains(render_standing_text(s), "in flight: Send to 1 (op 0) since"));
}

TEST(Standing, AWaitingRankWhoseHeartbeatStoppedHoldsTheOthers) {
  const Standing s = fixture_standing("dead_process");
  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.processes[0].state, ProcessState::kRunning);
  EXPECT_EQ(s.processes[1].state, ProcessState::kStopped);
  const std::string text = render_standing_text(s);
  EXPECT_EQ(first_line(text),
            "HELD on communicator 00000000deadbeef (2 ranks): rank 1 cannot finish AllReduce op 3 "
            "(1048576 x ncclFloat32), in flight since 12:00:01 UTC; its process went silent "
            "(stopped, frozen or dead): no heartbeat for 60 s; every rank started it, and ranks "
            "0,1 wait in AllReduce op 3 (1048576 x ncclFloat32) since 12:00:01 UTC.")
      << text;
}

TEST(Standing, WhatTheMonitorSawOfAProcessReplacesItsHeartbeat) {
  const Recording rec = load_recording(kFixtures / "dead_process");
  const RecordingMeta& m = *rec.meta;
  StandingOptions o{
      .now_wall_ns = launcher_wall_ns(m, m.hang->monotonic_ns), .stuck = true, .lives = {}};
  o.lives[{"node-a", 501}] = {commtool::crossrank::Liveness::kStopped,
                              "stopped by a signal (SIGSTOP, SIGTSTP)"};
  const std::string text = render_standing_text(where_everyone_stands(rec, o));
  EXPECT_TRUE(contains(first_line(text),
                       "rank 1 cannot finish AllReduce op 3 (1048576 x ncclFloat32), in flight "
                       "since 12:00:01 UTC; its process is stopped by a signal (SIGSTOP, SIGTSTP)"))
      << text;
}

TEST(Standing, WhenEveryRankStartedAndRunsTheHoldupIsBelowTheCalls) {
  RecordingDir dir;
  dir.append("a-1.jsonl",
             lines_of({proc_line(1), comm_line(kComm, 0, 2), start_line(kComm, 0, 0, kMono0),
                       np::AliveLine{kMono0 + 9 * kSecond}}));
  dir.append("a-2.jsonl",
             lines_of({proc_line(2), comm_line(kComm, 1, 2), start_line(kComm, 1, 0, kMono0),
                       np::AliveLine{kMono0 + 9 * kSecond}}));
  const Standing quiet = standing_of(dir, kMono0 + 10 * kSecond);
  EXPECT_FALSE(quiet.verdict.error());  // no hang seen: in flight is in progress
  EXPECT_TRUE(contains(render_standing_text(quiet), "2 operations in flight, none stuck so far"));
  RecordingReader reader(dir.path, Retention::kStanding);
  reader.poll();
  const Standing s = where_everyone_stands(
      reader.recording(),
      StandingOptions{.now_wall_ns = kRealtime0 + 10 * kSecond, .stuck = true, .lives = {}});
  const std::string text = render_standing_text(s);
  EXPECT_TRUE(contains(first_line(text),
                       "BELOW NCCL on communicator 0000000000c0ffee (2 ranks): ranks 0,1 wait in "
                       "AllReduce op 0 (1024 x ncclFloat32) since 12:00:00 UTC, every rank "
                       "started it and every process runs: what holds it is below the NCCL calls"))
      << text;
}

TEST(Standing, AProcessThatFinalisedAndStoppedExited) {
  const Standing s = fixture_standing("two_rank_clean");
  for (const ProcessStanding& p : s.processes)
    EXPECT_EQ(p.state, ProcessState::kExited) << p.file;
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.completed, 14u);
  EXPECT_FALSE(s.verdict.error());
  EXPECT_EQ(first_line(render_standing_text(s)),
            "Nothing in flight: every operation started has ended.");
}

TEST(Standing, RanksNoProcessRecordedAreNamed) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 4, "dp")}));
  dir.append("a-2.jsonl", lines_of({proc_line(2), comm_line(kComm, 1, 4, "dp")}));
  Standing s = standing_of(dir, kMono0 + kSecond);
  EXPECT_EQ(s.comms[0].unseen, (std::vector<int>{2, 3}));
  EXPECT_TRUE(contains(render_standing_text(s),
                       "MISSING on communicator 0000000000c0ffee (\"dp\") (4 ranks): ranks 2,3 "
                       "have no records"))
      << render_standing_text(s);
}

TEST(Standing, UnverifiedEndsCountApartFromCompletedAndInFlight) {
  RecordingDir dir;
  const auto s0 = start_line(kComm, 0, 0, kMono0);
  const auto s1 = start_line(kComm, 0, 1, kMono0);
  dir.append("a-1.jsonl", lines_of({proc_line(1), s0, s1, end_line(s0, kMono0, kUs),
                                    end_line(s1, kMono0, kUs, 0, 0, false)}));
  const Standing s = standing_of(dir, kMono0 + kSecond);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.completed, 1u);
  EXPECT_EQ(s.unverified, 1u);
  EXPECT_TRUE(contains(render_standing_text(s), "(unverified)"));
}

TEST(Standing, DropsAreWarnedAbout) {
  RecordingDir dir;
  dir.append("a-1.jsonl",
             lines_of({proc_line(1), np::DropLine{12, kMono0 + kSecond, kMono0 + 2 * kSecond}}));
  const Standing s = standing_of(dir, kMono0 + 3 * kSecond);
  EXPECT_EQ(s.processes[0].dropped_lines, 12u);
  EXPECT_TRUE(contains(render_standing_text(s),
                       "WARNING: process node-a pid 1 lost 12 lines since 12:00:01"));
}

TEST(RecordText, RanksOperationsAndTimesReadTheSameEverywhere) {
  EXPECT_EQ(rank_list({5, 0, 1, 2, 7, 8}), "0-2,5,7,8");  // two in a row: "7,8"
  EXPECT_EQ(ranks_phrase({3}), "rank 3");
  OpRef op;
  op.func = "AllReduce";
  op.index = 9;
  EXPECT_EQ(op_label(op), "AllReduce op 9");
  op.seq = 4;
  EXPECT_EQ(op_label(op), "AllReduce #4");
  EXPECT_EQ(utc_date_time(kRealtime0 + 1'500'000'000), "2026-12-04 12:00:01 UTC");
  EXPECT_EQ(seconds_text(61.4), "61 s");
  EXPECT_EQ(seconds_text(2.54), "2.5 s");
}

}  // namespace
