// GPU tests of commtool's CUDA-IPC all-reduce: correctness only. On the one-GPU machine 1 to 4
// worker processes share GPU 0 (CUDA IPC works between processes on one GPU), so the barriers,
// epochs and segment arithmetic run for real; the timing of such runs means nothing and is not
// looked at. Odd sizes (1, 3, 1023 elements, sizes not a multiple of the rank count), all three
// types, back-to-back calls with new data each time (a stale flag shows as a wrong result),
// inputs and outputs off the 16-byte vector alignment, in place, and differently placed on
// different ranks, and buffers large enough that every block loops over several steps.
#include <gtest/gtest.h>

#include <string>

#include "tracing/allreduce/ipc_allreduce_task.hpp"

using namespace commtool::tracing;

namespace {

void expect_all_right(int ranks, std::vector<uint64_t> counts, std::vector<DataType> dtypes,
                      std::vector<IpcLayout> layouts, int repeats = 3) {
  IpcCheckRequest q;
  q.executable = COMMTOOL_BINARY;
  q.devices.assign(static_cast<size_t>(ranks), 0);
  q.counts = std::move(counts);
  q.dtypes = std::move(dtypes);
  q.layouts = std::move(layouts);
  q.repeats = repeats;
  const std::vector<IpcCheckCase> cases = check_ipc_allreduce(q);
  ASSERT_EQ(cases.size(), 2 * q.dtypes.size() * q.layouts.size() * q.counts.size());
  for (const IpcCheckCase& c : cases) {
    const std::string what = std::string(to_string(c.algorithm)) + " " + to_string(c.dtype) + " " +
                             to_string(c.layout) + " x" + std::to_string(c.count) + " at " +
                             std::to_string(ranks) + " ranks";
    EXPECT_EQ(c.repeats, repeats) << what;
    EXPECT_EQ(c.wrong, 0u) << what;
    EXPECT_TRUE(c.ranks_agree) << what;
  }
}

// Odd sizes in every type and layout.
void expect_all_right(int ranks) {
  expect_all_right(
      ranks, {1, 3, 1023, 1024, 4097, 65541, (1u << 20) + 3},
      {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16},
      {IpcLayout::kAligned, IpcLayout::kOffset, IpcLayout::kMixed, IpcLayout::kInPlace});
}

// 2^24 + 5 floats: 2049 steps of a block, so at any grid the GPU holds every block loops, and a
// tail of 5 elements. Two calls each: the host's reference of 64 MiB is the slow part.
void expect_large_right(int ranks) {
  expect_all_right(ranks, {(1u << 24) + 5}, {DataType::kFloat32},
                   {IpcLayout::kAligned, IpcLayout::kMixed}, 2);
}

}  // namespace

TEST(GpuIpcAllReduce, OneRankIsACopy) {
  expect_all_right(1);
}
TEST(GpuIpcAllReduce, TwoProcessesOnOneGpu) {
  expect_all_right(2);
}
TEST(GpuIpcAllReduce, ThreeProcessesOnOneGpu) {
  expect_all_right(3);
}
TEST(GpuIpcAllReduce, FourProcessesOnOneGpu) {
  expect_all_right(4);
}
TEST(GpuIpcAllReduce, LargeBuffersAtOneRank) {
  expect_large_right(1);
}
TEST(GpuIpcAllReduce, LargeBuffersAtTwoProcessesOnOneGpu) {
  expect_large_right(2);
}
TEST(GpuIpcAllReduce, LargeBuffersAtFourProcessesOnOneGpu) {
  expect_large_right(4);
}
