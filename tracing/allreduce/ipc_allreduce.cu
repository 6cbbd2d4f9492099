// The kernels of ipc_allreduce.hpp: one launch per call, kBlocks blocks on every rank; block b
// owns elements b*kThreads + t + k*kBlocks*kThreads of whatever range a phase covers, on every
// rank, which is what lets each barrier be per block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>
#include <cuda/atomic>

#include <algorithm>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/global_timer.cuh"
#include "probes/base/error.hpp"
#include "tracing/allreduce/ipc_allreduce.hpp"
#include "tracing/allreduce/ipc_allreduce_plan.hpp"

namespace commtool::tracing {

namespace {

constexpr int kBlocks = 32;
constexpr int kThreads = 512;
constexpr int kBarriers = 3;  // one-shot uses 0 and 1; two-shot 0, 1 and 2
constexpr size_t kLine = 128;
constexpr size_t kFlagBytes = size_t{kBarriers} * kBlocks * kMaxIpcRanks * kLine;

struct Peers {
  char* buffer[kMaxIpcRanks];  // every rank's IPC buffer, mapped here
};

struct Segments {
  size_t first[kMaxIpcRanks + 1];  // segment r is [first[r], first[r + 1])
};

__device__ inline uint32_t* flag(char* buffer, int barrier, int block, int source) {
  const size_t line = (static_cast<size_t>(barrier) * kBlocks + block) * kMaxIpcRanks + source;
  return reinterpret_cast<uint32_t*>(buffer + line * kLine);
}

template <typename T>
__device__ inline T* data(char* buffer) {
  return reinterpret_cast<T*>(buffer + kFlagBytes);
}

using cuda::global_ns;

template <typename T>
__device__ inline float to_float(T x) {
  return static_cast<float>(x);
}
template <typename T>
__device__ inline T from_float(float x) {
  return static_cast<T>(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// Block `blockIdx.x` of this rank meets block `blockIdx.x` of every rank. Thread p < n signals
// rank p and waits for rank p. On timeout it records p + 1 in *error and lets the block go on
// (its results are then wrong, and the host reports the stuck peer instead of any figure).
__device__ void barrier(const Peers& peers, int rank, int n, int which, uint32_t epoch,
                        uint64_t timeout_ns, int* error) {
  __syncthreads();  // the block's writes before the signal
  const int p = static_cast<int>(threadIdx.x);
  if (p < n) {
    __threadfence_system();
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system> signal(
        *flag(peers.buffer[p], which, blockIdx.x, rank));
    signal.store(epoch, ::cuda::memory_order_release);
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system> arrived(
        *flag(peers.buffer[rank], which, blockIdx.x, p));
    const uint64_t start = global_ns();
    while (arrived.load(::cuda::memory_order_acquire) != epoch) {
      if (global_ns() - start > timeout_ns) {
        atomicCAS(error, 0, p + 1);
        break;
      }
    }
  }
  __syncthreads();  // the peers' writes before anyone reads them
}

template <typename T>
__device__ inline void copy_range(const T* __restrict__ from, T* __restrict__ to, size_t first,
                                  size_t last) {
  const size_t stride = static_cast<size_t>(kBlocks) * kThreads;
  for (size_t i = first + blockIdx.x * kThreads + threadIdx.x; i < last; i += stride)
    to[i] = from[i];
}

// Sums element range [first, last) over every rank's buffer, in rank order.
template <typename T>
__device__ inline void reduce_range(const Peers& peers, int n, size_t first, size_t last,
                                    T* __restrict__ out, T* __restrict__ also) {
  const size_t stride = static_cast<size_t>(kBlocks) * kThreads;
  for (size_t i = first + blockIdx.x * kThreads + threadIdx.x; i < last; i += stride) {
    float sum = 0;
    for (int p = 0; p < n; ++p)
      sum += to_float(data<T>(peers.buffer[p])[i]);
    const T v = from_float<T>(sum);
    out[i] = v;
    if (also != nullptr) also[i] = v;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    one_shot(Peers peers, int rank, int n, const T* in, T* out, size_t count, uint32_t epoch,
             uint64_t timeout_ns, int* error) {
  copy_range(in, data<T>(peers.buffer[rank]), 0, count);
  barrier(peers, rank, n, 0, epoch, timeout_ns, error);
  reduce_range<T>(peers, n, 0, count, out, nullptr);
  barrier(peers, rank, n, 1, epoch, timeout_ns, error);  // nobody reads this buffer after it
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    two_shot(Peers peers, Segments seg, int rank, int n, const T* in, T* out, uint32_t epoch,
             uint64_t timeout_ns, int* error) {
  T* mine = data<T>(peers.buffer[rank]);
  for (int s = 0; s < n; ++s)
    copy_range(in, mine, seg.first[s], seg.first[s + 1]);
  barrier(peers, rank, n, 0, epoch, timeout_ns, error);
  // Reduce-scatter: this rank's segment from everyone, into its buffer and its output.
  reduce_range<T>(peers, n, seg.first[rank], seg.first[rank + 1], mine, out);
  barrier(peers, rank, n, 1, epoch, timeout_ns, error);
  // All-gather: the other ranks' reduced segments.
  for (int p = 0; p < n; ++p) {
    if (p != rank) copy_range(data<T>(peers.buffer[p]), out, seg.first[p], seg.first[p + 1]);
  }
  barrier(peers, rank, n, 2, epoch, timeout_ns, error);
}

template <typename T>
void launch(IpcAlgorithm a, const Peers& peers, const Segments& seg, int rank, int n,
            const void* in, void* out, size_t count, uint32_t epoch, uint64_t timeout_ns,
            int* error, cudaStream_t stream) {
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  if (a == IpcAlgorithm::kOneShot) {
    one_shot<T><<<kBlocks, kThreads, 0, stream>>>(peers, rank, n, src, dst, count, epoch,
                                                  timeout_ns, error);
  } else {
    two_shot<T>
        <<<kBlocks, kThreads, 0, stream>>>(peers, seg, rank, n, src, dst, epoch, timeout_ns, error);
  }
  CUDA_TRY(cudaGetLastError());
}

__global__ void count_differences(const unsigned char* a, const unsigned char* b, size_t bytes,
                                  unsigned long long* counter) {
  unsigned long long mine = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += stride)
    mine += a[i] != b[i];
  if (mine != 0) atomicAdd(counter, mine);
}

}  // namespace

void launch_count_differences(cudaStream_t stream, const void* a, const void* b, size_t bytes,
                              unsigned long long* counter) {
  count_differences<<<264, 256, 0, stream>>>(static_cast<const unsigned char*>(a),
                                             static_cast<const unsigned char*>(b), bytes, counter);
  CUDA_TRY(cudaGetLastError());
}

const char* to_string(IpcAlgorithm a) {
  return a == IpcAlgorithm::kOneShot ? "IPC one-shot" : "IPC two-shot";
}

bool ipc_supports(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kBfloat16 || t == DataType::kFloat16;
}

IpcAllReduce::IpcAllReduce(workers::Communicator& comm, size_t max_bytes,
                           std::chrono::duration<double> timeout)
    : rank_(comm.rank()),
      ranks_(comm.size()),
      max_bytes_(max_bytes),
      timeout_ns_(static_cast<uint64_t>(timeout.count() * 1e9)),
      buffer_(kFlagBytes + padded_bytes(max_bytes, 1, kLine)),
      error_(sizeof(int), -1) {
  if (ranks_ < 1 || ranks_ > kMaxIpcRanks) {
    throw usage_error(
        fmt::format("{} ranks: the IPC all-reduce takes 1 to {}", ranks_, kMaxIpcRanks));
  }
  CUDA_TRY(cudaMemset(buffer_.get(), 0, kFlagBytes));  // epochs start at 1
  CUDA_TRY(cudaDeviceSynchronize());                   // zeroed before any peer can signal
  *static_cast<volatile int*>(error_.get()) = 0;
  peers_ = std::make_unique<cuda::IpcExchange>(comm, buffer_.get());
  comm.barrier();  // every rank's flags are zero before anyone runs
}

IpcAllReduce::~IpcAllReduce() = default;

void IpcAllReduce::run(IpcAlgorithm a, const void* in, void* out, size_t count, DataType t,
                       cudaStream_t stream) {
  const size_t element = type_size(t);
  if (!ipc_supports(t) || count * element > max_bytes_) {
    throw usage_error(
        fmt::format("IPC all-reduce of {} elements of {}: takes float, bfloat16 or "
                    "half up to {} bytes",
                    count, to_string(t), max_bytes_));
  }
  Peers peers{};
  for (int r = 0; r < ranks_; ++r)
    peers.buffer[r] = static_cast<char*>(peers_->at(r));
  // The two-shot split of the last size, kept: a sweep calls run() many times per size.
  if (a == IpcAlgorithm::kTwoShot && (count != planned_count_ || element != planned_element_)) {
    const std::vector<Segment> plan = two_shot_segments(count, element, ranks_, kLine);
    segment_first_[0] = 0;
    for (int r = 0; r < ranks_; ++r)
      segment_first_[r + 1] = segment_first_[r] + plan[static_cast<size_t>(r)].elements;
    planned_count_ = count;
    planned_element_ = element;
  }
  Segments seg{};
  std::copy(segment_first_.begin(), segment_first_.end(), seg.first);
  ++epoch_;
  int* error = static_cast<int*>(error_.get());
  switch (t) {
    case DataType::kFloat32:
      launch<float>(a, peers, seg, rank_, ranks_, in, out, count, epoch_, timeout_ns_, error,
                    stream);
      break;
    case DataType::kBfloat16:
      launch<__nv_bfloat16>(a, peers, seg, rank_, ranks_, in, out, count, epoch_, timeout_ns_,
                            error, stream);
      break;
    default:
      launch<__half>(a, peers, seg, rank_, ranks_, in, out, count, epoch_, timeout_ns_, error,
                     stream);
      break;
  }
}

int IpcAllReduce::timed_out_peer() const {
  return *static_cast<volatile int*>(error_.get()) - 1;
}

}  // namespace commtool::tracing
