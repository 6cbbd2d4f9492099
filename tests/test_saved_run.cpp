// The saved-run format's run.json and the directory save_run writes: every field kept, unknown
// names refused, and what load_run says of a directory that is not a whole saved run.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

#include "probes/base/error.hpp"
#include "record_io_test_support.hpp"
#include "tracing/trace/record_io.hpp"

using namespace commtool::tracing;
using namespace record_io_test;
using commtool::Error;
using commtool::ExitCode;
namespace fs = std::filesystem;
namespace nccl_profiler = commtool::nccl_profiler;

// ---- JSON ---------------------------------------------------------------------------------------

namespace {

RankRun sample_rank() {
  RankRun r;
  r.rank = 1;
  r.device = 3;
  r.bus_id = "0000:1b:00.0";
  r.gpu_name = "NVIDIA H200";
  r.plugin_status = "loaded";
  r.clock_note = "CUPTI timestamps joined to CLOCK_MONOTONIC at start";
  r.samples.push_back({5, 1 << 20, CompletionMode::kAsyncWait, 0, true, 12.5, 3.25, 0});
  r.samples.push_back({6, 1 << 21, CompletionMode::kBlockingWait, 10, false, 40.0, 2.5, 7});
  r.scope.push_back({9, CompletionMode::kDeviceSync, 0, 1500.5, true, -20.25, 0});
  nccl_profiler::CollectiveRecord c;
  c.comm_id = 0xfeedfacecafe;
  c.rank = 1;
  c.nranks = 8;
  c.seq = 5;
  c.func = "AllReduce";
  c.count = 262144;
  c.datatype = "ncclFloat32";
  c.algo = "RING";
  c.proto = "LL128";
  c.channels = 16;
  c.warps = 20;
  c.start_ns = -5;
  c.stop_ns = 123456789;
  r.nccl.push_back(c);
  r.records.api.push_back({1, 2, 3, 4, "cudaLaunchKernel"});
  return r;
}

bool same_except_records(const RankRun& a, const RankRun& b) {
  return std::tie(a.rank, a.device, a.bus_id, a.gpu_name, a.plugin_status, a.clock_note) ==
             std::tie(b.rank, b.device, b.bus_id, b.gpu_name, b.plugin_status, b.clock_note) &&
         same(a.samples, b.samples) && same(a.scope, b.scope) && same(a.nccl, b.nccl);
}

RunMeta sample_meta() {
  RunMeta m;
  m.collective = Collective::kReduce;
  m.dtype = DataType::kBfloat16;
  m.op = ReduceOp::kMax;
  m.inplace = true;
  m.root = 2;
  m.nranks = 8;
  m.sizes = {8, 1 << 20, kMax64};
  m.modes = {CompletionMode::kSync, CompletionMode::kBlockingWait};
  m.poll_ms = 3;
  m.iters = 20;
  m.warmup = 5;
  m.cupti = false;
  m.untraced_pass = false;
  m.scope_samples = 4;
  m.scope_sleep_ms = 50.5;
  m.scope_bytes = 1 << 28;
  m.nccl_version = "2.28.3";
  m.nccl_library = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
  m.commtool_version = "0.3.0 (abc1234)";
  m.started_at = "2025-01-02T03:04:05Z";
  m.hostname = "gpu-node-7";
  m.saved_at = "2025-01-02T03:14:15Z";
  return m;
}

auto fields(const RunMeta& m) {
  return std::tie(m.collective, m.dtype, m.op, m.inplace, m.root, m.nranks, m.sizes, m.modes,
                  m.poll_ms, m.iters, m.warmup, m.cupti, m.untraced_pass, m.scope_samples,
                  m.scope_sleep_ms, m.scope_bytes, m.nccl_version, m.nccl_library,
                  m.commtool_version, m.started_at, m.hostname, m.saved_at);
}

}  // namespace

TEST(RunJson, RankRunKeepsEveryFieldButRecordsWhenAskedNotToCarryThem) {
  RankRun r = sample_rank();
  RankRun back = rank_run_from_json(to_json(r, /*with_records=*/false));
  EXPECT_TRUE(same_except_records(back, r));
  EXPECT_TRUE(back.records.api.empty());
}

TEST(RunJson, RankRunCarriesItsRecordsAsRecordText) {
  RankRun r = sample_rank();
  nlohmann::json j = to_json(r, /*with_records=*/true);
  ASSERT_TRUE(j.at("records").is_string());
  EXPECT_TRUE(same(rank_run_from_json(j).records, r.records));
}

TEST(RunJson, CompletionModesAreWrittenByName) {
  nlohmann::json j = to_json(sample_rank(), false);
  EXPECT_EQ(j["samples"][0]["mode"], "async-wait");
}

TEST(RunJson, UnknownModeNamesTheSampleAndTheValue) {
  nlohmann::json j = to_json(sample_rank(), false);
  j["samples"][1]["mode"] = "eventually";
  try {
    rank_run_from_json(j);
    FAIL() << "accepted an unknown mode";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "\"samples\"[1]: \"mode\": \"eventually\" is not one of sync, async-wait, "
              "device-sync, blocking-wait");
  }
}

TEST(RunJson, MissingKeyIsNamed) {
  nlohmann::json j = to_json(sample_rank(), false);
  j.erase("gpu_name");
  EXPECT_THROW(
      {
        try {
          rank_run_from_json(j);
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()), "\"gpu_name\": missing");
          throw;
        }
      },
      Error);
}

TEST(RunJson, RunMetaKeepsEveryField) {
  RunMeta m = sample_meta();
  EXPECT_TRUE(fields(run_meta_from_json(to_json(m))) == fields(m));
}

TEST(RunJson, MetaWithoutCommReadsAsNonBlocking) {
  // Runs saved before commtool recorded the mode were made with non-blocking communicators.
  nlohmann::json j = to_json(sample_meta());
  j.erase("comm");
  EXPECT_EQ(run_meta_from_json(j).comm, commtool::nccl::CommMode::kNonBlocking);
}

TEST(RunJson, CommBlockingReadsAsBlocking) {
  nlohmann::json j = to_json(sample_meta());
  j["comm"] = "blocking";
  EXPECT_EQ(run_meta_from_json(j).comm, commtool::nccl::CommMode::kBlocking);
}

TEST(RunJson, CommNonblockingRoundTrips) {
  RunMeta m = sample_meta();
  m.comm = commtool::nccl::CommMode::kNonBlocking;
  EXPECT_EQ(run_meta_from_json(to_json(m)).comm, commtool::nccl::CommMode::kNonBlocking);
}

TEST(RunJson, UnknownCommIsAUsageErrorNamingTheValueAndTheAcceptedOnes) {
  nlohmann::json j = to_json(sample_meta());
  j["comm"] = "sometimes";
  try {
    run_meta_from_json(j);
    FAIL() << "accepted an unknown communicator mode";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_EQ(std::string(e.what()), "\"comm\": \"sometimes\" is not one of blocking, nonblocking");
  }
}

// A saved run names its collective, type, reduction and modes; an unknown name is refused with
// the key and the accepted names, never read as a default.
TEST(RunJson, UnknownNamesAreUsageErrorsNamingKeyValueAndAcceptedOnes) {
  for (const auto& [key, value, accepted] :
       {std::tuple{"collective", "allscatter", "allreduce, allgather"},
        std::tuple{"dtype", "float128", "int8, uint8"}, std::tuple{"op", "xor", "sum, prod"}}) {
    nlohmann::json j = to_json(sample_meta());
    j[key] = value;
    try {
      run_meta_from_json(j);
      ADD_FAILURE() << "accepted " << key << " " << value;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("\"{}\": \"{}\" is not one of {}", key, value, accepted)),
                std::string::npos)
          << what;
    }
  }
  nlohmann::json j = to_json(sample_meta());
  j["modes"] = {"sync", "sometimes"};
  EXPECT_THROW(run_meta_from_json(j), Error);
}

// ---- saved runs ---------------------------------------------------------------------------------

namespace {

class SavedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("commtool-record-io-" + std::to_string(getpid()) + "-" + test->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "run").string();
    run_.meta = sample_meta();
    run_.meta.nranks = 2;
    run_.meta.root = 1;
    run_.meta.sizes = {8, 1 << 20, 1 << 21};  // whole bfloat16 elements; every sample's size
    run_.meta.modes = {CompletionMode::kAsyncWait, CompletionMode::kDeviceSync,
                       CompletionMode::kBlockingWait};  // every sample's mode
    run_.ranks = {sample_rank(), sample_rank()};
    run_.ranks[0].rank = 0;
    run_.ranks[1].records.operations.push_back(mark(5, 1, true));
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(fs::path(dir_) / name, std::ios::binary) << text;
  }
  // The message load_run throws for dir_; fails the test if it throws none.
  std::string load_error() {
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
  TraceRun run_;
};

}  // namespace

TEST_F(SavedRun, LoadGivesBackWhatWasSaved) {
  save_run(dir_, run_);
  TraceRun back = load_run(dir_);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_NE(back.meta.saved_at, run_.meta.saved_at);  // save_run says when it saved
  back.meta.saved_at = run_.meta.saved_at;
  EXPECT_TRUE(fields(back.meta) == fields(run_.meta));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_except_records(back.ranks[i], run_.ranks[i])) << i;
    EXPECT_TRUE(same(back.ranks[i].records, run_.ranks[i].records)) << i;
  }
}

TEST_F(SavedRun, WritesRunJsonAndARecordsFilePerRankAndNothingElse) {
  save_run(dir_, run_);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"run.json", "records-rank0.txt", "records-rank1.txt"}));
}

TEST_F(SavedRun, RunJsonHoldsSchemaVersionAndNoRecords) {
  save_run(dir_, run_);
  std::ifstream in(fs::path(dir_) / "run.json");
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_FALSE(j.at("ranks").at(0).contains("records"));
}

TEST_F(SavedRun, CreatesMissingParentDirectories) {
  dir_ = (root_ / "a" / "b" / "run").string();
  save_run(dir_, run_);
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "run.json"));
}

TEST_F(SavedRun, OverwritesAPreviousSaveAndDropsRanksItNoLongerHas) {
  save_run(dir_, run_);
  run_.ranks.pop_back();
  run_.meta.nranks = 1;
  run_.meta.root = 0;
  run_.ranks[0].gpu_name = "second save";
  save_run(dir_, run_);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "records-rank1.txt"));
  EXPECT_EQ(load_run(dir_).ranks.at(0).gpu_name, "second save");
}

TEST_F(SavedRun, RefusesANonEmptyDirectoryThatIsNotASave) {
  fs::create_directories(dir_);
  write("notes.txt", "mine\n");
  try {
    save_run(dir_, run_);
    FAIL() << "wrote into a foreign directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("notes.txt is not one of its files"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "run.json"));
}

TEST_F(SavedRun, SavesIntoAnEmptyDirectory) {
  fs::create_directories(dir_);
  save_run(dir_, run_);
  EXPECT_EQ(load_run(dir_).ranks.size(), 2u);
}

TEST_F(SavedRun, LoadOfAMissingDirectorySaysSo) {
  EXPECT_EQ(load_error(),
            dir_ + ": no such directory; give a directory written by commtool trace --save");
}

TEST_F(SavedRun, LoadWithoutRunJsonNamesIt) {
  fs::create_directories(dir_);
  EXPECT_NE(load_error().find(dir_ + "/run.json: missing"), std::string::npos);
}

TEST_F(SavedRun, LoadOfBadJsonNamesTheFile) {
  save_run(dir_, run_);
  write("run.json", "{\"schema_version\": 1,");
  EXPECT_EQ(load_error().rfind(dir_ + "/run.json: not valid JSON", 0), 0u);
}

TEST_F(SavedRun, LoadOfAnotherSchemaVersionSaysWhichIsRead) {
  save_run(dir_, run_);
  write("run.json", "{\"schema_version\": 7, \"meta\": {}, \"ranks\": []}");
  EXPECT_EQ(load_error(),
            dir_ + "/run.json: schema_version 7 is not supported; this build reads 1");
}

TEST_F(SavedRun, LoadWithAMissingRecordsFileNamesIt) {
  save_run(dir_, run_);
  fs::remove(fs::path(dir_) / "records-rank1.txt");
  EXPECT_EQ(load_error(), dir_ + "/records-rank1.txt: missing; run.json lists rank 1");
}

TEST_F(SavedRun, LoadOfACorruptRecordsFileNamesFileLineAndField) {
  save_run(dir_, run_);
  write("records-rank0.txt", "commtool-records 1\na 1 2 3 4 ok\na 1 2 three 4 bad\n");
  EXPECT_EQ(load_error(),
            dir_ + "/records-rank0.txt:3: api start_ns: \"three\" is not a decimal number");
}

// Asked before a run is measured (trace --save): a bad target must not cost the run.
TEST_F(SavedRun, SaveTargetIsCheckedBeforeAnythingIsWritten) {
  EXPECT_NO_THROW(check_save_dir(dir_));                          // new, in a writable directory
  EXPECT_NO_THROW(check_save_dir((root_ / "a" / "b").string()));  // parents created later
  save_run(dir_, run_);
  EXPECT_NO_THROW(check_save_dir(dir_));  // an earlier saved run is replaced
  std::ofstream(root_ / "notes.txt") << "mine";
  try {
    check_save_dir(root_.string());
    ADD_FAILURE() << "accepted a directory holding the user's files";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("not empty and not a saved run"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_save_dir((root_ / "notes.txt" / "run").string()), Error);
  EXPECT_THROW(check_save_dir("/proc/commtool/run"), Error);
}
