// `commtool diagnose allreduce`'s measurement: every all-reduce path at every size, as typed
// results. The paths are NCCL's default, each forced NCCL_ALGO/NCCL_PROTO pair (Ring and Tree by
// LL, LL128 and Simple) and commtool's CUDA-IPC one-shot and two-shot. NCCL reads NCCL_ALGO and
// NCCL_PROTO once per process, so every setting runs in fresh workers, one after another; NCCL's
// default runs again last so that the analysis can tell drift between runs from a real
// difference (reports/allreduce/allreduce_diagnosis.hpp draws the conclusions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "probes/base/nccl/communicator.hpp"
#include "probes/base/workers/placement.hpp"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collectives.hpp"
#include "tracing/trace/trace_analysis.hpp"

namespace commtool::tracing {

// What a user would have to do to get a path; also the diagnosis's tie-break order.
enum class AllReducePathKind { kNccl, kIpcOneShot, kIpcTwoShot };

enum class AllReducePointStatus {
  kOk,
  kFailedVerification,  // a wrong result: excluded, and reported
  kRefused,             // NCCL refused the setting, or ran something other than what was forced
  kNotApplicable,       // the path cannot run here: IPC without P2P between every pair
};

const char* to_string(AllReducePathKind k);     // "nccl", "ipc-one-shot", "ipc-two-shot"
const char* to_string(AllReducePointStatus s);  // "ok", "failed-verification", ...

// One path at one message size.
struct AllReducePoint {
  uint64_t bytes = 0;  // per rank, as nccl-tests counts an all-reduce
  AllReducePointStatus status = AllReducePointStatus::kOk;
  measure::Summary time_us;  // per operation; n, median, min and max are used
  double busbw_gbps = 0;     // nccl-tests' busbw at the median
  NcclChoice nccl_ran;       // NCCL paths: what NCCL's profiler plugin saw it run
  // IPC paths: the bytes one rank's kernel reads plus writes per call (ipc_kernel_bytes in
  // ipc_allreduce_plan.hpp says which) and their rate at the median time, in GB/s. Empty for
  // NCCL paths, and the rate for a point without samples.
  std::optional<double> kernel_bytes;
  std::optional<double> kernel_gbps;
  std::string reason;  // why not ok: "12 wrong elements", "ncclInvalidUsage", "no P2P ..."
};

struct AllReducePath {
  std::string name;  // "NCCL default", "NCCL Ring/LL", "IPC one-shot"
  AllReducePathKind kind = AllReducePathKind::kNccl;
  bool nccl_default = false;           // NCCL choosing for itself; at most one path
  std::string nccl_algo;               // what the path forced: NCCL_ALGO value, empty if not forced
  std::string nccl_proto;              // NCCL_PROTO value, empty if not forced
  std::vector<AllReducePoint> points;  // any order; at most one per size
};

struct AllReduceSweep {
  workers::PlacementSummary placement;  // how many ranks ran, on how many GPUs
  std::string dtype;                    // "float32"
  std::vector<AllReducePath> paths;
  // NCCL's default once more, after every other path: the drift between runs. Empty (no
  // points) when the sweep was not measured that way (tests build sweeps by hand).
  AllReducePath default_again;
};

struct AllReduceSweepRequest {
  std::string executable = "/proc/self/exe";
  DataType dtype = DataType::kFloat32;
  std::vector<uint64_t> sizes;  // bytes per rank
  int iters = 20;
  int warmup = 5;
  std::vector<int> devices;  // GPU of each rank, repeats allowed; empty: one rank per GPU
  double timeout_s = 60;
  nccl::CommMode comm = nccl::CommMode::kBlocking;
};

// What can be checked before the GPUs are found: at the ranks `devices` lists (at one rank when
// it is empty: the count comes with the machine), the sizes and type as trace plans them, the
// GPU and host memory of the largest size against measure/memory_limit.hpp's limits, and the
// operations a rank keeps. Throws BadValue naming the field (sizes, dtype, max_bytes, iters).
// run_allreduce_sweep checks this first, and again at the ranks the machine gives.
void check_sweep_request(const AllReduceSweepRequest& request);

// Runs every path at every size. A failure of one path (wrong data, a refusal, a hang) becomes
// that path's status and reason at every size, and the sweep goes on; bad usage and a machine
// without GPU or NCCL throw (Error with kUsage or kEnvironment).
AllReduceSweep run_allreduce_sweep(const AllReduceSweepRequest& request);

// For a path that forced NCCL_ALGO/NCCL_PROTO: "" when what NCCL ran at this point (its
// profiler plugin's "RING/LL, 2 ch") is what was forced (names compared without case), else
// why not: what NCCL ran instead, or that the plugin could not tell.
std::string forced_setting_mismatch(const AllReducePath& path, const AllReducePoint& point);

}  // namespace commtool::tracing
