#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "synthetic_records.hpp"
#include "tracing/collectives/collectives.hpp"
#include "tracing/trace/attribution.hpp"

using namespace commtool::tracing;
using namespace synthetic_records;

TEST(Collectives, BusbwFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllToAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllReduce, 1), 0.0);  // one rank moves nothing
}

TEST(Collectives, AlgbwIsBytesOverTimeInGBps) {
  EXPECT_DOUBLE_EQ(algbw_gbps(1e9, 1000), 1000.0);
  EXPECT_DOUBLE_EQ(busbw_gbps(Collective::kAllReduce, 8, 1e9, 1000), 1750.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(1e9, 0), 0.0);
}

TEST(Collectives, NamesParseInTheSpellingsPeopleUse) {
  EXPECT_EQ(parse_collective("all_reduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("AllReduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("reduce-scatter"), Collective::kReduceScatter);
  EXPECT_FALSE(parse_collective("allreduc").has_value());
  EXPECT_EQ(to_string(Collective::kAllToAll), "alltoall");
}

TEST(Attribution, OneKernelGivesEveryInterval) {
  Attribution a = attribute(one_operation());
  ASSERT_EQ(a.operations.size(), 1u);
  const OperationIntervals& op = a.operations[0];
  EXPECT_DOUBLE_EQ(op.host_enqueue_us, 0.050);
  EXPECT_DOUBLE_EQ(op.host_wait_us, 0.008);
  EXPECT_DOUBLE_EQ(*op.kernel_us, 2.0);
  EXPECT_EQ(*op.kernel_start_ns, 1010u);
  EXPECT_DOUBLE_EQ(*op.input_wait_us, 0.892);         // NCCL stream idle 108 -> 1000
  EXPECT_DOUBLE_EQ(*op.exposed_wait_us, 2.863);       // consumer idle 152 -> 3015
  EXPECT_DOUBLE_EQ(*op.stream_dependency_us, 2.020);  // input 1000 -> consumer 3020
  EXPECT_EQ(op.gpu_work_count, 1);
  EXPECT_FALSE(*op.complete_at_wait_return);  // the host returned at 160, the GPU ended at 3015
  EXPECT_TRUE(a.warnings.empty());
}

// A non-blocking communicator's ncclGroupEnd launches from a thread of NCCL's own: its launch
// during the enqueue is the operation's; one after the enqueue is not.
TEST(Attribution, WorkLaunchedByAnotherThreadDuringTheEnqueueIsTheOperations) {
  RecordSet r = one_operation();
  r.api[0].thread = 99;
  r.api.push_back({77, 99, 200, 210, "cuLaunchKernelEx"});  // after the enqueue ended at 150
  r.gpu.push_back({GpuWorkKind::kKernel, kNccl, 77, 5000, 9000, "late"});
  Attribution a = attribute(r);
  ASSERT_EQ(a.operations.size(), 1u);
  EXPECT_EQ(a.operations[0].gpu_work_count, 1);
  EXPECT_DOUBLE_EQ(*a.operations[0].kernel_us, 2.0);
  EXPECT_TRUE(a.operations[0].launched_by_other_thread);
  EXPECT_FALSE(attribute(one_operation()).operations[0].launched_by_other_thread);
}

TEST(Attribution, SeveralKernelsSpanFirstStartToLastEnd) {
  RecordSet r = one_operation();
  r.api.push_back({43, kThread, 141, 145, "cuLaunchKernelEx"});
  r.gpu.push_back({GpuWorkKind::kKernel, kNccl, 43, 3010, 3500, "second"});
  r.events[1].device_ns = 3505;
  Attribution a = attribute(r);
  EXPECT_DOUBLE_EQ(*a.operations[0].kernel_us, 2.490);
  EXPECT_EQ(a.operations[0].gpu_work_count, 2);
}

TEST(Attribution, SingleRankCopiesCountAsTheCollectivesGpuWork) {
  Attribution a = attribute(one_operation(0, 1, 42, GpuWorkKind::kMemcpy));
  EXPECT_DOUBLE_EQ(*a.operations[0].kernel_us, 2.0);
  EXPECT_EQ(a.operations[0].gpu_work_count, 1);
}

TEST(Attribution, BackToBackOperationsEachFindTheirOwnEventCompletions) {
  RecordSet r = one_operation(0, 1, 42);
  merge(r, one_operation(4000, 2, 52));  // same event ids, re-recorded 4 us later
  Attribution a = attribute(r);
  ASSERT_EQ(a.operations.size(), 2u);
  for (const auto& op : a.operations) {
    EXPECT_DOUBLE_EQ(*op.kernel_us, 2.0) << op.seq;
    EXPECT_DOUBLE_EQ(*op.input_wait_us, 0.892) << op.seq;
    EXPECT_DOUBLE_EQ(*op.exposed_wait_us, 2.863) << op.seq;
  }
}

TEST(Attribution, InputWaitStartsWhenTheNcclStreamIsFree) {
  RecordSet r = one_operation();
  // Earlier work still runs on the NCCL stream until 800: it was busy, not waiting, till then.
  r.gpu.push_back({GpuWorkKind::kKernel, kNccl, 7, 50, 800, "earlier"});
  EXPECT_DOUBLE_EQ(*attribute(r).operations[0].input_wait_us, 0.200);
}

TEST(Attribution, RecordOrderDoesNotMatter) {
  RecordSet r = one_operation(0, 1, 42);
  merge(r, one_operation(4000, 2, 52));
  std::mt19937 rng(5);
  std::shuffle(r.gpu.begin(), r.gpu.end(), rng);
  std::shuffle(r.api.begin(), r.api.end(), rng);
  std::shuffle(r.events.begin(), r.events.end(), rng);
  std::shuffle(r.stream_waits.begin(), r.stream_waits.end(), rng);
  std::shuffle(r.operations.begin(), r.operations.end(), rng);
  Attribution a = attribute(r);
  ASSERT_EQ(a.operations.size(), 2u);
  EXPECT_EQ(a.operations[0].seq, 1u);
  EXPECT_DOUBLE_EQ(*a.operations[1].exposed_wait_us, 2.863);
}

TEST(Attribution, MissingEndEventLeavesItsIntervalsEmptyAndSaysSo) {
  RecordSet r = one_operation();
  std::erase_if(r.events, [](const EventCompletion& e) { return e.event == kEndEvent; });
  Attribution a = attribute(r);
  const auto& op = a.operations[0];
  EXPECT_TRUE(op.kernel_us.has_value());
  EXPECT_FALSE(op.exposed_wait_us.has_value());
  EXPECT_FALSE(op.stream_dependency_us.has_value());
  EXPECT_FALSE(op.complete_at_wait_return.has_value());
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_EQ(a.warnings[0], "operation 1: no device timestamp for the end event");
}

TEST(Attribution, MissingKernelRecordsAreNamed) {
  RecordSet r = one_operation();
  std::erase_if(r.gpu, [](const GpuWork& w) { return w.stream == kNccl; });
  Attribution a = attribute(r);
  EXPECT_FALSE(a.operations[0].kernel_us.has_value());
  EXPECT_NE(a.warnings.at(0).find("no GPU work found on the NCCL stream"), std::string::npos);
}

TEST(Attribution, DroppedRecordsAreAWarning) {
  RecordSet r = one_operation();
  r.dropped_records = 17;
  Attribution a = attribute(r);
  ASSERT_FALSE(a.warnings.empty());
  EXPECT_NE(a.warnings[0].find("dropped 17"), std::string::npos);
}

TEST(Attribution, HostSideCompletionFactWinsAndPollingIsLabelled) {
  RecordSet r = one_operation();
  r.operations[0].complete_at_wait_return = 1;
  r.operations[0].wait_polls = true;
  Attribution a = attribute(r);
  const auto& op = a.operations[0];
  EXPECT_TRUE(*op.complete_at_wait_return);
  EXPECT_TRUE(op.host_wait_polls);
}

TEST(StartLags, NoneWhenNoRankHasAStart) {
  EXPECT_FALSE(start_lags({std::nullopt, std::nullopt}).has_value());
}

TEST(StartLags, SpreadIsFirstToLastStartInMicroseconds) {
  const std::optional<StartLags> l = start_lags({5'000'000, 5'003'000, 5'001'500});
  ASSERT_TRUE(l.has_value());
  EXPECT_DOUBLE_EQ(l->spread_us, 3.0);
}

TEST(StartLags, EachRankLagsBehindTheFirstToStart) {
  const std::optional<StartLags> l = start_lags({5'002'000, 5'000'000, 5'000'500});
  ASSERT_TRUE(l.has_value());
  ASSERT_EQ(l->lag_us.size(), 3u);
  EXPECT_DOUBLE_EQ(l->lag_us[0].value(), 2.0);
  EXPECT_DOUBLE_EQ(l->lag_us[1].value(), 0.0);
  EXPECT_DOUBLE_EQ(l->lag_us[2].value(), 0.5);
}

TEST(StartLags, RankWithoutAStartHasNoLag) {
  const std::optional<StartLags> l = start_lags({1'000, std::nullopt, 3'000});
  ASSERT_TRUE(l.has_value());
  ASSERT_EQ(l->lag_us.size(), 3u);
  EXPECT_FALSE(l->lag_us[1].has_value());
  EXPECT_DOUBLE_EQ(l->spread_us, 2.0);
}
