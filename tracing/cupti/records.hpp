// Normalised trace records: what the CUPTI layer and the harness hand to attribution, with
// every timestamp in nanoseconds on one timeline (CUPTI's clock; the harness converts its
// host clock readings). Plain data: attribution and the saved-record format read only this.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace commtool::tracing {

// The harness's host clock, in ns: CLOCK_MONOTONIC (steady_clock), the timeline CUPTI's
// records are put on (tracing/cupti/cupti_tracer.hpp).
inline uint64_t monotonic_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// GPU work from CONCURRENT_KERNEL, MEMCPY and MEMSET activity records.
enum class GpuWorkKind { kKernel, kMemcpy, kMemset };

struct GpuWork {
  GpuWorkKind kind = GpuWorkKind::kKernel;
  uint32_t stream = 0;
  uint32_t correlation = 0;  // links it to the API call that queued it
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string name;
};

// A runtime or driver API call (RUNTIME/DRIVER activity records), on the host.
struct ApiCall {
  uint32_t correlation = 0;
  uint32_t thread = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string name;
};

// A stream made to wait for an event (SYNCHRONIZATION, stream-wait-event): the host call.
struct StreamWaitCall {
  uint32_t stream = 0;
  uint32_t event = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// When an event completed on the GPU (CUDA_EVENT with device timestamps enabled).
struct EventCompletion {
  uint32_t event = 0;
  uint32_t stream = 0;
  uint64_t device_ns = 0;
};

// What the harness knows about one collective it issued, on the same timeline.
struct OperationMark {
  uint64_t seq = 0;
  uint32_t thread = 0;           // the host thread that enqueued it
  uint32_t producer_stream = 0;  // where its input was made
  uint32_t nccl_stream = 0;
  uint32_t consumer_stream = 0;
  uint32_t input_ready_event = 0;  // recorded on the producer stream, waited on by NCCL's
  uint32_t end_event = 0;          // recorded on the NCCL stream after the collective
  uint64_t enqueue_start_ns = 0;   // around the host call that queued the collective
  uint64_t enqueue_end_ns = 0;
  uint64_t wait_start_ns = 0;  // around the completion step the mode uses
  uint64_t wait_end_ns = 0;
  bool wait_polls = false;           // the completion step slept between event queries
  int complete_at_wait_return = -1;  // the harness's own cudaEventQuery then: 1, 0, -1 unknown
};

// An NVTX range on a host thread (MARKER activity records): NCCL's own ranges, such as
// "ncclAllReduce", when NCCL was built with NVTX and CUPTI is its NVTX injection library.
struct HostRange {
  uint32_t thread = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string domain;  // empty for the default domain
  std::string name;
};

struct RecordSet {
  std::vector<GpuWork> gpu;
  std::vector<ApiCall> api;
  std::vector<StreamWaitCall> stream_waits;
  std::vector<EventCompletion> events;
  std::vector<OperationMark> operations;
  std::vector<HostRange> ranges;
  uint64_t dropped_records = 0;  // cuptiActivityGetNumDroppedRecords, summed over buffers
};

}  // namespace commtool::tracing
