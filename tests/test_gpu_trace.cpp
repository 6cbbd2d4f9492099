// GPU tests of `commtool trace` as a user runs it, on one GPU: every collective runs and
// verifies at one rank, per operation and in back-to-back batches, the four completion modes and
// the stream-scope check behave as the completion levels say they must, and a saved run re-analysed
// by `commtool report` gives the same figures. Timing is printed by the benchmarks, never asserted
// here.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using CliRun = cli_test::CliResult;  // out: stdout only, the JSON document

CliRun commtool(const std::string& args) {
  return cli_test::run_commtool(args, false);
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "commtool-gpu-trace-XXXXXX").string();
    path = mkdtemp(p.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

const json* split_row(const json& doc, const std::string& mode, int poll_ms) {
  for (const json& row : doc.at("completion_split")) {
    if (row.at("mode") == mode && row.at("poll_ms") == poll_ms) return &row;
  }
  return nullptr;
}

const json* scope_row(const json& doc, const std::string& mode, int poll_ms) {
  for (const json& row : doc.at("stream_scope")) {
    if (row.at("mode") == mode && row.at("poll_ms") == poll_ms) return &row;
  }
  return nullptr;
}

}  // namespace

TEST(GpuTrace, EveryCollectiveRunsAndVerifiesAtOneRank) {
  for (const char* c :
       {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"}) {
    CliRun r = commtool(std::string("trace ") + c +
                        " -b 4 -e 1M -f 64 -n 3 -w 1 --mode sync --no-cupti --json --batches 2");
    ASSERT_EQ(r.code, 0) << c << "\n" << r.out;
    // Every size has nccl-tests' statistic too, from two verified batches.
    for (const json& size : json::parse(r.out).at("sizes")) {
      EXPECT_EQ(size.at("batch_us").at("n"), 2) << c << " " << size.dump();
      EXPECT_GT(size.at("batch_us").at("median").get<double>(), 0) << c;
      EXPECT_EQ(size.at("wrong_elements"), 0) << c;
    }
  }
  for (const char* d : {"half", "bfloat16", "double", "int8", "uint64"}) {
    CliRun r =
        commtool(std::string("trace allreduce -d ") + d +
                 " -o max -b 64 -e 64K -f 32 -n 2 -w 1 --mode sync --no-cupti --json --inplace");
    EXPECT_EQ(r.code, 0) << d << "\n" << r.out;
  }
}

TEST(GpuTrace, EveryModeSplitsAndStreamScopeShowsWhatAWaitOrders) {
  TempDir dir;
  const fs::path saved = dir.path / "run";
  CliRun r = commtool(
      "trace allreduce -b 1K -e 1M -f 1024 -n 5 -w 2 --mode all --poll-ms 10,0 "
      "--stream-scope --scope-samples 4 --scope-sleep-ms 20 --json --save " +
      saved.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::printf("%s\n", r.out.c_str());
  json doc = json::parse(r.out);
  ASSERT_EQ(doc.at("sizes").size(), 2u);
  for (const json& size : doc.at("sizes")) {
    EXPECT_EQ(size.at("wrong_elements"), 0);
    EXPECT_FALSE(size.at("traced_over_untraced").is_null());
  }
  // sync, async-wait, device-sync, blocking-wait at 10 ms and at 0: five rows per size.
  EXPECT_EQ(doc.at("completion_split").size(), 10u);
  for (const json& row : doc.at("completion_split")) {
    EXPECT_FALSE(row.at("kernel_us").is_null()) << row.dump();  // NCCL's copies at one rank
    EXPECT_FALSE(row.at("stream_dependency_us").is_null()) << row.dump();
  }
  const json* device = split_row(doc, "device-sync", 0);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->at("complete_at_wait_return"), device->at("operations"));
  const json* polled = split_row(doc, "blocking-wait", 10);
  ASSERT_NE(polled, nullptr);
  EXPECT_EQ(polled->at("complete_at_wait_return"), polled->at("operations"));
  EXPECT_TRUE(polled->at("host_wait_polls").get<bool>());

  // A stream wait orders stream A only; a host-blocking wait orders everything after it.
  const json* async = scope_row(doc, "async-wait", 0);
  ASSERT_NE(async, nullptr);
  EXPECT_EQ(async->at("b_before_a"), 4);
  EXPECT_EQ(async->at("complete_at_wait_return"), 0);
  const json* sync_event = scope_row(doc, "blocking-wait", 0);
  ASSERT_NE(sync_event, nullptr);
  EXPECT_EQ(sync_event->at("b_before_a"), 0);
  EXPECT_EQ(sync_event->at("complete_at_wait_return"), 4);

  // The saved run gives the same figures through commtool report, on any machine.
  CliRun again = commtool("report " + saved.string() + " --json");
  ASSERT_EQ(again.code, 0) << again.out;
  json re = json::parse(again.out);
  EXPECT_EQ(re.at("sizes"), doc.at("sizes"));
  EXPECT_EQ(re.at("completion_split"), doc.at("completion_split"));
  EXPECT_EQ(re.at("stream_scope"), doc.at("stream_scope"));
}

TEST(GpuTrace, ChromeTraceHasAProcessPerRankAndFlowArrows) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  CliRun r = commtool("trace allreduce -b 1M -e 1M -n 3 -w 1 --mode sync --trace " + file.string() +
                      " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  std::FILE* f = std::fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr);
  json trace = json::parse(f);
  std::fclose(f);
  bool flow = false, process = false;
  for (const json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") == "s") flow = true;
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") process = true;
  }
  EXPECT_TRUE(flow);
  EXPECT_TRUE(process);
}
