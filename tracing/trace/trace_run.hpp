// Everything one `commtool trace` run measured, as plain data: what --save writes, what
// `commtool report DIR` reads back, and all that the analysis needs (it never looks at a GPU).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/nccl/communicator.hpp"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collectives.hpp"
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

// One batch of operations of one size run back to back on the NCCL stream, nothing between them
// (no input written, no host wait, no check until the last), timed by one pair of CUDA events:
// nccl-tests' statistic, measured here beside the per-operation one so the two tools can be
// compared like with like. Always untraced.
struct BatchSample {
  uint64_t first_seq = 0;  // the operations are first_seq .. first_seq + ops - 1
  uint64_t bytes = 0;
  int ops = 0;
  double time_us = 0;           // the whole batch
  uint64_t wrong_elements = 0;  // in the output of the last operation
};

struct RankRun {
  int rank = 0;
  int device = 0;  // CUDA ordinal, PCI bus order
  std::string bus_id;
  std::string gpu_name;
  std::string host;   // where the rank ran ("" in runs saved before it was kept)
  RecordSet records;  // empty when CUPTI was off
  std::vector<OperationSample> samples;
  std::vector<StreamScopeSample> scope;
  std::vector<BatchSample> batches;
  std::vector<nccl_profiler::CollectiveRecord> nccl;  // what the profiler plugin saw
  std::string plugin_status;                          // "loaded", or why algo/proto are unknown
  std::string clock_note;                             // how CUPTI and host clocks were joined
};

// What a trace run was asked to do: the request carries it in (trace_plan.hpp) and the run's
// metadata keeps it (a saved run, re-analysed elsewhere, reads it back), one copy, typed.
struct TraceSettings {
  Collective collective = Collective::kAllReduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool inplace = false;
  int root = 0;
  nccl::CommMode comm = nccl::CommMode::kBlocking;
  std::vector<uint64_t> sizes;
  int iters = 20;
  int warmup = 5;
  bool cupti = true;
  bool untraced_pass = true;  // each size untraced too, for the traced/untraced ratio
  // Untraced batches of `iters` back-to-back operations per size, after the untraced pass
  // (none without one); out-of-place only, since an in-place batch feeds each operation the
  // last one's output. 0: none.
  int batches = 5;
  int scope_samples = 0;        // stream-scope samples per mode; 0: not run
  double scope_sleep_ms = 100;  // the GPU sleep ahead of each of them
};

// The batches a run with these settings runs: none without an untraced pass or in place.
inline int batches_run(const TraceSettings& s) {
  return (!s.cupti || s.untraced_pass) && !s.inplace ? s.batches : 0;
}

// The settings as the run ran them (a run without CUPTI has no untraced pass; without scope
// samples no sleep) and what it found on the machine.
struct RunMeta : TraceSettings {
  int nranks = 1;
  std::vector<CompletionMode> modes;  // as asked, each once
  int poll_ms = 10;                   // blocking-wait's
  uint64_t scope_bytes = 0;           // the size the scope samples ran at (the sweep's largest)
  std::string nccl_version;
  std::string nccl_library;
  // Where, when and by what the run was made; empty: unknown (a run saved before commtool
  // wrote the field).
  std::string commtool_version;  // version and git commit of the build
  std::string started_at;        // ISO 8601, UTC
  std::string hostname;
  std::string saved_at;  // ISO 8601, UTC: when trace --save wrote it
};

struct TraceRun {
  RunMeta meta;
  std::vector<RankRun> ranks;  // by rank
  bool saved = false;          // read back from a saved run (load_run), not measured now
  // What load_run left out and why (a last record cut off mid-write), file and line named;
  // the report puts these first.
  std::vector<std::string> warnings;
};

// Now, as ISO 8601 in UTC to the second: "2026-12-03T18:46:02Z".
std::string utc_now_iso8601();
// This machine's host name (gethostname).
std::string host_name_here();

std::string to_string(CompletionMode m);  // "sync", "async-wait", "device-sync", "blocking-wait"
// The names of to_string back; nullopt for anything else.
std::optional<CompletionMode> parse_completion_mode(const std::string& text);
inline constexpr const char* kCompletionModeNames = "sync, async-wait, device-sync, blocking-wait";

}  // namespace commtool::tracing
