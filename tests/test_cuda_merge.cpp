#include <gtest/gtest.h>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/topo/cuda_query.hpp"

using namespace commtool::topo;

namespace {

Topology with_gpus(std::initializer_list<const char*> bdfs) {
  Topology t;
  int i = 0;
  for (const char* b : bdfs) {
    Gpu g;
    g.index = i++;
    g.bdf = b;
    t.gpus.push_back(g);
  }
  return t;
}

}  // namespace

TEST(CudaNeeded, OneVisibleGpuNeedsNoCuda) {
  EXPECT_FALSE(cuda_needed(with_gpus({"0000:00:06.0"}), nullptr));
}

TEST(CudaNeeded, PairsOrAHiddenGpuOrNoSysfsGpuNeedCuda) {
  EXPECT_TRUE(cuda_needed(with_gpus({"0000:00:06.0", "0000:00:07.0"}), nullptr));
  EXPECT_TRUE(cuda_needed(with_gpus({"0000:00:06.0"}), "1"));
  EXPECT_TRUE(cuda_needed(with_gpus({}), nullptr));
}

TEST(MergeCuda, OrdinalsAndPairsFollowBusIds) {
  Topology t = with_gpus({"0000:1b:00.0", "0000:29:00.0"});
  CudaFacts f;
  f.ok = true;
  f.devices = {{1, "0000:1b:00.0", 90, ""}, {0, "0000:29:00.0", 90, ""}};  // FASTEST_FIRST order
  f.peers = {{"0000:29:00.0", "0000:1b:00.0", true, 0, true},
             {"0000:1b:00.0", "0000:29:00.0", true, 0, true}};
  merge_cuda(t, f);
  EXPECT_EQ(t.gpus[0].cuda_ordinal, 1);
  EXPECT_EQ(t.gpus[1].cuda_ordinal, 0);
  ASSERT_EQ(t.p2p.size(), 2u);
  EXPECT_EQ(t.p2p[0].gpu_a, 1);
  EXPECT_EQ(t.p2p[0].gpu_b, 0);
  EXPECT_TRUE(t.p2p_queried);
}

TEST(MergeCuda, GpuOnlyCudaSeesIsAddedAndNoted) {
  Topology t = with_gpus({"0000:1b:00.0"});
  CudaFacts f;
  f.ok = true;
  f.devices = {{0, "0000:1b:00.0", 90, ""}, {1, "0000:0a:00.0", 90, ""}};
  merge_cuda(t, f);
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].bdf, "0000:0a:00.0");  // re-sorted by bus id, indices renumbered
  EXPECT_EQ(t.gpus[0].index, 0);
  EXPECT_EQ(t.gpus[1].index, 1);
  EXPECT_EQ(t.missing.size(), 1u);
}

TEST(MergeCuda, FailureIsRecordedAsMissingAndNothingElse) {
  Topology t = with_gpus({"0000:1b:00.0"});
  CudaFacts f;
  f.error = "no usable NVIDIA driver or GPU (cudaErrorInsufficientDriver)";
  merge_cuda(t, f);
  EXPECT_TRUE(t.cuda_queried);
  EXPECT_FALSE(t.cuda_available);
  EXPECT_FALSE(t.p2p_queried);
  ASSERT_EQ(t.missing.size(), 1u);
  EXPECT_NE(t.missing[0].why.find("no usable NVIDIA driver"), std::string::npos);
}

// With no NVIDIA kernel driver at all CUDA says "driver version is insufficient", which sends
// on-call hunting for a driver upgrade (issue 16): the words say what it means.
TEST(CudaDescribe, InsufficientDriverWithNoDriverLoadedSaysSo) {
  const std::string text = commtool::cuda::describe(cudaErrorInsufficientDriver,
                                                    "/nonexistent/proc/driver/nvidia/version");
  EXPECT_NE(text.find("cudaErrorInsufficientDriver"), std::string::npos) << text;
  EXPECT_NE(text.find("no NVIDIA kernel driver is loaded"), std::string::npos) << text;
}

TEST(CudaDescribe, InsufficientDriverWithADriverLoadedSaysItIsOlderThanTheRuntime) {
  const std::string text = commtool::cuda::describe(cudaErrorInsufficientDriver, "/proc/self/stat");
  EXPECT_NE(text.find("older than this CUDA runtime"), std::string::npos) << text;
  EXPECT_EQ(text.find("no NVIDIA kernel driver"), std::string::npos) << text;
}

TEST(CudaDescribe, OtherErrorsAreCudasOwnWordsAndName) {
  const std::string text = commtool::cuda::describe(cudaErrorNoDevice, "/nonexistent");
  EXPECT_NE(text.find("cudaErrorNoDevice"), std::string::npos) << text;
  EXPECT_EQ(text.find("driver"), std::string::npos) << text;
}
