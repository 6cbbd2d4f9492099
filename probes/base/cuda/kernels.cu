#include "probes/base/cuda/global_timer.cuh"
#include "probes/base/cuda/kernels.cuh"
#include "probes/base/cuda/pattern.hpp"

namespace commtool::cuda {

namespace {

__device__ inline int load_acquire_sys(const int* p) {
  int v;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ inline void store_release_sys(int* p, int v) {
  asm volatile("st.release.sys.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ inline uint64_t load_uncached(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.global.cv.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__global__ void spin_until_released(const volatile int* release, int* timed_out,
                                    uint64_t timeout_ns) {
  const uint64_t start = global_ns();
  while (*release == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(100);
  }
}

__global__ void sm_copy(int4* __restrict__ dst, const int4* __restrict__ src, size_t vectors,
                        unsigned char* __restrict__ dst_tail,
                        const unsigned char* __restrict__ src_tail, size_t tail) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Four independent 16-byte loads in flight per thread before the stores: latency-bound links
  // (PCIe, NVLink) need many outstanding requests.
  for (; i + 3 * stride < vectors; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < vectors; i += stride)
    dst[i] = src[i];
  if (blockIdx.x == 0 && threadIdx.x < tail) dst_tail[threadIdx.x] = src_tail[threadIdx.x];
}

__global__ void fill_pattern(uint32_t* dst, size_t words, uint32_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    dst[i] = pattern_word(i, seed);
  }
}

__global__ void count_mismatches(const uint32_t* buf, size_t words, uint32_t seed,
                                 unsigned long long* mismatches) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride) {
    bad += buf[i] != pattern_word(i, seed);
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

__global__ void pointer_chase(const uint64_t* chain, int hops, uint64_t* result) {
  uint64_t at = 0;
  const uint64_t start = global_ns();
  for (int h = 0; h < hops; ++h)
    at = load_uncached(chain + at);
  const uint64_t end = global_ns();
  result[0] = at;  // keeps the chase from being optimised away, and is checked by the host
  result[1] = end - start;
}

__global__ void flag_pingpong(int* my_flag, int* peer_flag, int rounds, int epoch, bool initiator,
                              uint64_t timeout_ns, uint64_t* result) {
  const uint64_t start = global_ns();
  for (int r = 1; r <= rounds; ++r) {
    const int value = epoch + r;
    if (initiator) store_release_sys(peer_flag, value);
    while (load_acquire_sys(my_flag) != value) {
      if (global_ns() - start > timeout_ns) {
        result[1] = 1;
        return;
      }
    }
    if (!initiator) store_release_sys(peer_flag, value);
  }
  result[0] = global_ns() - start;
  result[1] = 0;
}

int blocks_for(size_t items, int threads) {
  size_t blocks = (items + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  return static_cast<int>(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);
}

}  // namespace

void launch_spin_until_released(cudaStream_t stream, const volatile int* release, int* timed_out,
                                uint64_t timeout_ns) {
  spin_until_released<<<1, 1, 0, stream>>>(release, timed_out, timeout_ns);
}

void launch_sm_copy(cudaStream_t stream, void* dst, const void* src, size_t bytes, int blocks) {
  const size_t vectors = bytes / sizeof(int4);
  const size_t tail = bytes % sizeof(int4);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  sm_copy<<<blocks, 512, 0, stream>>>(reinterpret_cast<int4*>(d), reinterpret_cast<const int4*>(s),
                                      vectors, d + vectors * sizeof(int4),
                                      s + vectors * sizeof(int4), tail);
}

void launch_fill_pattern(cudaStream_t stream, void* dst, size_t bytes, uint32_t seed) {
  const size_t words = bytes / 4;
  fill_pattern<<<blocks_for(words, 256), 256, 0, stream>>>(static_cast<uint32_t*>(dst), words,
                                                           seed);
}

void launch_count_mismatches(cudaStream_t stream, const void* buf, size_t bytes, uint32_t seed,
                             unsigned long long* mismatches) {
  const size_t words = bytes / 4;
  count_mismatches<<<blocks_for(words, 256), 256, 0, stream>>>(static_cast<const uint32_t*>(buf),
                                                               words, seed, mismatches);
}

void launch_pointer_chase(cudaStream_t stream, const uint64_t* chain, int hops, uint64_t* result) {
  pointer_chase<<<1, 1, 0, stream>>>(chain, hops, result);
}

void launch_flag_pingpong(cudaStream_t stream, int* my_flag, int* peer_flag, int rounds, int epoch,
                          bool initiator, uint64_t timeout_ns, uint64_t* result) {
  flag_pingpong<<<1, 1, 0, stream>>>(my_flag, peer_flag, rounds, epoch, initiator, timeout_ns,
                                     result);
}

}  // namespace commtool::cuda
