// commtool report as a user runs it: a saved trace run or a recording re-analysed without a GPU,
// its --trace file, and the damaged saved runs it refuses naming file, line and field.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "cli_test_support.hpp"

namespace fs = std::filesystem;

namespace {

using cli_test::contains;
using cli_test::Result;
using cli_test::run;
using cli_test::TempDir;

}  // namespace

TEST(CliReport, MissingDirectoryIsUsageErrorNamingIt) {
  Result r = run("report /nonexistent/commtool-run");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "/nonexistent/commtool-run")) << r.out;
}

// tests/fixtures/trace_run: what `commtool trace allreduce -b 1K -e 4K -f 4 -n 3 -w 1
// --stream-scope --scope-samples 2 --scope-sleep-ms 5 --save DIR` wrote on the H200 machine
// (2026-12-03, NCCL 2.28.3, one rank). The same tables come back here, with no GPU.
namespace {
std::string trace_run() {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/trace_run";
}
}  // namespace

TEST(CliReport, ASavedRunIsReanalysedWithoutAGpu) {
  Result r = run("report " + trace_run());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "commtool trace allreduce: float sum, out-of-place, 1 rank(s)"));
  EXPECT_TRUE(contains(r.out, "rank 0: GPU 0 (0000:00:06.0, NVIDIA H200)")) << r.out;
  for (const char* row : {"1 KiB  sync", "1 KiB  async-wait", "1 KiB  device-sync",
                          "4 KiB  blocking-wait 10ms poll"}) {
    EXPECT_TRUE(contains(r.out, row)) << row << "\n" << r.out;
  }
  // The sleep-polling wait is labelled as host time, never read as kernel time.
  EXPECT_TRUE(contains(r.out, "host, polling")) << r.out;
  // What a wait orders: after sync and async-wait stream B's marker came first in both samples;
  // after device-sync it never did.
  EXPECT_TRUE(contains(r.out, "  sync                     2        2/2")) << r.out;
  EXPECT_TRUE(contains(r.out, "  device-sync              2        0/2")) << r.out;
  // At one rank NCCL copies and chooses no algorithm: unknown, with the reason, never a guess.
  EXPECT_TRUE(contains(r.out, "unknown (see NCCL profiler plugin below)")) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "NCCL profiler plugin: loaded; NCCL ran no collective kernel at one "
                       "rank (it copies), so it chose no algorithm or protocol"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "CUPTI records analysed: 1672")) << r.out;
}

TEST(CliReport, JsonCarriesTheRunsVersionAndEveryMode) {
  Result r = run("report " + trace_run() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\"schema_version\": 1")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"commtool_version\": \"0.1.0 (git bbcbb265625f)\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"mode\": \"blocking-wait\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"stream_scope\"")) << r.out;
}

TEST(CliReport, TraceFileHasTheRanksTracksAndFlowArrows) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  Result r = run("report " + trace_run() + " --trace " + file.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(text, "\"traceEvents\"")) << text.substr(0, 200);
  for (const char* track :
       {"\"rank 0\"", "\"producer stream 16\"", "\"NCCL stream 17\"", "\"consumer stream 18\""}) {
    EXPECT_TRUE(contains(text, track)) << track;
  }
  EXPECT_TRUE(contains(text, "\"ph\":\"s\"")) << "no flow arrow starts";
  EXPECT_TRUE(contains(text, "\"ph\":\"f\"")) << "no flow arrow ends";
}

TEST(CliReport, AHungRecordingWritesItsTraceAndExitsFive) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  const std::string rec = std::string(COMMTOOL_FIXTURES_DIR) + "/recordings/hang_rank3";
  Result r = run("report " + rec + " --trace " + file.string());
  ASSERT_EQ(r.code, 5) << r.out;  // `commtool report DIR || alert` fires
  EXPECT_TRUE(contains(r.out, "HANG: ")) << r.out;
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* track : {"\"node-a pid 203\"", "\"comm 00000000000c0ffe rank 3 host\"",
                            "\"comm 00000000000c0ffe rank 3 GPU\"", "\"AllReduce #4\""}) {
    EXPECT_TRUE(contains(text, track)) << track;
  }
}

TEST(CliReport, ExitStatusSaysWhatTheRecordingShows) {
  const std::string dir = std::string(COMMTOOL_FIXTURES_DIR) + "/recordings/";
  for (const auto& [name, code] : {std::pair{"hang_rank3", 5},
                                   {"mismatch", 5},
                                   {"dead_process", 5},
                                   {"two_rank_clean", 0},
                                   {"straggler", 0}}) {
    const Result r = run("report " + dir + name);
    EXPECT_EQ(r.code, code) << name << "\n" << r.out;
  }
}

TEST(CliReport, FlightRecorderDumpsGiveTheCrossRankVerdict) {
  const std::string dump = std::string(COMMTOOL_FIXTURES_DIR) + "/pickle/fr_clean_rank0.pickle";
  Result r = run("report " + dump);
  EXPECT_EQ(r.code, 5) << r.out;  // ranks 1 and 2 left no dump
  EXPECT_TRUE(contains(r.out,
                       "MISSING on process group 0 (\"default_pg\") (3 ranks): ranks 1,2 "
                       "have no records (no dump"))
      << r.out;
  r = run("--json report " + dump);
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_TRUE(contains(r.out, "\"kind\": \"flight-recorder\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"rule\": \"missing\"")) << r.out;
  // A directory: what is not a dump in it is left out with a word, not an error.
  r = run("report " + std::string(COMMTOOL_FIXTURES_DIR) + "/pickle");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_TRUE(contains(r.out, "values_p2.pickle: not a Flight Recorder dump")) << r.out;
  // A file named on the command line that is not one is exit 2.
  r = run("report " + std::string(COMMTOOL_FIXTURES_DIR) + "/pickle/values_p2.pickle");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("report " + dump + " --trace /tmp/commtool-fr-trace.json");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(std::filesystem::exists("/tmp/commtool-fr-trace.json"));
}

TEST(CliReport, RasAnswersAreReadInEitherForm) {
  const std::string dir = std::string(COMMTOOL_FIXTURES_DIR) + "/ras/";
  Result r = run("report " + dir + "func/ras.json");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_TRUE(contains(r.out, "1 missing comma(s) put back")) << r.out;
  EXPECT_TRUE(contains(r.out, "MISSING on communicator 0x93ec23942d4380df (3 ranks): rank 1"))
      << r.out;
  r = run("--json report " + dir + "func");  // a directory: both forms
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_TRUE(contains(r.out, "\"kind\": \"nccl-ras\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"form\": \"text\"")) << r.out;
  EXPECT_EQ(run("report " + dir + "size/ras.json").code, 0);
  // What the client saved when RAS did not answer (a rank was stopped): neither kind of file.
  r = run("report " + dir + "stop/ras.txt");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "an answer of NCCL's RAS nor NCCL's log")) << r.out;
}

TEST(CliReport, AFifoNamedOrFoundIsNeverWaitedOn) {
  TempDir dir;
  const std::string fifo = (dir.path / "nccl_trace_rank_0").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result r = run("report " + fifo);  // nothing ever writes it: a read would block for ever
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "is a pipe (FIFO)")) << r.out;
  r = run("report " + dir.path.string());
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(CliReport, ABadRecordingWritesNoTrace) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  Result r = run("report " + std::string(COMMTOOL_FIXTURES_DIR) + "/recordings/bad_line --trace " +
                 file.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "node-a-100.jsonl:3: ")) << r.out;
  EXPECT_FALSE(fs::exists(file));
}

TEST(CliReport, ACorruptRecordNamesFileAndLineAndWritesNothing) {
  TempDir dir;
  const fs::path copy = dir.path / "run";
  fs::copy(trace_run(), copy);
  fs::permissions(copy / "records-rank0.txt", fs::perms::owner_write, fs::perm_options::add);
  {
    std::ofstream out(copy / "records-rank0.txt", std::ios::app);
    out << "k 16 zz 1 2 name\n";
  }
  const fs::path file = dir.path / "trace.json";
  Result r = run("report " + copy.string() + " --trace " + file.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "records-rank0.txt:")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"zz\" is not a decimal number")) << r.out;
  EXPECT_FALSE(fs::exists(file));
}

TEST(CliReport, WrongTypeInRunJsonNamesTheField) {
  TempDir dir;
  const fs::path copy = dir.path / "run";
  fs::copy(trace_run(), copy);
  fs::permissions(copy / "run.json", fs::perms::owner_write, fs::perm_options::add);
  std::ifstream in(copy / "run.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  text.replace(text.find("\"nranks\": 1"), 11, "\"nranks\": \"x\"");
  std::ofstream(copy / "run.json") << text;
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "\"nranks\": \"x\" has the wrong type")) << r.out;
}

// The fixture was saved before trace --save wrote saved_at: it stays loadable, and says so.
TEST(CliReport, FirstLineSaysWhenWhereAndByWhatTheRunWasSaved) {
  Result r = run("report " + trace_run());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "Saved run: unknown on host vm by commtool 0.1.0 (git bbcbb265625f); run started "
            "2026-12-03 06:14 UTC");
  Result j = run("--json report " + trace_run());
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_TRUE(contains(j.out,
                       "\"saved_run\": {\n    \"commtool_version\": \"0.1.0 (git "
                       "bbcbb265625f)\",\n    \"hostname\": \"vm\",\n    \"saved_at\": null"))
      << j.out;
}

namespace {
// A writable copy of the fixture, with `edit` applied to one of its files.
fs::path edited_copy(const TempDir& dir, const std::string& file,
                     const std::function<std::string(std::string)>& edit) {
  const fs::path copy = dir.path / "run";
  fs::copy(trace_run(), copy);
  fs::permissions(copy / file, fs::perms::owner_write, fs::perm_options::add);
  std::ifstream in(copy / file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::ofstream(copy / file, std::ios::binary | std::ios::trunc) << edit(text);
  return copy;
}
}  // namespace

TEST(CliReport, ARecordCutOffMidLineIsAnalysedWithAWarningFirst) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "records-rank0.txt", [](std::string t) {
    return t.substr(0, t.size() - 10);  // inside the last line, 1673
  });
  Result r = run("report " + copy.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string second = r.out.substr(r.out.find('\n') + 1);
  EXPECT_EQ(second.substr(0, second.find('\n')),
            "WARNING: " + (copy / "records-rank0.txt").string() +
                ":1673: the last record is cut off (the file ends inside that line: a run killed "
                "while writing it?); analysed without it")
      << r.out;
  Result j = run("--json report " + copy.string());
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_TRUE(contains(j.out, "records-rank0.txt:1673: the last record is cut off")) << j.out;
}

TEST(CliReport, ADuplicatedRecordIsExit2NamingFileLineAndValue) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "records-rank0.txt", [](std::string t) {
    const size_t at = t.find("\no 33 ") + 1;
    return t + t.substr(at, t.find('\n', at) + 1 - at);
  });
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "records-rank0.txt:1674: operation seq 33: the same record as line "))
      << r.out;
}

TEST(CliReport, ARecordsFileOfAnotherRankIsExit2) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "run.json", [](std::string t) { return t; });
  fs::copy(copy / "records-rank0.txt", copy / "records-rank1.txt");
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "records-rank1.txt: rank: 1: is not a rank of this run")) << r.out;
}

TEST(CliReport, ANegativeTimeIsExit2NamingKeyAndValue) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "run.json", [](std::string t) {
    return t.replace(t.find("\"time_us\": 7.84"), 15, "\"time_us\": -7.84");
  });
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "\"samples\"[0]: \"time_us\": -7.84000009"
                       "2983246: is negative; accepted: a finite number"))
      << r.out;
}

// nlohmann keeps 18446744073709551615 unsigned; read as int64 it was -1, and the message said
// "-1 is negative" of a value nobody wrote.
TEST(CliReport, ATimeBeyondInt64IsNamedAsWrittenNotWrapped) {
  TempDir dir;
  const fs::path rec = dir.path / "rec";
  fs::copy(std::string(COMMTOOL_FIXTURES_DIR) + "/recordings/two_rank_clean", rec,
           fs::copy_options::recursive);
  std::ifstream in(rec / "record.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const std::string key = "\"started_monotonic_ns\": 499000000000";
  ASSERT_NE(text.find(key), std::string::npos);
  text.replace(text.find(key), key.size(), "\"started_monotonic_ns\": 18446744073709551615");
  fs::permissions(rec / "record.json", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(rec / "record.json", std::ios::trunc) << text;
  Result r = run("report " + rec.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "18446744073709551615 is out of range")) << r.out;
  EXPECT_FALSE(contains(r.out, "-1")) << r.out;
}

// fs::exists answers false when the lookup fails: a run.json that cannot be looked up was
// reported "missing", sending the user after a file that is there.
TEST(CliReport, AFileThatCannotBeLookedUpIsNamedWithWhyNotCalledMissing) {
  TempDir dir;
  const fs::path run_dir = dir.path / "run";
  fs::create_directory(run_dir);
  fs::create_symlink("run.json", run_dir / "run.json");  // a loop
  Result r = run("report " + run_dir.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "run.json: cannot be read: Too many levels of symbolic links"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "missing")) << r.out;
}

// A report written into the saved run or recording it reads would replace its data, or be read
// as part of it next time.
TEST(CliReport, AnOutputInsideTheDirectoryItReadsIsUsageError) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "run.json", [](std::string t) { return t; });
  const auto before = fs::file_size(copy / "run.json");
  for (const std::string& args :
       {"--json report " + copy.string() + " --output " + (copy / "run.json").string(),
        "report " + copy.string() + " --trace " + (copy / "run.json").string(),
        "report " + copy.string() + " --output " + (copy / "new.txt").string()}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "which this command reads")) << r.out;
  }
  EXPECT_EQ(fs::file_size(copy / "run.json"), before);
  EXPECT_FALSE(fs::exists(copy / "new.txt"));
}
