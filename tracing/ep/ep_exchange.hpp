// One rank's side of an expert-parallel exchange (MoE dispatch or combine) as PyTorch's
// all_to_all_single issues it: one NCCL group of ncclSend/ncclRecv with a byte count per peer.
// Issued like trace's collectives: a producer stream writes every outgoing segment with a
// pattern that names sender, receiver, operation and offset; the NCCL stream waits for it and
// runs the group between two events; the consumer stream is made to wait for the end event
// (what PyTorch's async_op=False does) and its kernel checks every received byte against the
// pattern its sender must have written; the host waits for the check (bounded by the
// communicator's deadline). Nothing is allocated per operation. The structure is trace's
// (tracing/trace/collective_runner.hpp in sync mode), so a traced exchange is split into the same
// intervals by tracing/trace/attribution.hpp.
//
// Sharp edges: every rank must call run() with matching counts (rank r's send_bytes[p] is rank
// p's recv_bytes[r]) or NCCL waits forever, which the deadline turns into exit 5; at most
// kMaxExchangeRanks ranks (the segment table travels as a kernel argument).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "probes/base/cuda/memory.hpp"
#include "probes/base/nccl/communicator.hpp"
#include "tracing/cupti/cupti_tracer.hpp"  // HarnessHandles
#include "tracing/cupti/records.hpp"
#include "tracing/ep/ep_measure.hpp"  // kMaxExchangeRanks

namespace commtool::tracing {

struct ExchangeCounts {
  std::vector<uint64_t> send_bytes;  // per peer, self included
  std::vector<uint64_t> recv_bytes;  // per peer, self included
};

struct ExchangeSample {
  double time_us = 0;          // CUDA events around the group on the NCCL stream
  double host_enqueue_us = 0;  // host clock: the NCCL stream's wait for the input to the
                               // consumer stream's wait for the end event
  uint64_t wrong_bytes = 0;    // received bytes that differ from the sender's pattern
};

// The byte a sender writes at `offset` of the segment for `dst` in operation `seed`; the
// receiver's check recomputes it. Host and device share it (tests check it on the CPU).
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline uint8_t
    exchange_byte(uint32_t src, uint32_t dst, uint32_t seed, uint64_t offset) {
  uint32_t h = src * 0x9E3779B1u ^ dst * 0x85EBCA77u ^ seed * 0xC2B2AE3Du ^
               static_cast<uint32_t>(offset) ^ static_cast<uint32_t>(offset >> 32) * 0x27D4EB2Fu;
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return static_cast<uint8_t>(h);
}

class ExchangeRunner {
 public:
  // Buffers for the largest send and receive totals, allocated once. `progress`: this rank's
  // slot on the launcher's progress board (none: a no-op).
  ExchangeRunner(const nccl::Library& lib, nccl::Communicator& comm, int nranks,
                 uint64_t max_send_bytes, uint64_t max_recv_bytes,
                 workers::Progress* progress = nullptr);
  ExchangeRunner(const ExchangeRunner&) = delete;
  ExchangeRunner& operator=(const ExchangeRunner&) = delete;

  // One isolated, checked exchange, `seq` on every rank alike (it also seeds the data). `name`
  // is what every rank enqueues under that seq ("routed dispatch"; the counts differ by rank),
  // `what` names it in a timeout error. With a mark (its ids
  // from CuptiTracer::mark_ids), its host times (CLOCK_MONOTONIC ns) are filled in as trace's
  // sync mode fills them: the enqueue runs from the NCCL stream's wait for the input to the
  // consumer stream's wait for the end event; the wait interval is empty.
  ExchangeSample run(const ExchangeCounts& counts, uint32_t seq, const std::string& name,
                     const std::string& what, OperationMark* mark = nullptr);

  HarnessHandles handles() const {
    return {producer_.get(), nccl_.get(), consumer_.get(), input_ready_.get(), end_.get()};
  }

 private:
  const nccl::Library& lib_;
  nccl::Communicator& comm_;
  int nranks_;
  workers::Progress& progress_;
  cuda::DeviceBuffer send_, recv_;
  cuda::PinnedHostBuffer wrong_;
  cuda::Stream producer_, nccl_, consumer_;
  cuda::Event input_ready_, start_, end_, consumer_done_;
};

}  // namespace commtool::tracing
