// Everything one `commtool trace` run measured, as plain data: what --save writes, what
// `commtool report DIR` reads back, and all that the analysis needs (it never looks at a GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/base/nccl/communicator.hpp"
#include "tracing/cupti/records.hpp"
#include "tracing/profiler/collective_record.hpp"

namespace commtool::tracing {

// How the harness completed a collective. The completion levels it tells apart: host enqueue
// (the call returned), stream dependency (the consumer stream waits for the end event),
// collective complete (the end event fired), device complete (all earlier work done).
enum class CompletionMode {
  kSync,          // consumer stream waits on the end event inside the call (async_op=False)
  kAsyncWait,     // the same stream wait, issued by a later wait() call (async_op=True)
  kDeviceSync,    // cudaDeviceSynchronize
  kBlockingWait,  // host waits for the end event: poll + sleep, or cudaEventSynchronize
};

struct OperationSample {
  uint64_t seq = 0;    // matches OperationMark::seq of the same rank
  uint64_t bytes = 0;  // nccl-tests' size: the larger of the send and receive buffers
  CompletionMode mode = CompletionMode::kSync;
  int poll_ms = 0;          // blocking-wait: sleep between event queries; 0 = synchronize
  bool traced = false;      // CUPTI was recording
  double time_us = 0;       // CUDA events around the collective on the NCCL stream
  double host_call_us = 0;  // the host call that queued it (steady clock)
  uint64_t wrong_elements = 0;
};

// One --stream-scope sample: a long GPU sleep ahead of the collective; stream A waits on the
// end event, stream B only records a marker.
struct StreamScopeSample {
  uint64_t seq = 0;
  CompletionMode mode = CompletionMode::kAsyncWait;
  int poll_ms = 0;
  double host_wait_us = 0;               // the host's wait call, from call to return
  bool complete_at_wait_return = false;  // cudaEventQuery(end) right after it returned
  double b_before_a_us = 0;  // A's marker minus B's marker, device time; > 0: B finished first
  uint64_t wrong_elements = 0;
};

struct RankRun {
  int rank = 0;
  int device = 0;  // CUDA ordinal, PCI bus order
  std::string bus_id;
  std::string gpu_name;
  RecordSet records;  // empty when CUPTI was off
  std::vector<OperationSample> samples;
  std::vector<StreamScopeSample> scope;
  std::vector<nccl_profiler::CollectiveRecord> nccl;  // what the profiler plugin saw
  std::string plugin_status;                          // "loaded", or why algo/proto are unknown
  std::string clock_note;                             // how CUPTI and host clocks were joined
};

struct RunMeta {
  std::string collective;  // tracing::to_string(Collective)
  std::string dtype;       // nccl-tests' names: float, half, bfloat16, ...
  std::string op;          // sum, prod, min, max, avg
  bool inplace = false;
  int root = 0;
  int nranks = 1;
  // How the communicators were created. Runs saved before commtool recorded it were
  // non-blocking, which is what a missing field reads as.
  nccl::CommMode comm = nccl::CommMode::kBlocking;
  std::vector<uint64_t> sizes;
  std::vector<std::string> modes;  // as given to --mode, expanded
  int poll_ms = 10;
  int iters = 0;
  int warmup = 0;
  bool cupti = true;
  bool untraced_pass = true;  // ran each size untraced too, for the ratio
  int scope_samples = 0;      // --stream-scope samples per mode; 0: not run
  double scope_sleep_ms = 0;  // the GPU sleep ahead of each of them
  uint64_t scope_bytes = 0;   // the size they ran at (the sweep's largest)
  std::string nccl_version;
  std::string nccl_library;
  std::string commtool_version;  // version and git commit of the build
  std::string started_at;        // ISO 8601, UTC
  std::string hostname;
};

struct TraceRun {
  RunMeta meta;
  std::vector<RankRun> ranks;  // by rank
};

std::string to_string(CompletionMode m);  // "sync", "async-wait", "device-sync", "blocking-wait"
// Throws usage_error naming the value and the accepted ones.
CompletionMode parse_completion_mode(const std::string& text);

}  // namespace commtool::tracing
