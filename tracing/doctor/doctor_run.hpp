// `commtool doctor`'s evidence: what it takes from the machine, by composing the commands' own
// entry points (topo's discovery and analysis, probe's run_probes, trace's run_trace) with the
// hardware's own reports (NVML's error counters, the kernel log). Judging the evidence is
// reports/doctor's; this file only gathers it, each step bounded, a failed step kept as its
// error so that the page still says everything else.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probes/bandwidth/probe_plan.hpp"
#include "probes/base/error.hpp"
#include "probes/health/gpu_counters.hpp"
#include "probes/health/kernel_log.hpp"
#include "probes/health/sysfs_health.hpp"
#include "probes/health/thresholds.hpp"
#include "probes/topo/classify.hpp"
#include "tracing/doctor/isolate.hpp"
#include "tracing/trace/trace_analysis.hpp"
#include "tracing/trace/trace_plan.hpp"

namespace commtool::doctor {

// How long doctor may take: quick (seconds: counters, kernel log, topology, a small probe and
// all-reduce), standard (adds P2P pairs and larger sizes), long (full-size copies and the
// all-reduce up to 1 GiB).
enum class Level { kQuick, kStandard, kLong };
const char* to_string(Level level);
std::optional<Level> parse_level(std::string_view text);
inline constexpr const char* kLevelNames = "quick, standard, long";

struct Request {
  Level level = Level::kQuick;
  double timeout_s = 60;     // each step's bound
  std::vector<int> devices;  // GPU indices, each once; empty: all
  health::Thresholds thresholds;
  std::string kernel_log;  // a saved kernel log to read instead of the live one; "" live
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string executable = "/proc/self/exe";
  std::function<void(const char*)> on_step;  // called as each step starts, for the progress line
};

// A step that runs work on the GPUs: what came of it.
struct Step {
  bool ran = false;
  std::string skipped;  // why it did not run; "" when it ran
  bool ok = false;
  ExitCode code = ExitCode::kOk;  // its error's, when it failed
  std::string error;              // its error's words, when it failed
  double seconds = 0;
};

struct Evidence {
  Request request;
  std::string started_at;  // ISO 8601, UTC
  std::string hostname;
  double seconds = 0;  // the whole gathering

  topo::Topology topology;
  topo::Analysis analysis;
  std::string no_gpu;  // why there is nothing to examine ("no NVIDIA GPU found"); else ""

  health::CountersRead counters_before;  // before the probe and the all-reduce
  health::CountersRead counters_after;   // after them: the difference is what the load caused
  double counter_window_s = 0;

  std::vector<health::RdmaPort> rdma_ports;  // every port of every RDMA NIC topo found
  std::vector<health::AerCounts> aer;        // each GPU's, then each NIC's with a bus id
  std::vector<std::string> iommu;            // each GPU's IOMMU group type, by topology.gpus

  bool kernel_log_read = false;
  std::string kernel_log_source;  // "/dev/kmsg" or the file given
  std::string kernel_log_why;     // when it could not be read
  health::KernelLogScan kernel_log;

  probe::ProbeRequest probe_request;
  Step probe_step;
  std::optional<probe::ProbeReport> probe;

  tracing::TraceRequest allreduce_request;
  Step allreduce_step;
  std::optional<tracing::TraceReport> allreduce;
  bool ranks_share_gpu = false;  // one GPU: two ranks on it, a check of correctness only
  // What NCCL's own log of the all-reduce says (NCCL_DEBUG=INFO, subsystem INIT, into a private
  // directory removed afterwards): each channel connection's transport, counted over the ranks,
  // and its warnings; or why it was not read.
  std::map<std::string, uint64_t> nccl_transports;
  std::vector<std::string> nccl_warnings;
  std::string nccl_log_why;

  // When the all-reduce over 3 or more GPUs failed: the search by halves for the GPU or link
  // at fault (--level standard and long), or why it did not run.
  std::optional<Isolation> isolation;
  std::string isolation_skipped;
};

// The bound of one run of the search by halves: a hanging set costs this, not --timeout.
inline constexpr double kIsolationRunTimeoutS = 10;

// What each level runs, before any hardware (the help and the man page say the same).
probe::ProbeRequest probe_request_for(const Request& request, int gpus);
tracing::TraceRequest allreduce_request_for(const Request& request, const std::vector<int>& gpus);

// Gathers everything. Throws only for bad input found before the hardware (a kernel log file
// that cannot be read: Error(kUsage)); what the machine lacks or does wrong is evidence.
Evidence gather(const Request& request);

}  // namespace commtool::doctor
