#include "tracing/allreduce/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <set>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/base/measure/memory_limit.hpp"
#include "probes/base/progress_line.hpp"
#include "probes/topo/rank_placement.hpp"
#include "tracing/allreduce/ipc_allreduce.hpp"
#include "tracing/allreduce/ipc_allreduce_task.hpp"
#include "tracing/trace/trace_analysis.hpp"
#include "tracing/trace/trace_plan.hpp"

namespace commtool::tracing {

namespace {

using Status = AllReducePointStatus;

// One NCCL_ALGO/NCCL_PROTO setting for the workers of one run (none for NCCL's default, even
// when the user's environment sets them), the user's own values put back afterwards. NCCL reads
// these once per process, so every setting gets fresh workers.
class NcclSetting {
 public:
  NcclSetting(const std::string& algo, const std::string& proto)
      : algo_(saved("NCCL_ALGO")), proto_(saved("NCCL_PROTO")) {
    put("NCCL_ALGO", unless_empty(algo));
    put("NCCL_PROTO", unless_empty(proto));
  }
  ~NcclSetting() {
    put("NCCL_ALGO", algo_);
    put("NCCL_PROTO", proto_);
  }
  NcclSetting(const NcclSetting&) = delete;
  NcclSetting& operator=(const NcclSetting&) = delete;

 private:
  static std::optional<std::string> saved(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  }
  // Empty: NCCL chooses for itself, whatever the user's environment says.
  static std::optional<std::string> unless_empty(const std::string& value) {
    return value.empty() ? std::nullopt : std::optional<std::string>(value);
  }
  // Sets the variable to v, or unsets it.
  static void put(const char* name, const std::optional<std::string>& v) {
    if (v) {
      setenv(name, v->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  std::optional<std::string> algo_, proto_;
};

// Every size of `sizes` with one status and reason.
std::vector<AllReducePoint> every_size(const std::vector<uint64_t>& sizes, Status status,
                                       const std::string& reason) {
  std::vector<AllReducePoint> out;
  for (uint64_t b : sizes) {
    AllReducePoint p;
    p.bytes = b;
    p.status = status;
    p.reason = reason;
    out.push_back(std::move(p));
  }
  return out;
}

TraceRequest nccl_request(const AllReduceSweepRequest& r) {
  TraceRequest q;
  q.executable = r.executable;
  q.collective = Collective::kAllReduce;
  q.dtype = r.dtype;
  q.sizes = r.sizes;
  q.modes = {{CompletionMode::kSync, 0}};
  q.iters = r.iters;
  q.warmup = r.warmup;
  q.cupti = false;
  q.untraced_pass = false;
  q.batches = 0;  // the sweep compares per-operation medians
  q.devices = r.devices;
  q.timeout_s = r.timeout_s;
  q.comm = r.comm;
  return q;
}

// NCCL under one setting ("" and "": its default), in workers of its own.
AllReducePath nccl_path(const AllReduceSweepRequest& r, const std::string& algo,
                        const std::string& proto) {
  AllReducePath path;
  path.kind = AllReducePathKind::kNccl;
  path.nccl_default = algo.empty() && proto.empty();
  path.nccl_algo = algo;
  path.nccl_proto = proto;
  path.name = path.nccl_default ? "NCCL default" : fmt::format("NCCL {}/{}", algo, proto);
  try {
    NcclSetting setting(algo, proto);
    const TraceReport report = analyse(run_trace(nccl_request(r)));
    for (const SizeRow& row : report.sizes) {
      AllReducePoint p;
      p.bytes = row.bytes;
      p.time_us = row.time_us;
      p.busbw_gbps = row.busbw_gbps;
      p.nccl_ran = row.nccl_choice;
      // A forced setting NCCL did not run is not that path: its time must not stand for it.
      // At one rank NCCL runs no algorithm at all, which the withheld recommendation says.
      if (report.meta.nranks > 1) {
        if (std::string why = forced_setting_mismatch(path, p); !why.empty()) {
          p.status = Status::kRefused;
          p.reason = why;
        }
      }
      path.points.push_back(std::move(p));
    }
  } catch (const Error& e) {
    if (e.code() == ExitCode::kUsage) throw;
    // Wrong data, a refusal or a hang under this setting: every size gets the reason.
    path.points = every_size(
        r.sizes,
        e.code() == ExitCode::kVerification ? Status::kFailedVerification : Status::kRefused,
        e.what());
  }
  return path;
}

AllReducePath ipc_path(IpcAlgorithm a) {
  AllReducePath p;
  p.name = to_string(a);
  p.kind =
      a == IpcAlgorithm::kOneShot ? AllReducePathKind::kIpcOneShot : AllReducePathKind::kIpcTwoShot;
  return p;
}

// Why the IPC all-reduce cannot run this request ("" when it can).
std::string ipc_not_applicable(const AllReduceSweepRequest& r, int nranks) {
  if (!ipc_supports(r.dtype)) {
    return fmt::format("commtool's IPC all-reduce sums float, bfloat16 and half, not {}",
                       to_string(r.dtype));
  }
  if (nranks > kMaxIpcRanks) {
    return fmt::format("{} ranks: the IPC all-reduce takes at most {}", nranks, kMaxIpcRanks);
  }
  return "";
}

AllReducePoint ipc_point(IpcAlgorithm a, const IpcTimedSize& s, int nranks) {
  AllReducePoint p;
  p.bytes = s.bytes;
  p.time_us = measure::summarize(s.slowest_us);
  p.busbw_gbps =
      busbw_gbps(Collective::kAllReduce, nranks, static_cast<double>(s.bytes), p.time_us.median);
  p.kernel_bytes = ipc_kernel_bytes(a, s.bytes, nranks);
  if (p.time_us.n > 0) p.kernel_gbps = kernel_gbps(*p.kernel_bytes, p.time_us.median);
  if (s.wrong_bytes != 0) {
    p.status = Status::kFailedVerification;
    p.reason = fmt::format("{} wrong byte(s) over {} calls", s.wrong_bytes, s.slowest_us.size());
  }
  return p;
}

// commtool's one-shot and two-shot, in one group of workers.
std::vector<AllReducePath> ipc_paths(const AllReduceSweepRequest& r,
                                     const topo::RankPlacement& placement) {
  const std::vector<int> devices = placement.devices();
  std::vector<AllReducePath> out = {ipc_path(IpcAlgorithm::kOneShot),
                                    ipc_path(IpcAlgorithm::kTwoShot)};
  const int nranks = static_cast<int>(devices.size());
  auto not_applicable = [&](const std::string& why) {
    for (AllReducePath& path : out)
      path.points = every_size(r.sizes, Status::kNotApplicable, why);
    return out;
  };
  if (std::string why = ipc_not_applicable(r, nranks); !why.empty()) return not_applicable(why);
  if (const std::set<std::string> hosts(placement.hosts.begin(), placement.hosts.end());
      hosts.size() > 1) {
    return not_applicable(fmt::format(
        "CUDA IPC reaches only the GPUs of one host, and the MPI job's ranks are on {} hosts",
        hosts.size()));
  }
  IpcTimeRequest q;
  q.executable = r.executable;
  q.devices = devices;
  for (uint64_t b : r.sizes)
    q.sizes.push_back(b / type_size(r.dtype) * type_size(r.dtype));
  q.dtype = r.dtype;
  q.iters = r.iters;
  q.warmup = r.warmup;
  q.timeout_s = r.timeout_s;
  std::vector<IpcTimedPath> timed;
  try {
    timed = time_ipc_allreduce(q);
  } catch (const Error& e) {
    if (e.code() != ExitCode::kEnvironment) throw;
    return not_applicable(e.what());  // no P2P between two of the GPUs
  }
  for (size_t k = 0; k < timed.size(); ++k) {
    for (const IpcTimedSize& s : timed[k].sizes)
      out[k].points.push_back(ipc_point(timed[k].algorithm, s, nranks));
  }
  return out;
}

// The request at `nranks` ranks, at most `sharing` of them on one GPU: what trace's planning
// refuses (a size below one element, a type that cannot hold the exact sum), the memory of the
// largest size (NCCL's send and receive buffers; the IPC all-reduce's input, output, pristine
// input, reference and mapped buffer, and its host copies of the input and reference on every
// rank), and the operations a rank keeps.
void check_at(const AllReduceSweepRequest& r, int nranks, int sharing) {
  using measure::saturating_mul;
  if (r.sizes.empty()) throw bad_value("sizes", "(none)", "give at least one size");
  plan_for(nccl_request(r), nranks);
  const uint64_t largest = *std::max_element(r.sizes.begin(), r.sizes.end());
  const std::string value = measure::format_byte_size(largest);
  const bool ipc = ipc_not_applicable(r, nranks).empty();
  const uint64_t buffers = ipc ? 5 : 2;
  measure::check_memory("max_bytes", value,
                        saturating_mul(largest, buffers * static_cast<uint64_t>(sharing)),
                        measure::kMaxGpuBytes,
                        fmt::format("{} rank(s) on one GPU with {} buffers of {} each{}", sharing,
                                    buffers, value, ipc ? " (the IPC all-reduce's)" : ""));
  if (ipc) {
    measure::check_memory("max_bytes", value,
                          saturating_mul(largest, 2 * static_cast<uint64_t>(nranks)),
                          measure::kMaxHostBytes,
                          fmt::format("{} rank(s) with 2 host copies of {} each (the IPC "
                                      "all-reduce's input and reference)",
                                      nranks, value));
  }
  const uint64_t per_size = static_cast<uint64_t>(r.iters) + static_cast<uint64_t>(r.warmup);
  const uint64_t ops = saturating_mul(saturating_mul(r.sizes.size(), per_size), ipc ? 2 : 1);
  if (ops > measure::kMaxOperationsPerRank) {
    throw bad_value("iters", std::to_string(r.iters),
                    fmt::format("{} size(s) x {} operations{} come to {} operations per rank, "
                                "each kept in memory until the rank reports; the limit is {}",
                                r.sizes.size(), per_size, ipc ? " x 2 (one-shot and two-shot)" : "",
                                ops, measure::kMaxOperationsPerRank));
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

const char* to_string(AllReducePathKind k) {
  switch (k) {
    case AllReducePathKind::kNccl:
      return "nccl";
    case AllReducePathKind::kIpcOneShot:
      return "ipc-one-shot";
    case AllReducePathKind::kIpcTwoShot:
      return "ipc-two-shot";
  }
  return "?";
}

const char* to_string(AllReducePointStatus s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kFailedVerification:
      return "failed-verification";
    case Status::kRefused:
      return "refused";
    case Status::kNotApplicable:
      return "not-applicable";
  }
  return "?";
}

void check_sweep_request(const AllReduceSweepRequest& request) {
  const auto listed = static_cast<int>(request.devices.size());
  const int sharing =
      std::max(1, workers::summarize_placement(request.devices).most_ranks_on_a_gpu);
  check_at(request, std::max(listed, 1), sharing);
}

AllReduceSweep run_allreduce_sweep(const AllReduceSweepRequest& request) {
  check_sweep_request(request);
  const topo::RankPlacement placement = topo::place_ranks(request.devices, "diagnose allreduce");
  check_at(request, placement.nranks(), std::max(1, placement.summary().most_ranks_on_a_gpu));
  AllReduceSweep sweep;
  sweep.placement = placement.summary();
  sweep.dtype = to_string(request.dtype);
  // Eight runs, each in fresh processes: NCCL's default, its six forced settings, commtool's
  // IPC kernels (one run for both), NCCL's default again.
  constexpr int kRuns = 9;
  progress::Line line;
  int run = 0;
  line.update(run++, kRuns, "NCCL default");
  sweep.paths.push_back(nccl_path(request, "", ""));
  for (const char* algo : {"Ring", "Tree"}) {
    for (const char* proto : {"LL", "LL128", "Simple"}) {
      line.update(run++, kRuns, fmt::format("NCCL {}/{}", algo, proto));
      sweep.paths.push_back(nccl_path(request, algo, proto));
    }
  }
  line.update(run++, kRuns, "commtool's IPC all-reduce");
  for (AllReducePath& p : ipc_paths(request, placement))
    sweep.paths.push_back(std::move(p));
  // Each setting ran in its own processes, one after another, so their times also differ by
  // whatever drifts between runs (clocks, heat): NCCL's default, run again last, measures it.
  line.update(run++, kRuns, "NCCL default again");
  sweep.default_again = nccl_path(request, "", "");
  return sweep;
}

std::string forced_setting_mismatch(const AllReducePath& path, const AllReducePoint& point) {
  if (path.kind != AllReducePathKind::kNccl || path.nccl_default) return "";
  if (!point.nccl_ran.known()) return "not confirmed: NCCL's profiler plugin did not say what ran";
  for (const NcclWay& w : point.nccl_ran.ways) {
    const bool algo_ok = path.nccl_algo.empty() || lower(w.algo) == lower(path.nccl_algo);
    const bool proto_ok = path.nccl_proto.empty() || lower(w.proto) == lower(path.nccl_proto);
    if (!algo_ok || !proto_ok) {
      return fmt::format("NCCL ran {} where {}/{} was forced", to_string(point.nccl_ran),
                         path.nccl_algo.empty() ? "any" : path.nccl_algo,
                         path.nccl_proto.empty() ? "any" : path.nccl_proto);
    }
  }
  return "";
}

}  // namespace commtool::tracing
