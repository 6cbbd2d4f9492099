// GPU tests of commtool's CUDA-IPC all-reduce: correctness only. On the one-GPU machine 1 to 4
// worker processes share GPU 0 (CUDA IPC works between processes on one GPU), so the barriers,
// epochs and segment arithmetic run for real; the timing of such runs means nothing and is not
// looked at. Odd sizes (1, 3, 1023 elements, sizes not a multiple of the rank count), all three
// types, and back-to-back calls with new data each time (a stale flag shows as a wrong result).
#include <gtest/gtest.h>

#include <string>

#include "tracing/allreduce/ipc_allreduce_task.hpp"

using namespace commtool::tracing;

namespace {

void expect_all_right(int ranks) {
  IpcCheckRequest q;
  q.executable = COMMTOOL_BINARY;
  q.devices.assign(static_cast<size_t>(ranks), 0);
  q.counts = {1, 3, 1023, 1024, 4097, 65541, (1u << 20) + 3};
  q.dtypes = {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16};
  q.repeats = 3;
  const std::vector<IpcCheckCase> cases = check_ipc_allreduce(q);
  ASSERT_EQ(cases.size(), 2 * q.dtypes.size() * q.counts.size());
  for (const IpcCheckCase& c : cases) {
    const std::string what = std::string(to_string(c.algorithm)) + " " + to_string(c.dtype) + " x" +
                             std::to_string(c.count) + " at " + std::to_string(ranks) + " ranks";
    EXPECT_EQ(c.repeats, 3) << what;
    EXPECT_EQ(c.wrong, 0u) << what;
    EXPECT_TRUE(c.ranks_agree) << what;
  }
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
