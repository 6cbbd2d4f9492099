// nccl-tests' statistic beside the per-operation one: batches of operations back to back, each
// timed as one. What runs them, what a saved run keeps of them, and what the report says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "reports/trace/trace_report.hpp"
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/trace_analysis.hpp"

using namespace commtool::tracing;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kBytes = 1 << 20;

BatchSample batch(uint64_t first_seq, double time_us, int ops = 10) {
  BatchSample b;
  b.first_seq = first_seq;
  b.bytes = kBytes;
  b.ops = ops;
  b.time_us = time_us;
  return b;
}

// Two ranks, untraced, three batches of 10 operations each: the ranks' per-operation means are
// (10, 20), (12, 12) and (30, 10) us.
TraceRun run_with_batches() {
  TraceRun run;
  run.meta.collective = Collective::kAllReduce;
  run.meta.nranks = 2;
  run.meta.sizes = {kBytes};
  run.meta.modes = {CompletionMode::kSync};
  run.meta.cupti = false;
  run.meta.iters = 10;
  run.meta.batches = 3;
  const double times[2][3] = {{100, 120, 300}, {200, 120, 100}};
  for (int r = 0; r < 2; ++r) {
    RankRun rank;
    rank.rank = r;
    rank.bus_id = "0000:00:06.0";
    rank.gpu_name = "NVIDIA H200";
    rank.samples.push_back({1, kBytes, CompletionMode::kSync, 0, false, 25.0, 5.0, 0});
    for (int b = 0; b < 3; ++b)
      rank.batches.push_back(batch(2 + 10 * static_cast<uint64_t>(b), times[r][b]));
    run.ranks.push_back(rank);
  }
  return run;
}

}  // namespace

TEST(TraceBatches, EachBatchIsItsTimePerOperationAveragedOverTheRanks) {
  const TraceReport r = analyse(run_with_batches());
  ASSERT_EQ(r.sizes.size(), 1u);
  ASSERT_TRUE(r.sizes[0].batch_us.has_value());
  // Batches: (10+20)/2 = 15, 12, (30+10)/2 = 20.
  EXPECT_EQ(r.sizes[0].batch_us->n, 3);
  EXPECT_DOUBLE_EQ(r.sizes[0].batch_us->median, 15.0);
  EXPECT_DOUBLE_EQ(r.sizes[0].batch_us->min, 12.0);
  EXPECT_DOUBLE_EQ(r.sizes[0].batch_us->max, 20.0);
  // busbw from the batch median, with the all-reduce factor at 2 ranks (1).
  ASSERT_TRUE(r.sizes[0].batch_busbw_gbps.has_value());
  EXPECT_NEAR(*r.sizes[0].batch_busbw_gbps, kBytes / 15e-6 / 1e9, 1e-9);
  // The per-operation statistic is untouched by the batches.
  EXPECT_DOUBLE_EQ(r.sizes[0].time_us.median, 25.0);
}

TEST(TraceBatches, WrongElementsOfABatchCount) {
  TraceRun run = run_with_batches();
  run.ranks[1].batches[2].wrong_elements = 7;
  EXPECT_EQ(analyse(run).sizes[0].wrong_elements, 7u);
}

TEST(TraceBatches, NoBatchesNoBatchFigureAndNoColumns) {
  TraceRun run = run_with_batches();
  for (RankRun& r : run.ranks)
    r.batches.clear();
  run.meta.batches = 0;
  const TraceReport r = analyse(run);
  EXPECT_FALSE(r.sizes[0].batch_us.has_value());
  const std::string text = commtool::reports::render_trace_text(r);
  EXPECT_EQ(text.find("batch us"), std::string::npos) << text;
  EXPECT_TRUE(commtool::reports::trace_to_json(r)["sizes"][0]["batch_us"].is_null());
}

TEST(TraceBatches, TheReportNamesTheStatisticAndShowsItBesideTheMedian) {
  const TraceReport r = analyse(run_with_batches());
  const std::string text = commtool::reports::render_trace_text(r);
  EXPECT_NE(text.find("batch: nccl-tests' statistic, 3 untraced batches of 10 operations back to "
                      "back per size"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("15.0 [12.0-20.0]"), std::string::npos) << text;
  const nlohmann::json j = commtool::reports::trace_to_json(r);
  EXPECT_EQ(j["batches"], 3);
  EXPECT_DOUBLE_EQ(j["sizes"][0]["batch_us"]["median"].get<double>(), 15.0);
}

TEST(TraceBatches, RunOnlyWithAnUntracedPassAndOutOfPlace) {
  TraceSettings s;
  s.batches = 4;
  EXPECT_EQ(batches_run(s), 4);  // traced, with the untraced pass
  s.untraced_pass = false;
  EXPECT_EQ(batches_run(s), 0);
  s.cupti = false;  // an untraced run is its own untraced pass
  EXPECT_EQ(batches_run(s), 4);
  s.inplace = true;  // each operation would reduce the last one's output
  EXPECT_EQ(batches_run(s), 0);
}

class TraceBatchesSaved : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("commtool-batches-" + std::to_string(getpid()) + "-" + test->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TraceBatchesSaved, ASavedRunKeepsItsBatches) {
  save_run(dir_.string(), run_with_batches());
  const TraceRun back = load_run(dir_.string());
  EXPECT_EQ(back.meta.batches, 3);
  ASSERT_EQ(back.ranks.size(), 2u);
  ASSERT_EQ(back.ranks[1].batches.size(), 3u);
  EXPECT_EQ(back.ranks[1].batches[2].first_seq, 22u);
  EXPECT_DOUBLE_EQ(back.ranks[1].batches[0].time_us, 200.0);
  EXPECT_DOUBLE_EQ(analyse(back).sizes[0].batch_us->median, 15.0);
}

TEST_F(TraceBatchesSaved, ABatchOfNoOperationsIsRefusedNamingIt) {
  TraceRun run = run_with_batches();
  run.ranks[0].batches[1].ops = 0;
  save_run(dir_.string(), run);
  try {
    load_run(dir_.string());
    FAIL() << "a batch of 0 operations was accepted";
  } catch (const commtool::Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("\"batches\"[1]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ops"), std::string::npos) << e.what();
  }
}
