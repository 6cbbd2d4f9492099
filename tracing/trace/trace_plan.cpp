#include "tracing/trace/trace_plan.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/base/measure/memory_limit.hpp"
#include "probes/base/nccl/nccl_library.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/base/workers/placement.hpp"
#include "probes/topo/discover.hpp"
#include "probes/topo/rank_placement.hpp"
#include "tracing/collectives/collective_values.cuh"  // reduces()
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/trace_task.hpp"

namespace commtool::tracing {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A private directory for the plugin's files, removed whatever happens.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "commtool-trace-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error(ExitCode::kEnvironment,
                  fmt::format("cannot create a directory under {}: {}",
                              fs::temp_directory_path().string(), std::strerror(errno)));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

RunMeta meta_from(const TraceRequest& q, const nccl::Library& lib, int nranks) {
  RunMeta m;
  static_cast<TraceSettings&>(m) = q;
  m.untraced_pass = q.cupti && q.untraced_pass;
  m.batches = batches_run(q);
  m.nranks = nranks;
  for (const ModeRequest& r : q.modes) {
    if (std::find(m.modes.begin(), m.modes.end(), r.mode) == m.modes.end()) {
      m.modes.push_back(r.mode);
    }
    if (r.mode == CompletionMode::kBlockingWait) m.poll_ms = r.poll_ms;
  }
  if (q.scope_samples == 0) m.scope_sleep_ms = 0;
  for (uint64_t b : q.sizes)
    m.scope_bytes = q.scope_samples > 0 ? std::max(m.scope_bytes, b) : 0;
  m.nccl_version = lib.version_string();
  m.nccl_library = lib.path();
  m.started_at = utc_now_iso8601();
  m.hostname = host_name_here();
  return m;
}

json task_from(const TraceRequest& q, const std::vector<topo::Gpu>& gpus, const std::string& plugin,
               const std::string& profiler_dir) {  // gpus: by rank
  json modes = json::array();
  for (const ModeRequest& r : q.modes)
    modes.push_back({{"mode", to_string(r.mode)}, {"poll_ms", r.poll_ms}});
  json g = json::array();
  for (const topo::Gpu& gpu : gpus)
    g.push_back({{"index", gpu.index}, {"bus_id", gpu.bdf}});
  uint64_t largest = 0;
  for (uint64_t b : q.sizes)
    largest = std::max(largest, b);
  return {{"name", kTraceTask},
          {"collective", to_string(q.collective)},
          {"dtype", to_string(q.dtype)},
          {"op", to_string(q.op)},
          {"inplace", q.inplace},
          {"root", q.root},
          {"check", q.check},
          {"sizes", q.sizes},
          {"modes", modes},
          {"iters", q.iters},
          {"warmup", q.warmup},
          {"cupti", q.cupti},
          {"untraced_pass", q.cupti && q.untraced_pass},
          {"batches", batches_run(q)},
          {"scope_samples", q.scope_samples},
          {"scope_sleep_ns", static_cast<uint64_t>(q.scope_sleep_ms * 1e6)},
          {"scope_bytes", largest},
          {"comm", nccl::to_string(q.comm)},
          {"fault", to_json(q.fault)},
          {"plugin", plugin},
          {"profiler_dir", profiler_dir},
          {"gpus", g}};
}

}  // namespace

std::string find_profiler_plugin(const std::string& executable) {
  if (const char* chosen = std::getenv("COMMTOOL_PROFILER_PLUGIN"); chosen && *chosen) {
    return fs::exists(chosen) ? chosen : "";
  }
  std::error_code ec;
  const fs::path exe = fs::canonical(executable, ec);
  if (ec) return "";
  const char* name = "libcommtool_nccl_profiler.so";
  for (const fs::path& p : {exe.parent_path().parent_path() / "tracing" / name,
                            exe.parent_path().parent_path() / "lib" / "commtool" / name}) {
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

namespace {

// Sizes as the collective can have them at n ranks: whole elements, a multiple of n where it
// splits by rank (nccl-tests rounds down the same way); repeats after rounding dropped.
std::vector<uint64_t> effective_sizes(const TraceRequest& q, int nranks) {
  std::vector<uint64_t> out;
  for (uint64_t bytes : q.sizes) {
    const BufferLayout l = buffer_layout(q.collective, q.dtype, bytes, nranks);
    const uint64_t effective = std::max(l.send_elements, l.recv_elements) * type_size(q.dtype);
    if (effective == 0) {
      uint64_t need = type_size(q.dtype);
      const BufferLayout one = buffer_layout(q.collective, q.dtype, need, nranks);
      if (std::min(one.send_elements, one.recv_elements) == 0) need *= nranks;
      throw bad_value("sizes", std::to_string(bytes),
                      fmt::format("{} of {} at {} rank(s) needs at least {} bytes",
                                  to_string(q.collective), to_string(q.dtype), nranks, need));
    }
    if (out.empty() || out.back() != effective) out.push_back(effective);
  }
  return out;
}

}  // namespace

TraceRequest plan_for(const TraceRequest& request, int nranks) {
  TraceRequest q = request;
  if ((q.collective == Collective::kBroadcast || q.collective == Collective::kReduce) &&
      q.root >= nranks) {
    throw bad_value("root", std::to_string(q.root),
                    fmt::format("must name a rank below {}, the number of ranks", nranks));
  }
  if (values::reduces(q.collective) && q.check && nranks > max_exact_ranks(q.dtype, q.op)) {
    throw bad_value(
        "dtype", to_string(q.dtype),
        fmt::format("with {} at {} ranks the exact result can exceed what {} holds above {} "
                    "ranks, so the output could not be checked; use a wider type",
                    to_string(q.op), nranks, to_string(q.dtype), max_exact_ranks(q.dtype, q.op)));
  }
  if (q.fault && q.fault->rank >= nranks) {
    throw bad_value(
        "fault", to_string(*q.fault),
        fmt::format("rank {} does not exist; ranks are 0 to {}", q.fault->rank, nranks - 1));
  }
  q.sizes = effective_sizes(q, nranks);
  return q;
}

TraceRun run_trace(const TraceRequest& request) {
  TraceRequest q = request;
  const topo::RankPlacement placement = topo::place_ranks(q.devices, "trace");
  const nccl::Library lib;  // fails here, clearly, when there is no NCCL
  const int nranks = placement.nranks();
  q = plan_for(q, nranks);

  TraceRun run;
  run.meta = meta_from(q, lib, nranks);
  TempDir dir;
  const std::string plugin = find_profiler_plugin(q.executable);
  // Workers pass a barrier before every operation; NCCL's start-up and CUPTI's flush are the
  // longest steps between two barriers. Each GPU wait and NCCL call is bounded by --timeout
  // itself (the workers', or the launcher's watch over the progress board).
  const auto progress = std::chrono::duration<double>(q.timeout_s * 3 + q.scope_sleep_ms / 1e3);
  for (const json& r : workers::run_workers_or_throw(
           q.executable, placement.specs(), task_from(q, placement.gpu, plugin, dir.path()),
           progress, std::chrono::duration<double>(q.timeout_s)))
    run.ranks.push_back(rank_run_from_json(r));
  return run;
}

uint64_t operations_per_rank(const TraceRequest& q) {
  using measure::saturating_mul;
  const auto per_run = static_cast<uint64_t>(q.iters) + static_cast<uint64_t>(q.warmup);
  uint64_t ops = saturating_mul(saturating_mul(q.sizes.size(), q.modes.size()), per_run);
  if (q.cupti && q.untraced_pass) ops = saturating_mul(ops, 2);
  ops = measure::saturating_add(
      ops, saturating_mul(saturating_mul(q.sizes.size(), static_cast<uint64_t>(batches_run(q))),
                          static_cast<uint64_t>(q.iters)));
  return measure::saturating_add(
      ops, saturating_mul(q.modes.size(), static_cast<uint64_t>(std::max(q.scope_samples, 0))));
}

// With devices "all", the sizes and the type at one rank: at most as many sizes as at more.
void check_before_hardware(const TraceRequest& q, const std::string& max_bytes_value) {
  TraceRequest planned;
  if (!q.devices.empty()) {
    planned = plan_for(q, static_cast<int>(q.devices.size()));
  } else {
    TraceRequest any = q;
    any.root = 0;
    any.fault.reset();
    planned = plan_for(any, 1);  // at most as many sizes as at more ranks
  }
  // A fault at an operation the run never reaches would never fire: the drill would pass.
  if (q.fault && q.fault->kind != FaultKind::kNoJoin &&
      q.fault->seq >= operations_per_rank(planned)) {
    throw bad_value("fault", to_string(*q.fault),
                    fmt::format("operation {} is never reached: this run has operations 0 to {}",
                                q.fault->seq, operations_per_rank(planned) - 1));
  }
  const int sharing = std::max(1, workers::summarize_placement(q.devices).most_ranks_on_a_gpu);
  const uint64_t largest = *std::max_element(q.sizes.begin(), q.sizes.end());
  const int buffers = q.inplace ? 1 : 2;
  measure::check_memory("max_bytes", max_bytes_value,
                        measure::saturating_mul(largest, static_cast<uint64_t>(buffers * sharing)),
                        measure::kMaxGpuBytes,
                        fmt::format("{} rank(s) on one GPU with {} buffer(s) of {} each", sharing,
                                    buffers, measure::approx_byte_size(largest)));
  const uint64_t ops = operations_per_rank(q);
  if (ops > measure::kMaxOperationsPerRank) {
    throw bad_value(
        "iters", std::to_string(q.iters),
        fmt::format("{} size(s) x {} completion run(s) x {} operations{} come to {} operations "
                    "per rank, each kept in memory until the rank reports; the limit is {}",
                    q.sizes.size(), q.modes.size(), q.iters + q.warmup,
                    q.cupti && q.untraced_pass ? " x 2 (the untraced pass)" : "", ops,
                    measure::kMaxOperationsPerRank));
  }
}

}  // namespace commtool::tracing
