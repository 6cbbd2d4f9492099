// A saved run that is cut short, duplicated, foreign or impossible is never analysed silently:
// load_run refuses it (exit 2) naming file and line (or key), field and value, or, for a last
// record cut off mid-write only, analyses the rest and says so first.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "probes/base/error.hpp"
#include "reports/trace/trace_report.hpp"
#include "synthetic_records.hpp"
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/trace_analysis.hpp"

using namespace commtool::tracing;
using commtool::Error;
using commtool::ExitCode;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A valid two-rank run with CUPTI on: per rank three traced operations (seq 1-3, each with its
// operation mark and records) and one untraced one (seq 4), at one size and mode.
TraceRun valid_run() {
  TraceRun run;
  RunMeta& m = run.meta;
  m.collective = Collective::kAllReduce;
  m.dtype = DataType::kFloat32;
  m.nranks = 2;
  m.sizes = {1024};
  m.modes = {CompletionMode::kSync};
  m.cupti = true;
  m.commtool_version = "0.1.0 (git abc)";
  m.started_at = "2026-12-03T18:40:00Z";
  m.hostname = "h200-1";
  for (int rank = 0; rank < 2; ++rank) {
    RankRun r;
    r.rank = rank;
    r.bus_id = "0000:00:06.0";
    r.gpu_name = "NVIDIA H200";
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      synthetic_records::merge(r.records, synthetic_records::one_operation(
                                              seq * 10000, seq, static_cast<uint32_t>(10 * seq)));
      r.samples.push_back({seq, 1024, CompletionMode::kSync, 0, true, 20.0, 5.0, 0});
    }
    r.samples.push_back({4, 1024, CompletionMode::kSync, 0, false, 10.0, 4.0, 0});
    run.ranks.push_back(r);
  }
  return run;
}

class SavedRunChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("commtool-saved-checks-" + std::to_string(getpid()) + "-" + test->name());
    fs::remove_all(root_);
    dir_ = (root_ / "run").string();
    save_run(dir_, valid_run());
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary | std::ios::trunc) << text;
  }
  // Replaces the first `from` in the file by `to`; fails the test when it is not there.
  void edit(const std::string& name, const std::string& from, const std::string& to) const {
    std::string text = read(name);
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << name;
    write(name, text.replace(at, from.size(), to));
  }
  std::string load_error() const {
    try {
      load_run(dir_);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return e.what();
    }
    ADD_FAILURE() << "load_run accepted " << dir_;
    return "";
  }

  fs::path root_;
  std::string dir_;
};

}  // namespace

TEST_F(SavedRunChecks, AValidRunLoadsWithoutWarnings) {
  TraceRun run = load_run(dir_);
  EXPECT_TRUE(run.saved);
  EXPECT_TRUE(run.warnings.empty());
  EXPECT_EQ(run.ranks.at(1).records.operations.size(), 3u);
}

// ---- cut off, duplicated, foreign ---------------------------------------------------------------

TEST_F(SavedRunChecks, ALastRecordCutOffMidLineIsLeftOutWithAWarningNamingFileAndLine) {
  std::string text = read("records-rank1.txt");
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  write("records-rank1.txt", text.substr(0, text.size() - 5));  // inside the last line
  TraceRun run = load_run(dir_);
  ASSERT_EQ(run.warnings.size(), 1u);
  EXPECT_TRUE(has(run.warnings[0], path("records-rank1.txt") + ":" + std::to_string(lines) +
                                       ": the last record is cut off"))
      << run.warnings[0];
  // The report puts it first, in text and JSON.
  TraceReport report = analyse(run);
  const std::string out = commtool::reports::render_trace_text(report);
  EXPECT_TRUE(has(out.substr(0, out.find("commtool trace")), "WARNING: " + run.warnings[0])) << out;
  nlohmann::json j = commtool::reports::trace_to_json(report);
  EXPECT_EQ(j.at("saved_run").at("warnings").at(0), run.warnings[0]);
  EXPECT_EQ(j.at("warnings").at(0), run.warnings[0]);
}

TEST_F(SavedRunChecks, ACutOffOperationRecordSaysHowManyOperationsAreLeftOut) {
  // The operation marks come before the ranges; with no ranges they end the file.
  std::string text = read("records-rank0.txt");
  ASSERT_EQ(text.rfind("\no ", text.size() - 2) != std::string::npos, true);
  write("records-rank0.txt", text.substr(0, text.size() - 3));
  TraceRun run = load_run(dir_);
  ASSERT_EQ(run.warnings.size(), 1u);
  EXPECT_TRUE(has(run.warnings[0],
                  "1 of the 3 traced operations of rank 0 have no operation "
                  "record there"))
      << run.warnings[0];
}

TEST_F(SavedRunChecks, AMalformedRecordBeforeTheLastLineIsRefused) {
  edit("records-rank0.txt", "\no 1 ", "\no x ");
  EXPECT_TRUE(has(load_error(), "operation seq: \"x\" is not a decimal number")) << load_error();
}

TEST_F(SavedRunChecks, ARecordsFileCutAtALineEndIsRefusedByItsMissingOperations) {
  std::string text = read("records-rank1.txt");
  write("records-rank1.txt", text.substr(0, text.find("\no ") + 1));
  EXPECT_EQ(load_error(), path("records-rank1.txt") +
                              ": operation seq 1: missing, with 2 more: run.json has 3 traced "
                              "operations of rank 1 and this file marks 0; the file is incomplete "
                              "(cut short?); accepted: one operation record per traced sample");
}

TEST_F(SavedRunChecks, ADuplicatedOperationIsRefusedNamingBothLines) {
  std::string text = read("records-rank0.txt");
  const size_t first = text.find("\no 2 ") + 1;
  const std::string line = text.substr(first, text.find('\n', first) + 1 - first);
  write("records-rank0.txt", text + line);
  const size_t first_line =
      static_cast<size_t>(std::count(text.begin(), text.begin() + first, '\n')) + 1;
  const size_t last_line = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  EXPECT_EQ(load_error(), path("records-rank0.txt") + ":" + std::to_string(last_line) +
                              ": operation seq 2: the same record as line " +
                              std::to_string(first_line) +
                              "; each record appears once (a file joined or copied twice?)");
}

TEST_F(SavedRunChecks, AFileJoinedTwiceIsRefused) {
  std::string text = read("records-rank0.txt");
  write("records-rank0.txt", text + text.substr(text.find('\n') + 1));
  // The operation marks are checked first: the first one copied names both its lines.
  EXPECT_TRUE(has(load_error(), ": operation seq 1: the same record as line ")) << load_error();
}

TEST_F(SavedRunChecks, AnOperationRecordWithoutATracedSampleIsRefused) {
  edit("records-rank0.txt", "\no 3 ", "\no 4 ");  // 4 ran untraced
  EXPECT_TRUE(has(load_error(),
                  "operation seq: 4 is not a traced operation of rank 0 in "
                  "run.json; accepted: the seq of one of the rank's traced samples"))
      << load_error();
}

TEST_F(SavedRunChecks, ARecordsFileOfARankNotInTheRunIsRefused) {
  write("records-rank2.txt", read("records-rank1.txt"));
  EXPECT_EQ(load_error(), path("records-rank2.txt") +
                              ": rank: 2: is not a rank of this run (\"nranks\": 2); accepted: "
                              "records files of ranks 0 to 1 only (a file from another run?)");
}

TEST_F(SavedRunChecks, ARankTheMetadataCountsButRunJsonLacksIsRefused) {
  edit("run.json", "\"nranks\": 2", "\"nranks\": 3");
  EXPECT_TRUE(has(load_error(), "rank: 2: is missing: \"nranks\" is 3")) << load_error();
}

TEST_F(SavedRunChecks, ARankListedTwiceIsRefused) {
  edit("run.json", "\"rank\": 1", "\"rank\": 0");
  EXPECT_TRUE(has(load_error(), "\"ranks\"[1]: \"rank\": 0: is listed twice")) << load_error();
}

TEST_F(SavedRunChecks, AMissingRecordsFileIsRefused) {
  fs::remove(path("records-rank1.txt"));
  EXPECT_EQ(load_error(), path("records-rank1.txt") + ": missing; run.json lists rank 1");
}

// ---- impossible values --------------------------------------------------------------------------

TEST_F(SavedRunChecks, ANegativeTimeIsRefusedNamingKeyValueAndWhatIsAccepted) {
  edit("run.json", "\"time_us\": 20.0", "\"time_us\": -20.0");
  EXPECT_EQ(load_error(), path("run.json") +
                              ": \"ranks\"[0]: \"samples\"[0]: \"time_us\": -20: is negative; "
                              "accepted: a finite number of microseconds of 0 or more");
}

// JSON has no NaN or infinity; a number past a double's range is the one way to write one.
TEST_F(SavedRunChecks, AnInfiniteTimeIsRefused) {
  edit("run.json", "\"host_call_us\": 5.0", "\"host_call_us\": 1e999");
  EXPECT_TRUE(has(load_error(), path("run.json") + ": not valid JSON: ")) << load_error();
  EXPECT_TRUE(has(load_error(), "number overflow parsing '1e999'")) << load_error();
}

TEST_F(SavedRunChecks, ARecordThatEndsBeforeItStartsIsRefused) {
  // one_operation's NCCL kernel runs 1010..3010 after its shift.
  edit("records-rank0.txt", " 11010 13010 ", " 13010 11010 ");
  EXPECT_TRUE(has(load_error(), ": kernel end_ns: 11010 is before start_ns 13010")) << load_error();
}

TEST_F(SavedRunChecks, ASizeThatIsNotWholeElementsIsRefused) {
  edit("run.json", "\"sizes\": [\n      1024", "\"sizes\": [\n      1023");
  EXPECT_TRUE(has(load_error(),
                  "\"meta\": \"sizes\"[0]: 1023: is not a size allreduce of float "
                  "at 2 rank(s) can have; accepted: a positive whole number of "
                  "4-byte elements, such as 1020"))
      << load_error();
}

TEST_F(SavedRunChecks, ASampleOfASizeTheRunDoesNotHaveIsRefused) {
  edit("run.json", "\"bytes\": 1024", "\"bytes\": 2048");
  EXPECT_TRUE(has(load_error(),
                  "\"samples\"[0]: \"bytes\": 2048: is not one of the run's sizes; "
                  "accepted: 1024"))
      << load_error();
}

TEST_F(SavedRunChecks, AnOperationSampledTwiceIsRefused) {
  edit("run.json", "\"seq\": 2", "\"seq\": 1");
  EXPECT_TRUE(has(load_error(), "\"samples\"[1]: \"seq\": 1: is sampled twice on this rank"))
      << load_error();
}

TEST_F(SavedRunChecks, ANegativeRankCountIsRefused) {
  edit("run.json", "\"nranks\": 2", "\"nranks\": -2");
  EXPECT_TRUE(has(load_error(), "\"meta\": \"nranks\": -2: is below 1")) << load_error();
}

// ---- when, where and by what --------------------------------------------------------------------

TEST_F(SavedRunChecks, SaveWritesWhenItSavedInUtc) {
  TraceRun run = load_run(dir_);
  EXPECT_TRUE(std::regex_match(run.meta.saved_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << run.meta.saved_at;
  EXPECT_EQ(run.meta.hostname, "h200-1");
  const std::string out = commtool::reports::render_trace_text(analyse(run));
  EXPECT_EQ(out.substr(0, out.find('\n')),
            "Saved run: " + run.meta.saved_at.substr(0, 10) + " " +
                run.meta.saved_at.substr(11, 5) +
                " UTC on host h200-1 by commtool 0.1.0 (git abc); run started 2026-12-03 "
                "18:40 UTC");
}

TEST_F(SavedRunChecks, ARunSavedWithoutWhenWhereAndVersionSaysUnknown) {
  for (const char* key : {"saved_at", "hostname", "commtool_version", "started_at"})
    edit("run.json", std::string("\"") + key + "\":", std::string("\"unread_") + key + "\":");
  TraceRun run = load_run(dir_);
  const TraceReport report = analyse(run);
  const std::string out = commtool::reports::render_trace_text(report);
  EXPECT_EQ(out.substr(0, out.find('\n')),
            "Saved run: unknown on host unknown by commtool unknown");
  nlohmann::json j = commtool::reports::trace_to_json(report);
  EXPECT_TRUE(j.at("saved_run").at("saved_at").is_null());
  EXPECT_TRUE(j.at("saved_run").at("hostname").is_null());
  EXPECT_TRUE(j.at("commtool_version").is_null());
}

TEST_F(SavedRunChecks, ControlCharactersInTheFilesTextReachNoTerminal) {
  edit("run.json", "\"h200-1\"", "\"h200\\u001b[2J\"");
  const std::string out = commtool::reports::render_trace_text(analyse(load_run(dir_)));
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_TRUE(has(out, "on host h200\\x1b[2J")) << out.substr(0, out.find('\n'));
}

// Numbers nlohmann would convert with a plain cast (undefined for 4e30 into an integer) are
// refused before they are read: found by fuzz_saved_run.
TEST_F(SavedRunChecks, ANumberOutOfItsFieldsRangeIsRefusedNamingTheField) {
  nlohmann::json run = nlohmann::json::parse(read("run.json"));
  run["meta"]["sizes"] = nlohmann::json::array({1024, 4.096e30});
  write("run.json", run.dump());
  std::string what = load_error();
  EXPECT_TRUE(has(what, "\"sizes\": [1024,4.096e+30] has the wrong type or is out of range"))
      << what;

  run["meta"]["sizes"] = nlohmann::json::array({1024});
  run["meta"]["iters"] = 2.5;
  write("run.json", run.dump());
  what = load_error();
  EXPECT_TRUE(has(what, "\"iters\": 2.5 has the wrong type or is out of range")) << what;

  run["meta"]["iters"] = 3;
  run["meta"]["nranks"] = 4294967296;  // past int
  write("run.json", run.dump());
  what = load_error();
  EXPECT_TRUE(has(what, "\"nranks\": 4294967296 has the wrong type or is out of range")) << what;
}
