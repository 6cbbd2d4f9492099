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
  return where_everyone_stands(rec, StandingOptions{.now_wall_ns = now, .job_ended = !m.hang});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A recording read as the hang monitor reads it.
Standing standing_of(const RecordingDir& dir, int64_t now_mono_ns) {
  RecordingReader reader(dir.path, Retention::kStanding);
  reader.poll();
  return where_everyone_stands(reader.recording(),
                               StandingOptions{.now_wall_ns = kRealtime0 + now_mono_ns - kMono0});
}

TEST(Standing, TheRankThatNeverStartedIsNamedWithItsLastOperation) {
  const Standing s = fixture_standing("hang_rank3");
  ASSERT_EQ(s.comms.size(), 1u);
  const CommStanding& c = s.comms[0];
  EXPECT_EQ(c.nranks, 4);
  ASSERT_TRUE(c.holdup);
  EXPECT_EQ(c.holdup->waiting, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.holdup->behind, (std::vector<int>{3}));
  EXPECT_EQ(c.holdup->waited.seq, 5u);
  EXPECT_EQ(s.in_flight, 3u);
  EXPECT_EQ(s.completed, 20u);
  for (const ProcessStanding& p : s.processes)
    EXPECT_EQ(p.state, ProcessState::kRunning) << p.file;
  const std::string text = render_standing_text(s);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "communicator 00000000000c0ffe (4 ranks): rank 3 never started AllReduce #5 - its "
            "last op was AllReduce #4, ended at 12:00:01; ranks 0-2 have waited in AllReduce #5 "
            "since 12:00:01 (61 s)")
      << text;
}

TEST(Standing, AMismatchIsNamedFirstWithBothValues) {
  const Standing s = fixture_standing("mismatch");
  ASSERT_EQ(s.comms[0].mismatches.size(), 1u);
  const Mismatch& m = s.comms[0].mismatches[0];
  EXPECT_EQ(m.index, 2u);
  EXPECT_EQ(m.field, "count");
  const std::string text = render_standing_text(s);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "MISMATCH on communicator 0123456789abcdef: operation 2 has count 1024 at rank 0 but "
            "count 2048 at rank 1: NCCL waits forever or mixes data")
      << text;
  EXPECT_TRUE(contains(text,
                       "ranks 0-1 have waited in AllReduce #2 since 12:00:01 (61 s); the "
                       "ranks disagree on what it is (the MISMATCH above)"))
      << text;
}

TEST(Standing, AFunctionOrTypeMismatchIsNamedToo) {
  RecordingDir dir;
  auto a = start_line(kComm, 0, 0, kMono0, "AllReduce");
  auto b = start_line(kComm, 1, 0, kMono0, "ReduceScatter");
  dir.append("a-1.jsonl", lines_of({proc_line(1), a}));
  dir.append("a-2.jsonl", lines_of({proc_line(2), b}));
  Standing s = standing_of(dir, kMono0 + kSecond);
  ASSERT_EQ(s.comms[0].mismatches.size(), 1u);
  EXPECT_EQ(s.comms[0].mismatches[0].field, "func");
  EXPECT_TRUE(
      contains(render_standing_text(s),
               "operation 0 has func AllReduce at rank 0 but func ReduceScatter at rank 1"));
  RecordingDir types;
  b = start_line(kComm, 1, 0, kMono0, "AllReduce");
  b.datatype = "ncclBfloat16";
  types.append("a-1.jsonl", lines_of({proc_line(1), a}));
  types.append("a-2.jsonl", lines_of({proc_line(2), b}));
  s = standing_of(types, kMono0 + kSecond);
  ASSERT_EQ(s.comms[0].mismatches.size(), 1u);
  EXPECT_EQ(s.comms[0].mismatches[0].field, "datatype");
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
  EXPECT_TRUE(s.comms[0].mismatches.empty());
  EXPECT_TRUE(contains(render_standing_text(s), "in flight: Send to 1 (op 0) since"));
}

TEST(Standing, AProcessWhoseHeartbeatStoppedWithWorkInFlightIsNamedStopped) {
  const Standing s = fixture_standing("dead_process");
  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.processes[0].state, ProcessState::kRunning);
  EXPECT_EQ(s.processes[1].state, ProcessState::kStopped);
  const std::string text = render_standing_text(s);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "STOPPED: process node-a pid 501 (rank 1 of 00000000deadbeef) has sent no heartbeat "
            "for 60 s with 1 operation in flight: it died or was killed")
      << text;
  // Both started the operation: the one whose process is gone will never finish it.
  EXPECT_TRUE(contains(text,
                       "ranks 0-1 have waited in AllReduce #3 since 12:00:01 (61 s); rank 1 "
                       "started it in a process that stopped (above) and will never finish it"))
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
  const Standing s = standing_of(dir, kMono0 + 10 * kSecond);
  ASSERT_TRUE(s.comms[0].holdup);
  EXPECT_TRUE(s.comms[0].holdup->behind.empty());
  const std::string text = render_standing_text(s);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "communicator 0000000000c0ffee (2 ranks): ranks 0-1 have waited in AllReduce #0 since "
            "12:00:00 (10 s); every recorded rank started it, so none is behind: what holds it is "
            "below the NCCL calls (a GPU, a link, the network)")
      << text;
}

TEST(Standing, AProcessThatFinalisedAndStoppedExited) {
  const Standing s = fixture_standing("two_rank_clean");
  for (const ProcessStanding& p : s.processes)
    EXPECT_EQ(p.state, ProcessState::kExited) << p.file;
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.completed, 14u);
  const std::string text = render_standing_text(s);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "Nothing in flight: every operation started has ended.");
}

TEST(Standing, RanksNoProcessRecordedAreNamed) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 4, "dp")}));
  dir.append("a-2.jsonl", lines_of({proc_line(2), comm_line(kComm, 1, 4, "dp")}));
  Standing s = standing_of(dir, kMono0 + kSecond);
  EXPECT_EQ(s.comms[0].unseen, (std::vector<int>{2, 3}));
  EXPECT_TRUE(contains(render_standing_text(s),
                       "communicator 0000000000c0ffee (\"dp\") (4 ranks): ranks 2-3 never recorded "
                       "on it"));
  // With the others waiting, the sentence says both.
  dir.append("a-1.jsonl", lines_of({start_line(kComm, 0, 0, kMono0)}));
  dir.append("a-2.jsonl", lines_of({start_line(kComm, 1, 0, kMono0)}));
  s = standing_of(dir, kMono0 + 3 * kSecond);
  EXPECT_TRUE(contains(render_standing_text(s),
                       "ranks 0-1 have waited in AllReduce #0 since 12:00:00 (3.0 s); ranks 2-3 "
                       "never recorded on it"));
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
  EXPECT_EQ(rank_list({5, 0, 1, 2, 7, 8}), "0-2,5,7-8");
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
