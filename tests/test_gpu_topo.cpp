// GPU tests: run on the GPU machine (ctest -L gpu). Where there is no GPU they fail, loudly:
// a GPU test that passes without a GPU would prove nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "probes/topo/discover.hpp"

namespace {

int cuda_device_count() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    ADD_FAILURE() << "no usable GPU here: cudaGetDeviceCount says " << cudaGetErrorString(err)
                  << ". GPU tests must run on the GPU machine.";
    return -1;
  }
  return count;
}

}  // namespace

TEST(GpuTopo, FindsAsManyGpusAsCuda) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  commtool::topo::Topology t = commtool::topo::discover({});
  EXPECT_EQ(static_cast<int>(t.gpus.size()), count);
  for (const auto& g : t.gpus) {
    EXPECT_GE(g.cuda_ordinal, 0) << g.bdf;
    EXPECT_GT(g.sm, 0) << g.bdf;
  }
  EXPECT_TRUE(t.cuda_available);
  EXPECT_TRUE(t.p2p_queried);
}

TEST(GpuTopo, NvmlNamesEveryGpuAndKnowsTheDriver) {
  ASSERT_GT(cuda_device_count(), 0);
  commtool::topo::Topology t = commtool::topo::discover({});
  ASSERT_TRUE(t.nvml_available) << "NVML not loaded on a GPU machine";
  EXPECT_FALSE(t.driver_version.empty());
  for (const auto& g : t.gpus) {
    EXPECT_EQ(g.name.rfind("NVIDIA ", 0), 0u) << g.name;
    EXPECT_GT(g.pcie.max_gen, 0) << g.bdf;
    EXPECT_GT(g.pcie.max_width, 0) << g.bdf;
  }
}

TEST(GpuTopo, P2pIsAskedForEveryOrderedPair) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  commtool::topo::Topology t = commtool::topo::discover({});
  EXPECT_EQ(static_cast<int>(t.p2p.size()), count * (count - 1));
}

TEST(GpuTopo, CliJsonReportsTheGpus) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  std::string out;
  FILE* pipe = popen(COMMTOOL_BINARY " topo --json", "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe))
    out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe), 0);
  EXPECT_NE(out.find("\"nvml_available\": true"), std::string::npos);
  EXPECT_NE(out.find("\"cuda_available\": true"), std::string::npos);
}
