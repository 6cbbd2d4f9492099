// The fill, check and sleep kernels behind collective_data.hpp. Fill and check are templates on
// the element type only (ten instantiations each): collective, op, ranks and root are kernel
// arguments that collective_values.cuh switches on per element, which costs a few integer
// operations where one kernel per combination would cost hundreds of kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/element_convert.cuh"
#include "probes/base/cuda/global_timer.cuh"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collective_values.cuh"

namespace commtool::tracing {

namespace {

// 256 threads and up to 4 blocks per SM: enough warps in flight for a memory-bound loop, and
// few enough blocks that the check's one atomic per block never queues up (528 on an H200).
constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;

using cuda::from_int;
using cuda::global_ns;
using cuda::to_double;

template <typename T>
__global__ void fill_input(T* __restrict__ send, size_t elements, ReduceOp op, int rank,
                           uint32_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements;
       i += stride) {
    send[i] = from_int<T>(values::input_int(rank, i, seed, op));
  }
}

// The sum of v over the block, valid in thread 0. Every thread of the block must call it, and
// blockDim.x must be a multiple of 32.
__device__ unsigned long long block_sum(unsigned long long v) {
  __shared__ unsigned long long warp_sums[32];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp != 0) return 0;
  v = lane < blockDim.x / 32 ? warp_sums[lane] : 0;
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Counts per thread, then per block, then one atomic per block: a buffer that is wrong
// everywhere costs as little as one that is right.
template <typename T>
__global__ void check_output(const T* __restrict__ recv, size_t elements, values::OutputSpec spec,
                             double tolerance, unsigned long long* wrong) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements;
       i += stride) {
    double expected = 0;
    if (!values::expected_output(spec, i, &expected)) continue;
    if (!values::output_matches(to_double(recv[i]), expected, tolerance)) ++bad;
  }
  bad = block_sum(bad);
  if (threadIdx.x == 0 && bad != 0) atomicAdd(wrong, bad);
}

__global__ void gpu_sleep(uint64_t ns) {
  const uint64_t start = global_ns();
  // Short naps keep the spinning warp off the issue slots; they overshoot by under 1 us.
  while (global_ns() - start < ns)
    __nanosleep(1000);
}

// The grid for `elements`: one thread per element up to kBlocksPerSm blocks per SM, then the
// loops stride. The SM count is asked once per thread and device (a cheap query, no sync).
int grid_for(size_t elements) {
  thread_local int device = -1;
  thread_local int sms = 0;
  int current = 0;
  CUDA_TRY(cudaGetDevice(&current));
  if (current != device) {
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, current));
    device = current;
  }
  const size_t wanted = (elements + kThreads - 1) / kThreads;
  const size_t most = static_cast<size_t>(sms) * kBlocksPerSm;
  return static_cast<int>(wanted < most ? wanted : most);
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the C++ type of t.
template <typename F>
void with_element_type(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8:
      return f(TypeTag<int8_t>{});
    case DataType::kUint8:
      return f(TypeTag<uint8_t>{});
    case DataType::kInt32:
      return f(TypeTag<int32_t>{});
    case DataType::kUint32:
      return f(TypeTag<uint32_t>{});
    case DataType::kInt64:
      return f(TypeTag<int64_t>{});
    case DataType::kUint64:
      return f(TypeTag<uint64_t>{});
    case DataType::kFloat16:
      return f(TypeTag<__half>{});
    case DataType::kFloat32:
      return f(TypeTag<float>{});
    case DataType::kFloat64:
      return f(TypeTag<double>{});
    case DataType::kBfloat16:
      return f(TypeTag<__nv_bfloat16>{});
  }
}

}  // namespace

void launch_fill_input(cudaStream_t stream, void* send, size_t send_elements, DataType t,
                       ReduceOp op, int rank, uint32_t seed) {
  if (send_elements == 0) return;
  const int blocks = grid_for(send_elements);
  with_element_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_input<T>
        <<<blocks, kThreads, 0, stream>>>(static_cast<T*>(send), send_elements, op, rank, seed);
  });
  CUDA_TRY(cudaGetLastError());
}

void launch_check_output(cudaStream_t stream, const void* recv, const BufferLayout& layout,
                         Collective c, DataType t, ReduceOp op, int rank, int nranks, int root,
                         uint32_t seed, unsigned long long* wrong) {
  // reduce leaves every non-root receive buffer undefined: nothing to check there.
  if (layout.recv_elements == 0 || (c == Collective::kReduce && rank != root)) return;
  values::OutputSpec spec;
  spec.collective = c;
  spec.op = op;
  spec.integer_type = values::is_integer(t);
  spec.rank = rank;
  spec.nranks = nranks;
  spec.root = root;
  spec.count = layout.count;
  spec.seed = seed;
  const double tolerance = values::check_tolerance(c, op, t, nranks);
  const size_t elements = layout.recv_elements;
  const int blocks = grid_for(elements);
  with_element_type(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    check_output<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(recv), elements, spec,
                                                     tolerance, wrong);
  });
  CUDA_TRY(cudaGetLastError());
}

void launch_gpu_sleep(cudaStream_t stream, uint64_t ns) {
  // Launched even for 0 ns: callers use it as the consumer's one kernel when nothing is checked.
  gpu_sleep<<<1, 1, 0, stream>>>(ns);
  CUDA_TRY(cudaGetLastError());
}

}  // namespace commtool::tracing
