// One rank's side of NCCL collectives, issued the way a framework issues them: a producer
// stream makes the input and records "input ready"; the NCCL stream waits for it, runs the
// collective and records "end"; the host completes the collective in one of the four ways of
// CompletionMode (tracing/trace/trace_run.hpp); a consumer stream then reads the output (the check
// kernel, which counts every wrong element). Each operation is isolated: the next starts only once
// the consumer is done, so its intervals are its own.
//
// Every GPU wait is bounded by the timeout: event waits poll NCCL's async error and abort the
// communicator at the deadline; the blocking calls the modes exist to measure
// (cudaDeviceSynchronize, cudaEventSynchronize) run under a watchdog that aborts the
// communicator so NCCL's kernels return, and the operation is reported as stuck (exit 5).
// Each operation is on the launcher's progress board as it goes (enqueued, started on the GPU,
// completed; busy during each bounded step), so a rank stuck where it cannot bound itself (a
// blocking communicator's NCCL call) is stopped and named from outside.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "probes/base/cuda/memory.hpp"
#include "probes/base/nccl/communicator.hpp"
#include "probes/base/workers/progress_board.hpp"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collectives.hpp"
#include "tracing/cupti/cupti_tracer.hpp"  // HarnessHandles
#include "tracing/cupti/records.hpp"
#include "tracing/trace/fault.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::tracing {

struct CollectiveSpec {
  Collective collective = Collective::kAllReduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool inplace = false;
  int root = 0;
  bool check = true;  // run the check kernel as the consumer; else an empty consumer kernel
};

class CollectiveRunner {
 public:
  // Allocates buffers for the largest size once; nothing is allocated per operation.
  // `progress`: this rank's board slot (none: a no-op); `fault`: a --inject-fault to act on
  // when it names this rank.
  CollectiveRunner(const nccl::Library& lib, nccl::Communicator& comm, int nranks,
                   const CollectiveSpec& spec, uint64_t max_bytes,
                   std::chrono::duration<double> timeout, workers::Progress* progress = nullptr,
                   std::optional<Fault> fault = std::nullopt);
  ~CollectiveRunner();
  CollectiveRunner(const CollectiveRunner&) = delete;
  CollectiveRunner& operator=(const CollectiveRunner&) = delete;

  // One isolated operation. `mark` gets the host times (CLOCK_MONOTONIC ns) and the harness's
  // own completion query; its stream and event ids are the caller's (CUPTI's numbering).
  OperationSample run(uint64_t bytes, CompletionMode mode, int poll_ms, uint64_t seq,
                      OperationMark& mark);

  // One batch (trace_run.hpp's BatchSample): the input made once, `ops` operations queued back
  // to back between one pair of events, the last one's output checked. Out-of-place only.
  BatchSample run_batch(uint64_t bytes, int ops, uint64_t first_seq);

  // One --stream-scope sample: the producer sleeps `sleep_ns` on the GPU before making the
  // input; after the host's wait, stream A waits for the end event and records a marker, and
  // stream B records a marker with no wait.
  StreamScopeSample run_scope(uint64_t bytes, CompletionMode mode, int poll_ms, uint64_t seq,
                              uint64_t sleep_ns);

  HarnessHandles handles() const {
    return {producer_.get(), nccl_.get(), consumer_.get(), input_ready_.get(), end_.get()};
  }

 private:
  struct Watchdog;

  // Writes this operation's input on the producer stream and records input-ready after it.
  void produce(const BufferLayout& layout, uint32_t seed);
  void enqueue(const BufferLayout& layout, uint64_t seq);
  // Queues the operation itself, on the board first (and a --inject-fault at it).
  void issue_on_board(const BufferLayout& layout, uint64_t seq);
  ncclResult_t issue(const BufferLayout& layout);
  bool faulty(FaultKind kind, uint64_t seq) const;
  // The host's completion step; returns whether it slept between polls.
  bool complete(CompletionMode mode, int poll_ms, const std::string& what, uint64_t seq);
  // Queues the check on the consumer stream; `ordered`: it already waits on the end event.
  void consume(const BufferLayout& layout, uint32_t seed, bool ordered);
  // Waits for the consumer; returns wrong elements.
  uint64_t finish(const std::string& what, uint64_t seq);
  std::string describe(uint64_t seq, uint64_t bytes, CompletionMode mode) const;

  const nccl::Library& lib_;
  nccl::Communicator& comm_;
  int nranks_;
  CollectiveSpec spec_;
  std::chrono::duration<double> timeout_;
  workers::Progress& progress_;
  std::optional<Fault> fault_;
  std::string board_name_;  // "allreduce float sum": what every rank must enqueue alike
  cuda::DeviceBuffer send_, recv_;
  cuda::PinnedHostBuffer wrong_;  // mapped: the check kernel counts into host memory
  cuda::Stream producer_, nccl_, consumer_, other_;
  cuda::Event input_ready_, start_, end_, consumer_done_, marker_a_, marker_b_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace commtool::tracing
