// The fill and check kernels of ep_exchange.hpp, and the runner that issues the NCCL group
// between them. One kernel launch covers every peer's segment: blockIdx.y picks the segment
// (its bounds come in a by-value table), blockIdx.x strides over its bytes.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/error.hpp"
#include "tracing/collectives/nccl_worker.hpp"
#include "tracing/ep/ep_exchange.hpp"

namespace commtool::tracing {

namespace {

constexpr int kThreads = 256;

struct Segments {
  uint64_t offset[kMaxExchangeRanks + 1];  // segment p is [offset[p], offset[p + 1])
};

Segments segments_of(const std::vector<uint64_t>& bytes) {
  Segments s{};
  for (size_t p = 0; p < bytes.size(); ++p)
    s.offset[p + 1] = s.offset[p] + bytes[p];
  return s;
}

__global__ void fill_segments(uint8_t* __restrict__ send, Segments seg, uint32_t rank,
                              uint32_t seed) {
  const uint32_t peer = blockIdx.y;
  const uint64_t begin = seg.offset[peer], bytes = seg.offset[peer + 1] - begin;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    send[begin + i] = exchange_byte(rank, peer, seed, i);
  }
}

__global__ void check_segments(const uint8_t* __restrict__ recv, Segments seg, uint32_t rank,
                               uint32_t seed, unsigned long long* wrong) {
  const uint32_t peer = blockIdx.y;
  const uint64_t begin = seg.offset[peer], bytes = seg.offset[peer + 1] - begin;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    mine += recv[begin + i] != exchange_byte(peer, rank, seed, i);
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

dim3 grid_for(const std::vector<uint64_t>& bytes) {
  const uint64_t largest = *std::max_element(bytes.begin(), bytes.end());
  const uint64_t blocks = std::clamp<uint64_t>((largest + kThreads - 1) / kThreads, 1, 1024);
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(bytes.size()));
}

uint64_t total(const std::vector<uint64_t>& v) {
  return std::accumulate(v.begin(), v.end(), uint64_t{0});
}

}  // namespace

ExchangeRunner::ExchangeRunner(const nccl::Library& lib, nccl::Communicator& comm, int nranks,
                               uint64_t max_send_bytes, uint64_t max_recv_bytes,
                               workers::Progress* progress)
    : lib_(lib),
      comm_(comm),
      nranks_(nranks),
      progress_(workers::progress_or_none(progress)),
      send_(std::max<uint64_t>(max_send_bytes, 1)),
      recv_(std::max<uint64_t>(max_recv_bytes, 1)),
      wrong_(sizeof(unsigned long long), -1) {
  if (nranks < 1 || nranks > kMaxExchangeRanks) {
    throw usage_error(
        fmt::format("{} ranks: an exchange takes 1 to {} ranks", nranks, kMaxExchangeRanks));
  }
}

ExchangeSample ExchangeRunner::run(const ExchangeCounts& c, uint32_t seq, const std::string& name,
                                   const std::string& what, OperationMark* mark) {
  const uint32_t seed = seq;
  const auto n = static_cast<size_t>(nranks_);
  if (c.send_bytes.size() != n || c.recv_bytes.size() != n || total(c.send_bytes) > send_.bytes() ||
      total(c.recv_bytes) > recv_.bytes()) {
    throw Error(ExitCode::kUsage, fmt::format("{}: counts do not fit this runner", what));
  }
  const uint32_t rank = static_cast<uint32_t>(comm_.rank());
  auto* send = static_cast<uint8_t*>(send_.get());
  auto* recv = static_cast<uint8_t*>(recv_.get());
  const Segments out = segments_of(c.send_bytes), in = segments_of(c.recv_bytes);
  auto* wrong = static_cast<unsigned long long*>(wrong_.get());
  *static_cast<volatile unsigned long long*>(wrong) = 0;

  fill_segments<<<grid_for(c.send_bytes), kThreads, 0, producer_.get()>>>(send, out, rank, seed);
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaEventRecord(input_ready_.get(), producer_.get()));

  // Every rank enqueues this seq under the same name; the counts differ by rank (0: not
  // compared).
  progress_.enqueued(seq, name, 0);
  progress_.busy();
  const uint64_t enqueue_start = monotonic_ns();
  CUDA_TRY(cudaStreamWaitEvent(nccl_.get(), input_ready_.get(), 0));
  CUDA_TRY(cudaEventRecord(start_.get(), nccl_.get()));
  comm_.settle(lib_.group_start(), "ncclGroupStart");
  for (size_t p = 0; p < n; ++p) {
    const int peer = static_cast<int>(p);
    if (c.send_bytes[p] != 0) {
      comm_.settle(lib_.send(send + out.offset[p], c.send_bytes[p], ncclUint8, peer, comm_.get(),
                             nccl_.get()),
                   "ncclSend");
    }
    if (c.recv_bytes[p] != 0) {
      comm_.settle(lib_.recv(recv + in.offset[p], c.recv_bytes[p], ncclUint8, peer, comm_.get(),
                             nccl_.get()),
                   "ncclRecv");
    }
  }
  comm_.settle(lib_.group_end(), "ncclGroupEnd");
  CUDA_TRY(cudaEventRecord(end_.get(), nccl_.get()));
  CUDA_TRY(cudaStreamWaitEvent(consumer_.get(), end_.get(), 0));
  const uint64_t enqueue_end = monotonic_ns();
  if (mark) {
    mark->enqueue_start_ns = enqueue_start;
    mark->enqueue_end_ns = enqueue_end;
    mark->wait_start_ns = mark->wait_end_ns = mark->enqueue_end_ns;
    mark->wait_polls = false;
    mark->complete_at_wait_return = cudaEventQuery(end_.get()) == cudaSuccess ? 1 : 0;
    cudaGetLastError();  // a not-ready query leaves no error behind, but be sure
  }

  check_segments<<<grid_for(c.recv_bytes), kThreads, 0, consumer_.get()>>>(recv, in, rank, seed,
                                                                           wrong);
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaEventRecord(consumer_done_.get(), consumer_.get()));
  wait_for_operation(comm_, progress_, start_.get(), consumer_done_.get(), seq, what);

  ExchangeSample s;
  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, start_.get(), end_.get()));
  s.time_us = ms * 1e3;
  s.host_enqueue_us = static_cast<double>(enqueue_end - enqueue_start) / 1e3;
  s.wrong_bytes = *static_cast<volatile unsigned long long*>(wrong);
  return s;
}

}  // namespace commtool::tracing
