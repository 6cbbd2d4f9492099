// The kernels of ipc_allreduce.hpp: one launch per call, of ipc_grid_blocks() blocks of
// kIpcThreads threads on every rank. A phase covers an element range; the range is cut into
// packs of 16 bytes counted from its start, block b takes the b-th of gridDim.x runs of
// consecutive packs of equal length (block_packs(): every block ends its phase together), its
// threads taking consecutive packs, kUnroll at a time, and the range's last partial pack goes to
// block 0. That holds on every rank and in every phase, whatever the alignment of the caller's
// input and output (those only choose between one 16-byte access and one access per element),
// which is what lets each barrier be per block. Ranges start on kIpcAlignBytes in the IPC
// buffers, so their packs are aligned there.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>
#include <cuda/atomic>

#include <algorithm>
#include <cstdint>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/element_convert.cuh"
#include "probes/base/cuda/global_timer.cuh"
#include "probes/base/error.hpp"
#include "tracing/allreduce/ipc_allreduce.hpp"
#include "tracing/allreduce/ipc_allreduce_plan.hpp"

namespace commtool::tracing {

namespace {

constexpr int kThreads = kIpcThreads;
constexpr int kBarriers = 3;  // one-shot uses 0 and 1; two-shot 0, 1 and 2
constexpr size_t kLine = kIpcAlignBytes;
constexpr size_t kFlagBytes = size_t{kBarriers} * kMaxIpcBlocks * kMaxIpcRanks * kLine;

// What every phase of a call needs.
struct Call {
  char* buffer[kMaxIpcRanks];  // every rank's IPC buffer, mapped here
  int rank, n;
  uint32_t epoch;
  uint64_t timeout_ns;
  int* error;
  bool in_aligned, out_aligned;  // the caller's pointers allow 16-byte accesses
};

struct Segments {
  size_t first[kMaxIpcRanks + 1];  // segment r is [first[r], first[r + 1])
};

__device__ inline uint32_t* flag(char* buffer, int barrier, int block, int source) {
  const size_t line =
      (static_cast<size_t>(barrier) * kMaxIpcBlocks + block) * kMaxIpcRanks + source;
  return reinterpret_cast<uint32_t*>(buffer + line * kLine);
}

template <typename T>
__device__ inline T* data(char* buffer) {
  return reinterpret_cast<T*>(buffer + kFlagBytes);
}

using cuda::global_ns;

using cuda::from_float;
using cuda::to_float;

// 16 bytes of elements: one vector load or store where the address allows it. A thread takes
// kUnroll packs per step, kIpcElementsPerThread elements.
template <typename T>
struct alignas(kIpcPackBytes) Pack {
  static constexpr int kElements = static_cast<int>(kIpcPackBytes / sizeof(T));
  static constexpr int kUnroll = kIpcElementsPerThread / kElements;
  static constexpr size_t kStep = size_t{kThreads} * kUnroll;  // packs per block and step
  T e[kElements];
};

// This block's packs of a range of `packs`: [first, last).
struct BlockPacks {
  size_t first, last;
};
__device__ inline BlockPacks block_packs(size_t packs) {
  const size_t per = (packs + gridDim.x - 1) / gridDim.x;
  const size_t first = min(packs, blockIdx.x * per);
  return {first, min(packs, first + per)};
}

// Loads and stores through L2 only (.cg), never the read-only or L1 path: peers' buffers change
// during the kernel and between calls, and the data is streamed once.
template <typename T>
__device__ inline Pack<T> load(const T* at, bool aligned) {
  Pack<T> p;
  if (aligned) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(at));
    memcpy(&p, &raw, sizeof p);
    return p;
  }
#pragma unroll
  for (int k = 0; k < Pack<T>::kElements; ++k)
    p.e[k] = __ldcg(at + k);
  return p;
}

template <typename T>
__device__ inline void store(T* at, const Pack<T>& p, bool aligned) {
  if (aligned) {
    uint4 raw;
    memcpy(&raw, &p, sizeof raw);
    __stcg(reinterpret_cast<uint4*>(at), raw);
    return;
  }
#pragma unroll
  for (int k = 0; k < Pack<T>::kElements; ++k)
    __stcg(at + k, p.e[k]);
}

// Block `blockIdx.x` of this rank meets block `blockIdx.x` of every rank. Thread p < n signals
// rank p and waits for rank p. At one rank there is nobody to meet and no data any other block
// or rank reads (nothing is copied into the IPC buffer), so it returns at once: a rank's fences
// and flag round trip against itself cost about 1.1 us per barrier on the H200 (2026-12-04) and
// would order nothing. The release store at system scope publishes the block's writes,
// which __syncthreads ordered before it, to every GPU; the acquire load and the __syncthreads
// after it make the peers' writes visible to the whole block. On timeout it records p + 1 in
// *error and lets the block go on (its results are then wrong, and the host reports the stuck
// peer instead of any figure).
__device__ void barrier(const Call& c, int which) {
  if (c.n == 1) return;
  __syncthreads();  // the block's writes before the signal
  const int p = static_cast<int>(threadIdx.x);
  if (p < c.n) {
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system> signal(
        *flag(c.buffer[p], which, blockIdx.x, c.rank));
    signal.store(c.epoch, ::cuda::memory_order_release);
    ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system> arrived(
        *flag(c.buffer[c.rank], which, blockIdx.x, p));
    const uint64_t start = global_ns();
    while (arrived.load(::cuda::memory_order_acquire) != c.epoch) {
      if (global_ns() - start > c.timeout_ns) {
        atomicCAS(c.error, 0, p + 1);
        break;
      }
    }
  }
  __syncthreads();  // the peers' writes before anyone reads them
}

// Copies elements [first, first + len) from `from` to `to`, packs as the top of the file deals
// them; pointers are element pointers of whole buffers.
template <typename T>
__device__ void copy_range(const T* from, bool from_aligned, T* to, bool to_aligned, size_t first,
                           size_t len) {
  constexpr int W = Pack<T>::kElements, kUnroll = Pack<T>::kUnroll;
  constexpr size_t kStep = Pack<T>::kStep;
  const size_t packs = len / W;
  const BlockPacks mine = block_packs(packs);
  for (size_t base = mine.first + threadIdx.x; base < mine.last; base += kStep) {
    Pack<T> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = base + u * kThreads;
      if (j < mine.last) v[u] = load(from + first + j * W, from_aligned);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = base + u * kThreads;
      if (j < mine.last) store(to + first + j * W, v[u], to_aligned);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x < len % W) {
    const size_t i = first + packs * W + threadIdx.x;
    to[i] = from[i];
  }
}

// Rank p's contribution: this rank's own from its input `in`, the peers' from their IPC buffers.
// Read from the kernel's parameters in place (__grid_constant__): copying the call to the
// thread's stack to index it would cost every thread a local-memory store and load.
template <typename T>
__device__ inline const T* source(const Call& c, const T* in, int p) {
  return p == c.rank ? in : data<T>(c.buffer[p]);
}

// Sums elements [first, first + len) over the n ranks, in rank order (every rank adds alike, so
// all outputs are bitwise equal), in float, into `out` and, when not null, `also` (an IPC
// buffer: aligned). `in` is this rank's input (its alignment is c.in_aligned).
template <typename T>
__device__ void reduce_range(const Call& c, const T* in, size_t first, size_t len, T* out,
                             T* also) {
  constexpr int W = Pack<T>::kElements, kUnroll = Pack<T>::kUnroll;
  constexpr size_t kStep = Pack<T>::kStep;
  const size_t packs = len / W;
  const BlockPacks mine = block_packs(packs);
  for (size_t base = mine.first + threadIdx.x; base < mine.last; base += kStep) {
    float sum[kUnroll][W] = {};
    // One source at a time (not unrolled: the registers hold one source's packs and the sums).
#pragma unroll 1
    for (int p = 0; p < c.n; ++p) {
      const bool aligned = p != c.rank || c.in_aligned;
      const T* from = source(c, in, p) + first;
      Pack<T> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t j = base + u * kThreads;
        if (j < mine.last) v[u] = load(from + j * W, aligned);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int k = 0; k < W; ++k)
          sum[u][k] = p == 0 ? to_float(v[u].e[k]) : sum[u][k] + to_float(v[u].e[k]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t j = base + u * kThreads;
      if (j >= mine.last) continue;
      Pack<T> r;
#pragma unroll
      for (int k = 0; k < W; ++k)
        r.e[k] = from_float<T>(sum[u][k]);
      store(out + first + j * W, r, c.out_aligned);
      if (also != nullptr) store(also + first + j * W, r, true);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x < len % W) {
    const size_t i = first + packs * W + threadIdx.x;
    float s = to_float(source(c, in, 0)[i]);
    for (int p = 1; p < c.n; ++p)
      s += to_float(source(c, in, p)[i]);
    const T v = from_float<T>(s);
    out[i] = v;
    if (also != nullptr) also[i] = v;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
    one_shot(const __grid_constant__ Call c, const T* in, T* out, size_t count) {
  T* mine = data<T>(c.buffer[c.rank]);
  if (c.n > 1) copy_range(in, c.in_aligned, mine, true, 0, count);  // for the peers to read
  barrier(c, 0);
  reduce_range<T>(c, in, 0, count, out, nullptr);
  barrier(c, 1);  // nobody reads this buffer after it
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
    two_shot(const __grid_constant__ Call c, const __grid_constant__ Segments seg, const T* in,
             T* out) {
  T* mine = data<T>(c.buffer[c.rank]);
  // The segments the peers reduce; this rank's own it reads from its input.
  for (int s = 0; s < c.n; ++s) {
    if (s != c.rank) {
      copy_range(in, c.in_aligned, mine, true, seg.first[s], seg.first[s + 1] - seg.first[s]);
    }
  }
  barrier(c, 0);
  // Reduce-scatter: this rank's segment from everyone, into its output and, for the peers to
  // gather, its buffer.
  const size_t first = seg.first[c.rank];
  reduce_range<T>(c, in, first, seg.first[c.rank + 1] - first, out, c.n > 1 ? mine : nullptr);
  barrier(c, 1);
  // All-gather: the other ranks' reduced segments.
  for (int p = 0; p < c.n; ++p) {
    if (p != c.rank) {
      copy_range(data<T>(c.buffer[p]), true, out, c.out_aligned, seg.first[p],
                 seg.first[p + 1] - seg.first[p]);
    }
  }
  barrier(c, 2);
}

template <typename T>
void launch(IpcAlgorithm a, const Call& c, const Segments& seg, int blocks, const void* in,
            void* out, size_t count, cudaStream_t stream) {
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  if (a == IpcAlgorithm::kOneShot) {
    one_shot<T><<<blocks, kThreads, 0, stream>>>(c, src, dst, count);
  } else {
    two_shot<T><<<blocks, kThreads, 0, stream>>>(c, seg, src, dst);
  }
  CUDA_TRY(cudaGetLastError());
}

// The fewest blocks of kThreads any of the kernels keeps resident on one SM of this GPU.
int resident_blocks_per_sm() {
  int least = 0;
  auto take = [&least](const void* kernel) {
    int blocks = 0;
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0));
    least = least == 0 ? blocks : std::min(least, blocks);
  };
  take(reinterpret_cast<const void*>(&one_shot<float>));
  take(reinterpret_cast<const void*>(&one_shot<__nv_bfloat16>));
  take(reinterpret_cast<const void*>(&one_shot<__half>));
  take(reinterpret_cast<const void*>(&two_shot<float>));
  take(reinterpret_cast<const void*>(&two_shot<__nv_bfloat16>));
  take(reinterpret_cast<const void*>(&two_shot<__half>));
  return least;
}

// This rank's GPU and how many blocks it keeps resident, as "<resident> <PCI bus id>".
std::string describe_gpu() {
  int device = 0, sms = 0;
  CUDA_TRY(cudaGetDevice(&device));
  CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  char bus[64] = {};
  CUDA_TRY(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  return fmt::format("{} {}", sms * resident_blocks_per_sm(), bus);
}

// The grid cap of every rank, from every rank's describe_gpu(): the same on all.
int agree_on_cap(workers::Communicator& comm) {
  std::vector<IpcRankGpu> ranks;
  for (const std::string& d : comm.allgather(describe_gpu())) {
    const size_t space = d.find(' ');
    ranks.push_back({d.substr(space + 1), std::stoi(d.substr(0, space))});
  }
  return ipc_block_cap(ranks);
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

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kIpcPackBytes == 0;
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
      grid_cap_(agree_on_cap(comm)),
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
  Call c{};
  for (int r = 0; r < ranks_; ++r)
    c.buffer[r] = static_cast<char*>(peers_->at(r));
  c.rank = rank_;
  c.n = ranks_;
  c.epoch = ++epoch_;
  c.timeout_ns = timeout_ns_;
  c.error = static_cast<int*>(error_.get());
  c.in_aligned = aligned(in);
  c.out_aligned = aligned(out);
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
  const int blocks = ipc_grid_blocks(count, grid_cap_);
  switch (t) {
    case DataType::kFloat32:
      launch<float>(a, c, seg, blocks, in, out, count, stream);
      break;
    case DataType::kBfloat16:
      launch<__nv_bfloat16>(a, c, seg, blocks, in, out, count, stream);
      break;
    default:
      launch<__half>(a, c, seg, blocks, in, out, count, stream);
      break;
  }
}

int IpcAllReduce::timed_out_peer() const {
  return *static_cast<volatile int*>(error_.get()) - 1;
}

}  // namespace commtool::tracing
