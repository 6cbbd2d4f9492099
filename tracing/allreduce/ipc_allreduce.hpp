// commtool's own CUDA-IPC all-reduce (sum of float, bfloat16 or half), the custom path that
// `diagnose allreduce` sets beside NCCL's algorithms:
//  - one-shot: every rank copies its input into its IPC buffer; a barrier; every rank reads all
//    ranks' inputs (its own from its input, the peers' from their buffers) and reduces into its
//    output. Reads n buffers per rank: best for small sizes.
//  - two-shot: every rank copies into its IPC buffer the segments of its input the peers reduce;
//    a barrier; rank i reduces segment i from all ranks into its output and its buffer
//    (reduce-scatter); a barrier; every rank copies the other ranks' reduced segments into its
//    output (all-gather). Moves 2(n-1)/n of the data per rank instead of (n-1): better for large
//    sizes.
// At one rank no peer reads the IPC buffer, so neither algorithm writes it and no barrier runs
// (there is nobody to wait for): the kernel reads the input and writes the output once
// (ipc_kernel_bytes() in ipc_allreduce_plan.hpp counts every case).
// Every rank sums in rank order 0..n-1 (16-bit types in float), so all ranks' outputs are
// bitwise equal.
//
// The grid: ipc_grid_blocks() (ipc_allreduce_plan.hpp) blocks of kIpcThreads, one per
// kIpcThreads x kIpcElementsPerThread elements of the buffer, up to a cap the ranks agree on when
// the communicator is made: the fewest blocks any rank's GPU keeps resident at once, shared among
// the ranks on that GPU. Every block is then resident together, so no barrier waits on a peer
// block that cannot start. Threads move 16 bytes per load and store (one element at a time
// only where the caller's input or output is not 16-byte aligned).
//
// Synchronisation: each rank's buffer begins with flag lines, one 128-byte line per (barrier,
// block, source rank), away from the data. Block b of rank r signals a barrier by storing the
// call's epoch into line (barrier, b, r) of every rank's buffer (a release store at system
// scope, after __syncthreads) and waits until every rank's store has reached its own lines
// (acquire). The epoch grows by one per call, so a flag left from the previous call never passes
// for the current one. Block b touches the same elements in every phase on every rank (the same
// grid everywhere, a range's packs split among blocks the same way whatever the caller's
// alignment), so a per-block barrier orders exactly the data it must; no grid-wide barrier is
// needed. A closing barrier keeps a rank from overwriting its buffer while a peer still reads it.
//
// Set up once per communicator (allocation, the grid cap and the handle exchange over the worker
// channel); run() only launches one kernel: no allocation, no host synchronisation. Every wait
// inside the kernel gives up after the timeout and records which peer never came
// (timed_out_peer()).
//
// Sharp edges: every rank must call run() with the same algorithm, count and type, in the same
// order; at most kMaxIpcRanks ranks; only where every pair of ranks can map each other's memory
// (P2P, or processes sharing one GPU).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "probes/base/cuda/ipc_exchange.hpp"
#include "probes/base/cuda/memory.hpp"
#include "probes/base/workers/communicator.hpp"
#include "tracing/allreduce/ipc_allreduce_plan.hpp"
#include "tracing/collectives/collective_data.hpp"

namespace commtool::tracing {

inline constexpr int kMaxIpcRanks = 8;

const char* to_string(IpcAlgorithm a);

// float, bfloat16 and half: what the IPC kernels reduce.
bool ipc_supports(DataType t);

// Adds to *counter (host-mapped or device) the number of bytes where a and b differ: the
// check of every timed call against the expected output.
void launch_count_differences(cudaStream_t stream, const void* a, const void* b, size_t bytes,
                              unsigned long long* counter);

class IpcAllReduce {
 public:
  // Collective over the worker channel: every rank passes the same max_bytes.
  IpcAllReduce(workers::Communicator& comm, size_t max_bytes,
               std::chrono::duration<double> timeout);
  ~IpcAllReduce();
  IpcAllReduce(const IpcAllReduce&) = delete;
  IpcAllReduce& operator=(const IpcAllReduce&) = delete;

  // Enqueues the all-reduce of `count` elements of `in` into `out` (device pointers; they may
  // be the same) on `stream`.
  void run(IpcAlgorithm algorithm, const void* in, void* out, size_t count, DataType t,
           cudaStream_t stream);

  // Once the stream has passed the last run(): -1, or the rank whose flag never arrived.
  int timed_out_peer() const;

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }

 private:
  int rank_, ranks_;
  size_t max_bytes_;
  uint64_t timeout_ns_;
  int grid_cap_;  // the most blocks a call launches, the same on every rank
  uint32_t epoch_ = 0;
  size_t planned_count_ = SIZE_MAX, planned_element_ = 0;
  std::array<size_t, kMaxIpcRanks + 1> segment_first_{};
  cuda::DeviceBuffer buffer_;  // flag lines, then data
  cuda::PinnedHostBuffer error_;
  std::unique_ptr<cuda::IpcExchange> peers_;
};

}  // namespace commtool::tracing
