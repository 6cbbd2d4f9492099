// Reading a recording: record.json, and procs/*.jsonl polled while the job appends to them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "probes/base/error.hpp"
#include "recording_builder.hpp"
#include "tracing/record/recording.hpp"
#include "tracing/record/recording_meta.hpp"

namespace fs = std::filesystem;
using namespace commtool::record;
using namespace commtool::testing;
using commtool::Error;
using commtool::ExitCode;

namespace {

const fs::path kFixtures = fs::path(COMMTOOL_FIXTURES_DIR) / "recordings";
constexpr uint64_t kComm = 0xc0ffee;

// The message of the usage error `read` throws, or "" when it throws none.
template <class Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage) << e.what();
    return e.what();
  }
  return "";
}

RecordingMeta sample_meta() {
  RecordingMeta m;
  m.commtool_version = "0.1.0 (git 0123456789ab)";
  m.host = "node-a";
  m.command = {"torchrun", "train.py"};
  m.started_at = "2026-12-04T12:00:00Z";
  m.started_realtime_ns = kRealtime0;
  m.started_monotonic_ns = kMono0;
  m.hang_timeout_s = 60;
  m.kill_on_hang = true;
  m.plugin = "/opt/libcommtool_nccl_profiler.so";
  m.ended = RecordingEnd{"2026-12-04T12:01:00Z", 60.0, std::nullopt, 9, true};
  m.hang = RecordingHang{"2026-12-04T12:00:59Z", kMono0 + 59 * kSecond, 60.0};
  return m;
}

// ---- record.json ----------------------------------------------------------------------------

TEST(RecordingMeta, WhatIsWrittenReadsBackTheSame) {
  const RecordingMeta m = sample_meta();
  EXPECT_EQ(recording_meta_from_json(to_json(m)), m);
  RecordingMeta running = m;
  running.ended.reset();
  running.hang.reset();
  running.hang_timeout_s.reset();
  EXPECT_EQ(recording_meta_from_json(to_json(running)), running);
  EXPECT_TRUE(to_json(running)["ended"].is_null());
  EXPECT_EQ(to_json(m)["kind"], "commtool-record");
}

TEST(RecordingMeta, TheFixtureReads) {
  const RecordingMeta m = read_recording_meta(kFixtures / "hang_rank3");
  EXPECT_EQ(m.command.front(), "torchrun");
  ASSERT_TRUE(m.ended && m.hang);
  EXPECT_EQ(m.ended->signal, 9);
  EXPECT_EQ(m.ended->exit_code, std::nullopt);
  EXPECT_TRUE(m.ended->killed_by_commtool);
  EXPECT_EQ(m.hang->quiet_s, 60.0);
}

TEST(RecordingMeta, ABadDocumentIsRefusedNamingTheKey) {
  nlohmann::json j = to_json(sample_meta());
  j["kind"] = "commtool-trace";
  EXPECT_EQ(refusal([&] { recording_meta_from_json(j); }),
            "\"kind\": \"commtool-trace\" is not \"commtool-record\"");
  j = to_json(sample_meta());
  j["ended"]["exit_code"] = "0";
  EXPECT_EQ(refusal([&] { recording_meta_from_json(j); }),
            "\"ended\": \"exit_code\": \"0\" has the wrong type");
  j = to_json(sample_meta());
  j.erase("started_monotonic_ns");
  EXPECT_EQ(refusal([&] { recording_meta_from_json(j); }), "\"started_monotonic_ns\": missing");
  j = to_json(sample_meta());
  j["command"] = {"torchrun", 3};
  EXPECT_EQ(refusal([&] { recording_meta_from_json(j); }), "\"command\"[1]: expected a string");
}

TEST(RecordingMeta, AFileThatIsNotJsonOrMissingIsNamed) {
  RecordingDir dir;
  const std::string path = (dir.path / "record.json").string();
  EXPECT_EQ(refusal([&] { read_recording_meta(dir.path); }).rfind(path + ": cannot open", 0), 0u);
  std::ofstream(path) << "{\"kind\":";
  EXPECT_EQ(refusal([&] { read_recording_meta(dir.path); }).rfind(path + ": not valid JSON", 0),
            0u);
  std::ofstream(path) << "{\"kind\": \"commtool-record\", \"schema_version\": 2}";
  EXPECT_EQ(refusal([&] { read_recording_meta(dir.path); }),
            path + ": \"schema_version\": 2 is not supported; this build reads 1");
}

// ---- polling ---------------------------------------------------------------------------------

TEST(RecordingReader, APollReadsWhatWasAppendedAndKeepsAPartialLineForLater) {
  RecordingDir dir;
  RecordingReader reader(dir.path, Retention::kStanding);
  EXPECT_EQ(reader.poll(), 0u);  // no file yet
  const auto s0 = start_line(kComm, 0, 0, kMono0 + kSecond);
  dir.append("a-1.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 2), s0}));
  EXPECT_EQ(reader.poll(), 0u);
  ASSERT_EQ(reader.recording().processes.size(), 1u);
  EXPECT_EQ(reader.recording().processes[0].ranks[0].in_flight.size(), 1u);

  const std::string end = lines_of({end_line(s0, kMono0 + kSecond + 50 * kUs, 100 * kUs)});
  dir.append("a-1.jsonl", end.substr(0, 40));
  EXPECT_EQ(reader.poll(), 0u);  // the end line has not arrived whole
  EXPECT_EQ(reader.recording().processes[0].ranks[0].in_flight.size(), 1u);
  dir.append("a-1.jsonl", end.substr(40));
  EXPECT_EQ(reader.poll(), 1u);
  const RankRecord& r = reader.recording().processes[0].ranks[0];
  EXPECT_TRUE(r.in_flight.empty());
  EXPECT_EQ(r.completed, 1u);
  ASSERT_TRUE(r.last_ended);
  EXPECT_EQ(r.last_ended->op.index, 0u);
  EXPECT_EQ(reader.poll(), 0u);  // nothing new
}

TEST(RecordingReader, FilesThatAppearBetweenPollsAreRead) {
  RecordingDir dir;
  RecordingReader reader(dir.path, Retention::kStanding);
  dir.append("b-2.jsonl", lines_of({proc_line(2)}));
  reader.poll();
  dir.append("a-1.jsonl", lines_of({proc_line(1), np::AliveLine{kMono0}}));
  dir.append("ignored.tmp", "not a process file\n");
  reader.poll();
  const Recording& rec = reader.recording();
  ASSERT_EQ(rec.processes.size(), 2u);
  EXPECT_EQ(rec.processes[0].proc->pid, 2);  // in the order found
  EXPECT_EQ(rec.processes[1].proc->pid, 1);
  EXPECT_EQ(rec.processes[1].last_alive_ns, kMono0);
}

TEST(RecordingReader, ACutLineBeforeTheLastIsAnErrorNamingFileAndLine) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1)}) + "{\"k\":\"alive\",\"t\n" +
                              lines_of({np::AliveLine{kMono0}}));
  RecordingReader reader(dir.path, Retention::kAll);
  const std::string file = dir.proc_file("a-1.jsonl").string();
  EXPECT_EQ(refusal([&] { reader.poll(); }),
            file +
                ":2: not a record line (not JSON): {\"k\":\"alive\",\"t; only a file's last "
                "line may be cut off, once the job has ended");
}

TEST(RecordingReader, ALineParseLineRefusesIsNamedWithFileAndLine) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1)}) + "{\"k\":\"alive\"}\n");
  RecordingReader reader(dir.path, Retention::kStanding);
  const std::string message = refusal([&] { reader.poll(); });
  EXPECT_EQ(message.rfind(dir.proc_file("a-1.jsonl").string() + ":2: ", 0), 0u) << message;
  EXPECT_NE(message.find("\"t\""), std::string::npos) << message;
}

TEST(RecordingReader, AFileMustStartWithItsProcLine) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({np::AliveLine{kMono0}}));
  RecordingReader reader(dir.path, Retention::kStanding);
  EXPECT_EQ(refusal([&] { reader.poll(); }),
            dir.proc_file("a-1.jsonl").string() +
                ":1: a alive line first; a process's file starts with its proc line");
}

TEST(RecordingReader, AnOperationStartedTwiceIsRefused) {
  RecordingDir dir;
  const auto s = start_line(kComm, 0, 3, kMono0);
  dir.append("a-1.jsonl", lines_of({proc_line(1), s, s}));
  RecordingReader reader(dir.path, Retention::kStanding);
  EXPECT_EQ(refusal([&] { reader.poll(); }),
            dir.proc_file("a-1.jsonl").string() +
                ":3: communicator 0000000000c0ffee rank 0 started operation 3 again before it "
                "ended");
}

TEST(RecordingReader, FinishLeavesOutACutLastLineAndSaysSo) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1)}) + "{\"k\":\"start\",\"comm\":\"00");
  RecordingReader reader(dir.path, Retention::kAll);
  reader.poll();
  reader.finish();
  ASSERT_EQ(reader.recording().warnings.size(), 1u);
  EXPECT_EQ(reader.recording().warnings[0],
            dir.proc_file("a-1.jsonl").string() +
                ":2: the last line is cut off (23 bytes without a line end), left out: the "
                "process stopped while writing it");
}

TEST(RecordingReader, FinishKeepsAWholeLastRecordWithoutItsLineEnd) {
  RecordingDir dir;
  std::string text = lines_of({proc_line(1), np::AliveLine{kMono0 + 7}});
  text.pop_back();
  dir.append("a-1.jsonl", text);
  RecordingReader reader(dir.path, Retention::kAll);
  reader.poll();
  EXPECT_FALSE(reader.recording().processes[0].last_alive_ns);
  reader.finish();
  EXPECT_TRUE(reader.recording().warnings.empty());
  EXPECT_EQ(reader.recording().processes[0].last_alive_ns, kMono0 + 7);
}

TEST(RecordingReader, ALineLongerThanTheLimitIsRefusedBeforeItsEndArrives) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1)}) + std::string(kMaxLineBytes + 1, ' '));
  RecordingReader reader(dir.path, Retention::kStanding);
  EXPECT_EQ(refusal([&] { reader.poll(); }),
            dir.proc_file("a-1.jsonl").string() +
                ":2: more than 65536 bytes without a line end; a record line has at most that "
                "many");
}

TEST(RecordingReader, ANonRegularFileOrAFileOverTheLimitIsRefused) {
  RecordingDir dir;
  fs::create_directory(dir.proc_file("a-1.jsonl"));
  EXPECT_EQ(refusal([&] { RecordingReader(dir.path, Retention::kAll).poll(); }),
            dir.proc_file("a-1.jsonl").string() + ": is a directory; give a regular file");
  RecordingDir big;
  big.append("a-1.jsonl", lines_of({proc_line(1)}));
  const std::string message = refusal(
      [&] { RecordingReader(big.path, Retention::kAll, ReadLimits{.max_file_bytes = 10}).poll(); });
  EXPECT_NE(message.find("more than the 10 bytes commtool reads"), std::string::npos) << message;
}

TEST(RecordingReader, MoreOperationsThanTheLimitAreRefusedNamingTheLine) {
  RecordingDir dir;
  std::string text = lines_of({proc_line(1)});
  for (uint64_t i = 0; i < 3; ++i)
    text += lines_of({end_line(start_line(kComm, 0, i, kMono0), kMono0, kUs)});
  dir.append("a-1.jsonl", text);
  EXPECT_EQ(refusal([&] { load_recording(dir.path, ReadLimits{.max_operations = 2}); }),
            dir.proc_file("a-1.jsonl").string() +
                ":4: more than 2 operations in the recording; commtool report reads at most that "
                "many");
  EXPECT_EQ(load_recording(dir.path, ReadLimits{.max_operations = 3}).end_lines, 3u);
}

TEST(RecordingReader, AnOperationEndedTwiceIsRefusedNamingBothLines) {
  RecordingDir dir;
  const auto e1 = end_line(start_line(kComm, 0, 1, kMono0), kMono0, kUs);
  const auto e0 = end_line(start_line(kComm, 0, 0, kMono0), kMono0, kUs);
  dir.append("a-1.jsonl", lines_of({proc_line(1), e1, e0, e1}));
  EXPECT_EQ(refusal([&] { load_recording(dir.path); }),
            dir.proc_file("a-1.jsonl").string() +
                ":4: communicator 0000000000c0ffee rank 0 ended operation 1 again (first on line "
                "2)");
}

// End lines may come out of start order (record_line.hpp); the report reads them by index.
TEST(RecordingReader, EveryRanksOperationsAreOrderedByIndex) {
  RecordingDir dir;
  std::string text = lines_of({proc_line(1)});
  // Two cycles of the permutation (0 3 1 and 2 4), and 5 already in place.
  for (uint64_t index : {3, 0, 4, 1, 2, 5}) {
    auto e = end_line(start_line(kComm, 0, index, kMono0), kMono0, kUs);
    e.channels = static_cast<int>(index);  // travels with its operation
    text += lines_of({e});
  }
  dir.append("a-1.jsonl", text);
  const Recording rec = load_recording(dir.path);
  const auto& ops = rec.processes[0].ranks[0].ops;
  ASSERT_EQ(ops.size(), 6u);
  for (uint64_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].op.index, i);
    EXPECT_EQ(ops[i].channels, static_cast<int>(i));
  }
}

TEST(RecordingReader, OneRankInTwoProcessesIsRefused) {
  RecordingDir dir;
  dir.append("a-1.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 2)}));
  dir.append("a-2.jsonl", lines_of({proc_line(2), comm_line(kComm, 0, 2)}));
  EXPECT_EQ(refusal([&] { load_recording(dir.path); }),
            dir.proc_file("a-2.jsonl").string() +
                ": communicator 0000000000c0ffee rank 0 is also recorded by " +
                dir.proc_file("a-1.jsonl").string() + "; a rank belongs to one process");
}

// The hang monitor reads for as long as the job runs: what it keeps must not grow with it.
TEST(RecordingReader, StandingRetentionKeepsBoundedStateHoweverLongTheJob) {
  RecordingDir dir;
  RecordingReader reader(dir.path, Retention::kStanding);
  dir.append("a-1.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 1)}));
  uint64_t index = 0;
  for (int round = 0; round < 20; ++round) {
    std::string text;
    for (int i = 0; i < 500; ++i, ++index) {
      const auto s = start_line(kComm, 0, index, kMono0 + static_cast<int64_t>(index));
      text += lines_of({s});
      // Every tenth end line is lost (as to a drop): those starts stay without an end.
      if (index % 10 != 0) text += lines_of({end_line(s, kMono0, kUs)});
    }
    dir.append("a-1.jsonl", text);
    reader.poll();
  }
  const RankRecord& r = reader.recording().processes[0].ranks[0];
  EXPECT_TRUE(r.ops.empty());
  EXPECT_EQ(r.started, 10000u);
  EXPECT_EQ(r.completed, 9000u);
  EXPECT_EQ(r.in_flight.size() + r.forgotten, 1000u);
  EXPECT_LE(r.in_flight.size(), kMaxInFlightPerRank);
  ASSERT_TRUE(r.last_ended);
  EXPECT_EQ(r.last_ended->op.index, 9999u);
  // Past the bound the oldest starts are let go.
  std::string text;
  for (size_t i = 0; i < kMaxInFlightPerRank; ++i, ++index)
    text += lines_of({start_line(kComm, 0, index, kMono0)});
  dir.append("a-1.jsonl", text);
  reader.poll();
  EXPECT_EQ(reader.recording().processes[0].ranks[0].in_flight.size(), kMaxInFlightPerRank);
  EXPECT_EQ(reader.recording().processes[0].ranks[0].in_flight.begin()->first,
            index - kMaxInFlightPerRank);
}

TEST(RecordingReader, UnverifiedEndsAreEndedNotInFlight) {
  RecordingDir dir;
  const auto s = start_line(kComm, 0, 0, kMono0);
  dir.append("a-1.jsonl", lines_of({proc_line(1), s, end_line(s, kMono0, kUs, 0, 0, false)}));
  RecordingReader reader(dir.path, Retention::kStanding);
  reader.poll();
  const RankRecord& r = reader.recording().processes[0].ranks[0];
  EXPECT_TRUE(r.in_flight.empty());
  EXPECT_EQ(r.unverified, 1u);
  EXPECT_EQ(r.completed, 0u);
}

// ---- the fixtures ------------------------------------------------------------------------------

TEST(LoadRecording, TheCleanFixtureLoadsWhole) {
  const Recording rec = load_recording(kFixtures / "two_rank_clean");
  ASSERT_TRUE(rec.meta);
  EXPECT_EQ(rec.meta->ended->exit_code, 0);
  ASSERT_EQ(rec.processes.size(), 2u);
  EXPECT_EQ(rec.end_lines, 14u);
  for (const ProcessRecord& p : rec.processes) {
    ASSERT_EQ(p.ranks.size(), 1u);
    EXPECT_EQ(p.ranks[0].ops.size(), 7u);
    EXPECT_TRUE(p.ranks[0].fin_ns);
    EXPECT_TRUE(p.ranks[0].in_flight.empty());
  }
  EXPECT_TRUE(rec.warnings.empty());
}

TEST(LoadRecording, TheCutFixtureSaysWhichLineWasLeftOut) {
  const Recording rec = load_recording(kFixtures / "cut_last_line");
  ASSERT_EQ(rec.warnings.size(), 1u);
  EXPECT_NE(rec.warnings[0].find("node-a-401.jsonl:13: the last line is cut off (60 bytes"),
            std::string::npos)
      << rec.warnings[0];
}

TEST(LoadRecording, ADirectoryThatIsNotThereIsNamed) {
  EXPECT_EQ(refusal([] { load_recording("/nonexistent/rec"); }),
            "/nonexistent/rec: no such directory; give a directory written by commtool record");
}

}  // namespace
