// record --cupti on the CPU: which GPU work the plugin's CUPTI layer writes
// (tracing/profiler/cupti_anchors.hpp) and how the report turns waits, event records and work
// into each operation's split (reports/record/record_split.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "reports/record/record_split.hpp"
#include "tracing/profiler/cupti_anchors.hpp"

using namespace commtool::nccl_profiler;
using commtool::record::CuptiActivity;
using commtool::reports::CuptiSplit;
using commtool::reports::resolve_waits;

namespace {

constexpr StreamId kCompute{1, 7};
constexpr StreamId kNccl{1, 13};

WorkLine work(StreamId s, uint32_t c, int64_t start, int64_t end, bool nccl = false) {
  return WorkLine{s, c, Interval{start, end}, nccl};
}

// What WorkAnchors writes, by correlation id.
struct Written {
  std::vector<uint32_t> ids;
  WorkAnchors anchors{[this](const WorkLine& w) { ids.push_back(w.correlation); }};
  std::vector<uint32_t> sorted() const {
    std::vector<uint32_t> v = ids;
    std::sort(v.begin(), v.end());
    return v;
  }
};

TEST(NcclKernelName, PlainAndMangledNamesAreRecognised) {
  EXPECT_TRUE(is_nccl_kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(
      is_nccl_kernel_name("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs"));
  EXPECT_TRUE(is_nccl_kernel_name("ncclKernel_SendRecv"));
  EXPECT_FALSE(is_nccl_kernel_name("_Z10vectorAddPfS_"));
  EXPECT_FALSE(is_nccl_kernel_name("_Znccl"));  // no length: not a mangled name
  EXPECT_FALSE(is_nccl_kernel_name("void at::native::elementwise_kernel<nccl>"));
  EXPECT_FALSE(is_nccl_kernel_name(nullptr));
}

TEST(WorkAnchors, WritesNcclKernelsAndTheWorkAroundEachMarkOnly) {
  Written w;
  // Compute stream: works 1, 2, 3, then a wait (5), then works 6, 7.
  for (uint32_t c : {1u, 2u, 3u})
    w.anchors.work(work(kCompute, c, c * 100, c * 100 + 50));
  w.anchors.mark(kCompute, 5);
  for (uint32_t c : {6u, 7u})
    w.anchors.work(work(kCompute, c, c * 100, c * 100 + 50));
  w.anchors.work(work(kNccl, 4, 400, 450, /*nccl=*/true));
  EXPECT_EQ(w.sorted(), (std::vector<uint32_t>{3, 4, 6}));
}

TEST(WorkAnchors, TheWorkAfterAMarkMayArriveBeforeIt) {
  Written w;
  w.anchors.work(work(kCompute, 1, 100, 150));
  w.anchors.work(work(kCompute, 3, 300, 350));  // queued after the mark, arrived first
  w.anchors.mark(kCompute, 2);
  EXPECT_EQ(w.sorted(), (std::vector<uint32_t>{1, 3}));
}

TEST(WorkAnchors, TheWorkBeforeAMarkMayArriveAfterIt) {
  Written w;
  w.anchors.work(work(kCompute, 1, 100, 150));
  w.anchors.mark(kCompute, 5);                  // 4 is still running: 1 is all there is so far
  w.anchors.work(work(kCompute, 4, 400, 450));  // the true work before the mark
  w.anchors.work(work(kCompute, 6, 600, 650));  // and after it
  const std::vector<uint32_t> got = w.sorted();
  EXPECT_TRUE(std::find(got.begin(), got.end(), 4u) != got.end());
  EXPECT_TRUE(std::find(got.begin(), got.end(), 6u) != got.end());
  // Each work is written once, however often it is an anchor.
  EXPECT_EQ(std::set<uint32_t>(got.begin(), got.end()).size(), got.size());
}

TEST(WorkAnchors, FinishWritesTheWorkBeforeMarksThatNeverGotAnAfter) {
  Written w;
  w.anchors.mark(kNccl, 9);  // an event record queued after the last work; nothing yet
  w.anchors.work(work(kNccl, 8, 800, 850));
  EXPECT_TRUE(w.ids.empty());
  w.anchors.finish();
  EXPECT_EQ(w.ids, (std::vector<uint32_t>{8}));
}

TEST(WorkAnchors, MemoryIsBoundedPerStream) {
  Written w;
  for (uint32_t c = 0; c < 10'000; ++c)
    w.anchors.mark(kCompute, 2 * c + 1);  // marks with no work at all
  w.anchors.work(work(kCompute, 100'000, 1, 2));
  // Only the last kMaxPendingMarks marks were still pending: one write, the work after them.
  EXPECT_EQ(w.ids, (std::vector<uint32_t>{100'000}));
}

// PyTorch's pattern for one all_reduce: the NCCL stream waits for an event recorded on the
// compute stream after the input's producer, runs the kernel, records its end event, and the
// compute stream waits for that event before its next kernel.
CuptiActivity one_allreduce(int64_t producer_end, int64_t kernel_start, int64_t kernel_end,
                            int64_t consumer_prev_end, int64_t consumer_next_start) {
  CuptiActivity a;
  a.work = {work(kCompute, 10, producer_end - 100, producer_end),                 // input
            work(kNccl, 5, 0, 50),                                                // earlier op
            work(kNccl, 13, kernel_start, kernel_end, /*nccl=*/true),             // the op
            work(kCompute, 15, consumer_prev_end - 100, consumer_prev_end),       // before wait
            work(kCompute, 17, consumer_next_start, consumer_next_start + 100)};  // after it
  a.events = {EventLine{kCompute, 1, 11}, EventLine{kNccl, 2, 14}};
  a.waits = {WaitLine{kNccl, 1, 12, /*t=*/500}, WaitLine{kCompute, 2, 16, /*t=*/600}};
  return a;
}

TEST(CuptiSplit, InputWaitIsNcclsStreamWaitingForTheProducer) {
  // The NCCL stream was free at 500 (the wait's call; its last work ended at 50); the input
  // was ready at 1000: 500 ns of input wait. The kernel then starts at 1000.
  const CuptiSplit split(one_allreduce(1000, 1000, 3000, 2000, 3000));
  ASSERT_EQ(split.nccl_kernels(), 1u);
  const auto s = split.of(Interval{1010, 2990});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->input_wait_ns, 500);
  EXPECT_EQ(s->kernel, (Interval{1000, 3000}));
}

TEST(CuptiSplit, ExposedWaitIsTheConsumerIdlingUntilTheKernelEnds) {
  // The compute stream finished its own work at 2000 and waited for the kernel's end at 3000.
  const auto s = CuptiSplit(one_allreduce(400, 1000, 3000, 2000, 3000)).of(Interval{1000, 3000});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->input_wait_ns, 0);  // the input was ready (400) before the wait was queued
  EXPECT_EQ(s->exposed_wait_ns, 1000);
  EXPECT_EQ(s->exposed_waits, 1);
}

TEST(CuptiSplit, NoExposedWaitWhenTheConsumerWasStillBusy) {
  // The compute stream's own work ran until 3500, past the kernel's end: it never waited.
  const auto s = CuptiSplit(one_allreduce(400, 1000, 3000, 3500, 3600)).of(Interval{1000, 3000});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->exposed_wait_ns, 0);
}

TEST(CuptiSplit, AWaitCountsFromItsHostCallWhenTheStreamWasIdle) {
  // The consumer's previous work ended at 100, but the wait was only queued at 600.
  const auto s = CuptiSplit(one_allreduce(400, 1000, 3000, 100, 3000)).of(Interval{1000, 3000});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->exposed_wait_ns, 2400);
}

TEST(CuptiSplit, AWaitIsForTheLatestRecordOfItsEventBeforeIt) {
  CuptiActivity a = one_allreduce(1000, 1000, 3000, 2000, 3000);
  // Event 1 recorded again, later, after other work: the wait (correlation 12) is for the
  // record at 11, not this one.
  a.work.push_back(work(kCompute, 20, 9000, 9500));
  a.events.push_back(EventLine{kCompute, 1, 21});
  const auto waits = resolve_waits(a);
  ASSERT_EQ(waits.size(), 2u);
  ASSERT_TRUE(waits[0].producer);
  EXPECT_EQ(waits[0].producer->correlation, 10u);
  EXPECT_EQ(waits[0].waited_ns, 500);
}

TEST(CuptiSplit, AnOperationFarFromEveryKernelHasNoSplit) {
  const CuptiSplit split(one_allreduce(1000, 1000, 3000, 2000, 3000));
  EXPECT_FALSE(split.of(Interval{10'000'000, 10'100'000}));
  EXPECT_TRUE(split.of(Interval{3000 + commtool::reports::kMatchSlackNs / 2,
                                3000 + commtool::reports::kMatchSlackNs}));
}

TEST(CuptiSplit, AnOperationIsMatchedToTheKernelItOverlapsMost) {
  CuptiActivity a;
  a.work = {work(kNccl, 1, 1000, 2000, true), work({1, 14}, 2, 1500, 5000, true)};
  const CuptiSplit split(a);
  EXPECT_EQ(split.of(Interval{1800, 4800})->kernel, (Interval{1500, 5000}));
  EXPECT_EQ(split.of(Interval{1010, 1990})->kernel, (Interval{1000, 2000}));
}

}  // namespace
