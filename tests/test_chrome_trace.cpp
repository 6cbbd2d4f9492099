#include <gtest/gtest.h>

#include <map>
#include <set>

#include "reports/trace/chrome_trace.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

// Producer 1000..2000 on stream 1 records event 11 (done at 2000); the NCCL stream 2 waits on
// it (call at 1100..1110) and runs 2010..4010; consumer stream 3 waits on event 12 (done 4015)
// and runs 4020..4100. Host thread 7 enqueues at 1000..1200 and polls 1200..5000.
RecordSet scenario() {
  RecordSet r;
  r.gpu = {{GpuWorkKind::kKernel, 1, 1, 1000, 2000, "producer"},
           {GpuWorkKind::kKernel, 2, 2, 2010, 4010, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
           {GpuWorkKind::kKernel, 3, 3, 4020, 4100, "consumer"}};
  r.api = {{2, 7, 1120, 1180, "cuLaunchKernelEx"}};
  r.events = {{11, 1, 2000}, {12, 2, 4015}};
  r.stream_waits = {{2, 11, 1100, 1110}, {3, 12, 1190, 1195}};
  OperationMark op;
  op.seq = 1;
  op.thread = 7;
  op.producer_stream = 1;
  op.nccl_stream = 2;
  op.consumer_stream = 3;
  op.enqueue_start_ns = 1000;
  op.enqueue_end_ns = 1200;
  op.wait_start_ns = 1200;
  op.wait_end_ns = 5000;
  op.wait_polls = true;
  r.operations = {op};
  return r;
}

}  // namespace

TEST(ChromeTrace, OneProcessPerRankWithNamedTracks) {
  RecordSet a = scenario(), b = scenario();
  auto doc = reports::chrome_trace({{0, &a}, {1, &b}});
  std::set<int> pids;
  std::set<std::string> names;
  for (const auto& e : doc["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M") names.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  for (const char* n : {"rank 0", "rank 1", "host thread 7", "NCCL stream 2", "producer stream 1",
                        "consumer stream 3"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST(ChromeTrace, TimesAreMicrosecondsFromTheFirstRecord) {
  RecordSet r = scenario();
  auto doc = reports::chrome_trace({{0, &r}});
  double min_ts = 1e18;
  for (const auto& e : doc["traceEvents"]) {
    if (e.contains("ts")) min_ts = std::min(min_ts, e["ts"].get<double>());
    if (e["ph"] == "X" && e["name"] == "consumer") {
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 3.02);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 0.08);
    }
  }
  EXPECT_DOUBLE_EQ(min_ts, 0.0);
}

TEST(ChromeTrace, PollingWaitIsLabelledAsHostTime) {
  RecordSet r = scenario();
  auto doc = reports::chrome_trace({{0, &r}});
  bool found = false;
  for (const auto& e : doc["traceEvents"]) {
    found |= e["ph"] == "X" && e["name"] == "wait #1 (host polling, not GPU time)";
  }
  EXPECT_TRUE(found);
}

TEST(ChromeTrace, EachWaitGetsAnArrowFromTheEventToTheWaitingStream) {
  RecordSet r = scenario();
  auto doc = reports::chrome_trace({{0, &r}});
  std::map<uint64_t, std::pair<double, double>> arrows;  // id -> (start ts, finish ts)
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") arrows[e["id"].get<uint64_t>()].first = e["ts"].get<double>();
    if (e["ph"] == "f") arrows[e["id"].get<uint64_t>()].second = e["ts"].get<double>();
  }
  ASSERT_EQ(arrows.size(), 2u);
  EXPECT_DOUBLE_EQ(arrows[1].first, 1.0);    // event 11 done at 2000
  EXPECT_DOUBLE_EQ(arrows[1].second, 1.01);  // NCCL kernel starts at 2010
  EXPECT_DOUBLE_EQ(arrows[2].first, 3.015);  // event 12 done at 4015
  EXPECT_DOUBLE_EQ(arrows[2].second, 3.02);  // consumer starts at 4020
}
