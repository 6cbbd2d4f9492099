// The launcher side of `commtool trace`: picks the GPUs, starts one worker per GPU with the
// "trace" task, and gathers their RankRuns into one TraceRun. Never touches CUDA itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/base/nccl/communicator.hpp"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collectives.hpp"
#include "tracing/trace/fault.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::tracing {

struct ModeRequest {
  CompletionMode mode;
  int poll_ms;  // blocking-wait only
};

// The settings (trace_run.hpp) and how to run them here.
struct TraceRequest : TraceSettings {
  std::string executable = "/proc/self/exe";
  bool check = true;
  std::vector<ModeRequest> modes;
  std::vector<int> devices;  // GPU of each rank, repeats allowed (ranks sharing a GPU); empty: all
  double timeout_s = 60;
  std::optional<Fault> fault;  // one rank misbehaves on purpose
};

// The request as it can run at `nranks` ranks: sizes in whole elements, a multiple of nranks
// where the collective splits by rank (nccl-tests rounds down the same way), repeats dropped.
// Throws Error(kUsage) naming the value when it cannot: a root at or above nranks, a size too
// small for one element per rank, a checked reduction whose exact result the type cannot
// hold at nranks (int8 sums above 18 ranks, say: the check would report NCCL's overflow as
// wrong data), or a fault for a rank that does not exist.
TraceRequest plan_for(const TraceRequest& request, int nranks);

// Operations each rank runs at `q` (most kept until it reports): warm-up and measured, per size
// and completion run, twice with the untraced pass, the batches and the stream-scope samples.
uint64_t operations_per_rank(const TraceRequest& q);

// What can be known of `q` before looking for GPUs, each failure Error(kUsage) naming the value:
// with devices listing the ranks, every check of plan_for at that many ranks; without, those
// that hold at any rank count. Then a fault at an operation the run never reaches, what the
// largest size takes of a GPU carrying the most ranks (`max_bytes_value`: the size as the user
// gave it, for the message), and how many operations a rank keeps.
void check_before_hardware(const TraceRequest& q, const std::string& max_bytes_value);

// Throws Error(kEnvironment) when there is no GPU or no NCCL, and the workers' errors (wrong
// data: kVerification; a stuck collective: kTimeout) with their words.
TraceRun run_trace(const TraceRequest& request);

// Where commtool's NCCL profiler plugin is: $COMMTOOL_PROFILER_PLUGIN, else beside the
// executable (the build tree's tracing/ or an installation's lib/commtool/); empty if absent.
std::string find_profiler_plugin(const std::string& executable);

}  // namespace commtool::tracing
