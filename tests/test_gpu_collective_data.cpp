// GPU tests of the collective data kernels: what launch_fill_input writes is what
// launch_check_output accepts, for every data type; a single wrong element is counted once; a
// receive buffer built on the host from input_value passes the GPU's check (so host and device
// agree on the values); and gpu_sleep really holds its stream.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probes/base/cuda/memory.hpp"
#include "tracing/collectives/collective_data.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

const std::vector<DataType> kTypes = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                      DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                                      DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                      DataType::kBfloat16};

bool have_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    ADD_FAILURE() << "no usable GPU here; GPU tests must run on the GPU machine";
    return false;
  }
  return cudaSetDevice(0) == cudaSuccess;
}

// The bytes of small integer v (0..255) as an element of type t, encoded on the host without
// CUDA's half headers: a small integer's float has few significand bits, so bfloat16 is its top
// half and half is its exponent rebiased (15 instead of 127) with the significand cut to 10 bits.
std::vector<unsigned char> encode(DataType t, double v) {
  std::vector<unsigned char> out(type_size(t));
  auto put = [&](auto x) { std::memcpy(out.data(), &x, sizeof(x)); };
  const auto f = static_cast<float>(v);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof(bits));
  switch (t) {
    case DataType::kInt8:
      put(static_cast<int8_t>(v));
      break;
    case DataType::kUint8:
      put(static_cast<uint8_t>(v));
      break;
    case DataType::kInt32:
      put(static_cast<int32_t>(v));
      break;
    case DataType::kUint32:
      put(static_cast<uint32_t>(v));
      break;
    case DataType::kInt64:
      put(static_cast<int64_t>(v));
      break;
    case DataType::kUint64:
      put(static_cast<uint64_t>(v));
      break;
    case DataType::kFloat32:
      put(f);
      break;
    case DataType::kFloat64:
      put(v);
      break;
    case DataType::kBfloat16:
      put(static_cast<uint16_t>(bits >> 16));
      break;
    case DataType::kFloat16: {
      const uint32_t exponent = (bits >> 23) & 0xffu;
      const uint32_t half_bits =
          v == 0 ? 0 : ((exponent - 127 + 15) << 10) | ((bits >> 13) & 0x3ffu);
      put(static_cast<uint16_t>(half_bits));
      break;
    }
  }
  return out;
}

class Counter {
 public:
  Counter() : buf_(sizeof(unsigned long long)) { reset(); }
  unsigned long long* get() { return static_cast<unsigned long long*>(buf_.get()); }
  void reset() { EXPECT_EQ(cudaMemset(buf_.get(), 0, sizeof(unsigned long long)), cudaSuccess); }
  unsigned long long read() {
    unsigned long long v = ~0ull;
    EXPECT_EQ(cudaMemcpy(&v, buf_.get(), sizeof(v), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  cuda::DeviceBuffer buf_;
};

}  // namespace

TEST(GpuCollectiveData, FilledInputPassesAsOneRanksAllReduceAndOneCorruptElementIsCounted) {
  ASSERT_TRUE(have_gpu());
  constexpr uint32_t kSeed = 17;
  constexpr size_t kElements = 100003;  // not a multiple of any block or grid size
  for (DataType t : kTypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kAvg}) {
      SCOPED_TRACE(to_string(t) + " " + to_string(op));
      const size_t size = type_size(t);
      const BufferLayout l = buffer_layout(Collective::kAllReduce, t, kElements * size, 1);
      ASSERT_EQ(l.recv_elements, kElements);
      cuda::DeviceBuffer buf(kElements * size);
      Counter wrong;
      launch_fill_input(nullptr, buf.get(), l.send_elements, t, op, 0, kSeed);
      launch_check_output(nullptr, buf.get(), l, Collective::kAllReduce, t, op, 0, 1, 0, kSeed,
                          wrong.get());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(wrong.read(), 0u);

      // All bits set: -1 or the largest value for integers, NaN for floats; never 0..7.
      const std::vector<unsigned char> garbage(size, 0xff);
      char* element = static_cast<char*>(buf.get()) + 4242 * size;
      ASSERT_EQ(cudaMemcpy(element, garbage.data(), size, cudaMemcpyHostToDevice), cudaSuccess);
      launch_check_output(nullptr, buf.get(), l, Collective::kAllReduce, t, op, 0, 1, 0, kSeed,
                          wrong.get());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(wrong.read(), 1u);

      // The next operation's check finds the whole buffer stale.
      wrong.reset();
      launch_fill_input(nullptr, buf.get(), l.send_elements, t, op, 0, kSeed);
      launch_check_output(nullptr, buf.get(), l, Collective::kAllReduce, t, op, 0, 1, 0, kSeed + 1,
                          wrong.get());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(wrong.read(), kElements);
    }
  }
}

TEST(GpuCollectiveData, AllGatherBuiltOnTheHostFromInputValuePassesTheGpuCheck) {
  ASSERT_TRUE(have_gpu());
  constexpr int kRanks = 2;
  constexpr uint32_t kSeed = 5;
  for (DataType t : kTypes) {
    SCOPED_TRACE(to_string(t));
    const size_t size = type_size(t);
    const BufferLayout l = buffer_layout(Collective::kAllGather, t, 2 * 3001 * size, kRanks);
    ASSERT_EQ(l.count, 3001u);
    std::vector<unsigned char> host(l.recv_elements * size);
    for (int p = 0; p < kRanks; ++p) {
      for (size_t i = 0; i < l.count; ++i) {
        const auto bytes = encode(t, input_value(p, i, kSeed, ReduceOp::kSum));
        std::memcpy(host.data() + (static_cast<size_t>(p) * l.count + i) * size, bytes.data(),
                    size);
      }
    }
    cuda::DeviceBuffer recv(host.size());
    ASSERT_EQ(cudaMemcpy(recv.get(), host.data(), host.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    Counter wrong;
    for (int rank = 0; rank < kRanks; ++rank) {  // every rank receives the same buffer
      launch_check_output(nullptr, recv.get(), l, Collective::kAllGather, t, ReduceOp::kSum, rank,
                          kRanks, 0, kSeed, wrong.get());
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(wrong.read(), 0u);
  }
}

TEST(GpuCollectiveData, NoElementsLaunchesNothing) {
  ASSERT_TRUE(have_gpu());
  Counter wrong;
  launch_fill_input(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum, 0, 1);
  launch_check_output(nullptr, nullptr, BufferLayout{}, Collective::kAllReduce, DataType::kFloat32,
                      ReduceOp::kSum, 0, 1, 0, 1, wrong.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(wrong.read(), 0u);
}

TEST(GpuCollectiveData, GpuSleepHoldsItsStreamForAtLeastTheTimeAsked) {
  ASSERT_TRUE(have_gpu());
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  launch_gpu_sleep(stream, 20'000'000);
  ASSERT_EQ(cudaEventRecord(end, stream), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  std::printf("  gpu_sleep(20 ms) took %.3f ms by CUDA events\n", ms);
  EXPECT_GE(ms, 20.0f);
  EXPECT_LT(ms, 1000.0f);  // and it ends
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaStreamDestroy(stream);
}
