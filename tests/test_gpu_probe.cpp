// GPU tests of the host<->device probes and the data check behind every figure. They assert
// that the probes run and verify; figures are printed for the log, never asserted (timing
// belongs to benchmarks).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "probes/bandwidth/host_device.hpp"
#include "probes/base/cuda/kernels.cuh"
#include "probes/base/cuda/memory.hpp"
#include "probes/base/error.hpp"

using namespace commtool;
using namespace commtool::probe;

namespace {

bool have_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    ADD_FAILURE() << "no usable GPU here; GPU tests must run on the GPU machine";
    return false;
  }
  return true;
}

void print(const std::vector<Measurement>& ms) {
  for (const auto& m : ms) {
    std::printf("  %-14s %-3s %9.3f %s (min %.3f max %.3f, n=%d)\n", m.what.c_str(),
                to_string(m.engine).c_str(), m.summary.median, m.unit.c_str(), m.summary.min,
                m.summary.max, m.summary.n);
  }
}

}  // namespace

TEST(GpuVerify, MismatchCounterFindsOneFlippedWord) {
  ASSERT_TRUE(have_gpu());
  cudaSetDevice(0);
  constexpr size_t kBytes = 1 << 20;
  cuda::DeviceBuffer buf(kBytes);
  cuda::PinnedHostBuffer count(sizeof(unsigned long long), -1);
  auto* bad = static_cast<unsigned long long*>(count.get());
  cuda::launch_fill_pattern(nullptr, buf.get(), kBytes, 42);
  *bad = 0;
  cuda::launch_count_mismatches(nullptr, buf.get(), kBytes, 42, bad);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*bad, 0u);
  ASSERT_EQ(cudaMemset(static_cast<char*>(buf.get()) + 4096, 0, 4), cudaSuccess);
  cuda::launch_count_mismatches(nullptr, buf.get(), kBytes, 42, bad);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*bad, 1u);
  *bad = 0;
  cuda::launch_count_mismatches(nullptr, buf.get(), kBytes, 43, bad);  // another seed: all wrong
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*bad, kBytes / 4);
}

TEST(GpuHostDevice, BandwidthRunsAndVerifiesEveryBatch) {
  ASSERT_TRUE(have_gpu());
  RunOptions run;
  run.iters = 4;
  run.repeats = 3;
  auto ms = probe_host_device_bandwidth({0, 0, -1, ""}, 64ull << 20, run);
  ASSERT_EQ(ms.size(), 8u);
  for (const auto& m : ms) {
    EXPECT_TRUE(m.verified) << m.what;
    EXPECT_EQ(m.summary.n, 3) << m.what;
    EXPECT_GT(m.summary.min, 0.0) << m.what;
  }
  print(ms);
}

TEST(GpuHostDevice, OddSizeIsCopiedWhole) {
  ASSERT_TRUE(have_gpu());
  RunOptions run;
  run.iters = 2;
  run.repeats = 2;
  // Not a multiple of 16: the SM copy's tail path must carry the last 12 bytes.
  auto ms = probe_host_device_bandwidth({0, 0, -1, ""}, (1ull << 20) + 12, run);
  EXPECT_EQ(ms.size(), 8u);
}

TEST(GpuHostDevice, SizeOverFreeMemoryIsUsageError) {
  ASSERT_TRUE(have_gpu());
  try {
    probe_host_device_bandwidth({0, 0, -1, ""}, 1ull << 40, RunOptions{});
    FAIL() << "a 1 TiB buffer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos);
  }
}

TEST(GpuHostDevice, LatencyRunsAndVerifies) {
  ASSERT_TRUE(have_gpu());
  LatencyOptions opt;
  opt.hops = 2000;
  opt.repeats = 3;
  auto ms = probe_host_device_latency({0, 0, -1, ""}, opt);
  ASSERT_EQ(ms.size(), 3u);
  for (const auto& m : ms) {
    EXPECT_TRUE(m.verified);
    EXPECT_GT(m.summary.median, 0.0);
    EXPECT_LT(m.summary.median, 1000.0);  // µs: a hop or a 4-byte copy is never a millisecond
  }
  print(ms);
}

TEST(GpuHostDevice, FullSizeFiguresForTheLog) {
  ASSERT_TRUE(have_gpu());
  auto ms = probe_host_device_bandwidth({0, 0, -1, ""}, 512ull << 20, RunOptions{});
  print(ms);
  LatencyOptions opt;
  print(probe_host_device_latency({0, 0, -1, ""}, opt));
}

#include <vector>

#include "probes/base/nccl/communicator.hpp"

class GpuNccl : public ::testing::TestWithParam<commtool::nccl::CommMode> {};

TEST_P(GpuNccl, OneRankAllReduceThroughTheCommunicatorIsRight) {
  ASSERT_TRUE(have_gpu());
  cudaSetDevice(0);
  commtool::nccl::Library lib;
  ncclUniqueId id;
  lib.check(lib.get_unique_id(&id), "ncclGetUniqueId");
  commtool::nccl::Communicator comm(lib, id, 1, 0, std::chrono::seconds(60), GetParam());
  EXPECT_EQ(comm.mode(), GetParam());
  constexpr size_t kCount = 1 << 20;
  std::vector<float> host(kCount);
  for (size_t i = 0; i < kCount; ++i)
    host[i] = static_cast<float>(i % 1000) * 0.5f;
  cuda::DeviceBuffer in(kCount * sizeof(float)), out(kCount * sizeof(float));
  ASSERT_EQ(cudaMemcpy(in.get(), host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemset(out.get(), 0xff, kCount * sizeof(float)), cudaSuccess);
  cuda::Stream stream;
  cuda::Event done;
  comm.settle(
      lib.all_reduce(in.get(), out.get(), kCount, ncclFloat32, ncclSum, comm.get(), stream.get()),
      "allreduce #1");
  ASSERT_EQ(cudaEventRecord(done.get(), stream.get()), cudaSuccess);
  comm.wait(done.get(), "allreduce #1");
  std::vector<float> back(kCount);
  ASSERT_EQ(cudaMemcpy(back.data(), out.get(), kCount * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, host);  // one rank: the sum is the input, bit for bit
  std::printf("  NCCL %s from %s\n", lib.version_string().c_str(), lib.path().c_str());
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuNccl,
                         ::testing::Values(commtool::nccl::CommMode::kBlocking,
                                           commtool::nccl::CommMode::kNonBlocking),
                         [](const auto& p) { return commtool::nccl::to_string(p.param); });
