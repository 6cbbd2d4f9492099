// GPU tests: run on the GPU machine (ctest -L gpu). Where there is no GPU they fail, loudly:
// a GPU test that passes without a GPU would prove nothing.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
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

std::string run_commtool(const std::string& args) {
  std::string out;
  FILE* pipe = popen((std::string(COMMTOOL_BINARY) + " " + args).c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe))
    out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe), 0) << args;
  return out;
}

}  // namespace

TEST(GpuTopo, FindsAsManyGpusAsCudaEachWithItsOrdinal) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  commtool::topo::Topology t = commtool::topo::discover({});
  ASSERT_EQ(static_cast<int>(t.gpus.size()), count);
  for (int i = 0; i < count; ++i) {
    char bus_id[32] = {};
    ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i), cudaSuccess);
    const auto* g = t.find_gpu_by_bdf(commtool::topo::canonical_bdf(bus_id).value());
    ASSERT_NE(g, nullptr) << bus_id;
    EXPECT_EQ(g->cuda_ordinal, i) << bus_id;  // both in PCI bus order
    EXPECT_GT(g->sm, 0) << bus_id;
  }
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

TEST(GpuTopo, CudaIsAskedForEveryOrderedPairWhenItMatters) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  // With one GPU CUDA has nothing to add unless CUDA_VISIBLE_DEVICES is set; set it to all
  // GPUs so that this path runs on the one-GPU machine too.
  std::string all;
  for (int i = 0; i < count; ++i)
    all += (i ? "," : "") + std::to_string(i);
  setenv("CUDA_VISIBLE_DEVICES", all.c_str(), 1);
  commtool::topo::Topology t = commtool::topo::discover({});
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_TRUE(t.cuda_queried);
  EXPECT_TRUE(t.cuda_available);
  EXPECT_TRUE(t.p2p_queried);
  EXPECT_EQ(static_cast<int>(t.p2p.size()), count * (count - 1));
}

TEST(GpuTopo, CliJsonReportsEveryGpu) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  std::string out = run_commtool("topo --json");
  EXPECT_NE(out.find("\"nvml_available\": true"), std::string::npos);
  EXPECT_NE(out.find("\"GPU" + std::to_string(count - 1) + "\""), std::string::npos);
  EXPECT_EQ(out.find("\"GPU" + std::to_string(count) + "\""), std::string::npos);
}

TEST(GpuTopo, SingleGpuReportSaysThereIsNoPeer) {
  int count = cuda_device_count();
  ASSERT_GT(count, 0);
  std::string out = run_commtool("topo");
  if (count == 1) {
    EXPECT_NE(out.find("no peer: only one GPU"), std::string::npos) << out;
  } else {
    EXPECT_NE(out.find("Perf rank"), std::string::npos) << out;
  }
}
