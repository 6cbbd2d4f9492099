#include "tracing/ep/ep_task.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <numeric>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/error.hpp"
#include "probes/base/nccl/communicator.hpp"
#include "probes/base/workers/worker.hpp"
#include "tracing/collectives/nccl_worker.hpp"
#include "tracing/cupti/cupti_tracer.hpp"
#include "tracing/ep/ep_exchange.hpp"
#include "tracing/ep/ep_measure.hpp"

namespace commtool::tracing {

namespace {

using nlohmann::json;
using Matrix = std::vector<std::vector<uint64_t>>;

// This rank's row (what it sends) and column (what it receives) of a [src][dst] matrix.
ExchangeCounts counts_for(const Matrix& m, int rank) {
  ExchangeCounts c;
  for (size_t peer = 0; peer < m.size(); ++peer) {
    c.send_bytes.push_back(m[static_cast<size_t>(rank)].at(peer));
    c.recv_bytes.push_back(m[peer].at(static_cast<size_t>(rank)));
  }
  return c;
}

uint64_t total(const std::vector<uint64_t>& v) {
  return std::accumulate(v.begin(), v.end(), uint64_t{0});
}

struct Phase {
  EpScenarioKind scenario;
  EpPhase phase;
  ExchangeCounts counts;
  std::string label() const { return fmt::format("{} {}", to_string(scenario), to_string(phase)); }
};

// Turns over the phases, `warmup` unmeasured then `iters` measured: round-robin, so that clock
// ramps and other drift during the run fall on every scenario alike (the routed and uniform
// times are compared with each other). With `ids` (a traced pass) each measured exchange gets
// an operation mark and a line in `traced`. Returns the measured samples per phase.
std::vector<std::vector<ExchangeSample>> run_turns(
    workers::WorkerContext& ctx, ExchangeRunner& runner, const std::vector<Phase>& phases,
    int warmup, int iters, uint32_t& seq, const OperationMark* ids,
    std::vector<OperationMark>& marks, std::vector<EpTracedExchange>& traced, int passes) {
  std::vector<std::vector<ExchangeSample>> samples(phases.size());
  const int turns = warmup + iters;
  const int before = ids != nullptr ? turns : 0;  // the progress line counts every pass
  for (int i = 0; i < turns; ++i) {
    ctx.progress.step(
        before + i, passes * turns,
        fmt::format("{} turn {} of {}", ids != nullptr ? "traced" : "timed", i + 1, turns));
    for (size_t k = 0; k < phases.size(); ++k, ++seq) {
      const Phase& p = phases[k];
      ctx.comm.barrier();  // the ranks start together
      const std::string what = fmt::format("{} #{}", p.label(), seq);
      const bool measured = i >= warmup;
      OperationMark mark = ids ? *ids : OperationMark{};
      mark.seq = seq;
      const ExchangeSample s =
          runner.run(p.counts, seq, p.label(), what, ids != nullptr && measured ? &mark : nullptr);
      if (s.wrong_bytes != 0) {
        throw Error(ExitCode::kVerification,
                    fmt::format("rank {}: {}: {} received byte(s) differ from what their senders "
                                "wrote",
                                ctx.rank, what, s.wrong_bytes));
      }
      if (!measured) continue;
      samples[k].push_back(s);
      if (ids != nullptr) {
        marks.push_back(mark);
        traced.push_back({seq, p.scenario, p.phase, s.time_us});
      }
    }
  }
  return samples;
}

json run_ep(workers::WorkerContext& ctx, const json& task) {
  keep_nvlink_multicast_off();
  const bool trace = task.at("trace").get<bool>();
  // NCCL's NVTX ranges reach CUPTI only when CUPTI is the NVTX injection library, set before
  // NCCL loads; the user's own setting wins.
  if (trace) setenv("NVTX_INJECTION64_PATH", CuptiTracer::library_path().c_str(), 0);
  const std::string bus_id =
      task.at("gpus").at(static_cast<size_t>(ctx.rank)).at("bus_id").get<std::string>();
  const int device = select_device(bus_id);
  cudaDeviceProp prop{};
  CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  const int iters = task.at("iters").get<int>();
  const int warmup = task.at("warmup").get<int>();

  std::vector<Phase> phases;
  uint64_t max_send = 0, max_recv = 0;
  for (const json& s : task.at("scenarios")) {
    const std::string name = s.at("name").get<std::string>();
    const std::optional<EpScenarioKind> kind = parse_ep_scenario(name);
    if (!kind) throw usage_error(fmt::format("scenario \"{}\": not one the ep task runs", name));
    for (EpPhase phase : {EpPhase::kDispatch, EpPhase::kCombine}) {
      Phase p{*kind, phase, counts_for(s.at(to_string(phase)).get<Matrix>(), ctx.rank)};
      max_send = std::max(max_send, total(p.counts.send_bytes));
      max_recv = std::max(max_recv, total(p.counts.recv_bytes));
      phases.push_back(std::move(p));
    }
  }

  nccl::Library lib;
  const nccl::CommMode mode = *nccl::parse_comm_mode(task.at("comm").get<std::string>());
  nccl::Communicator comm(lib, shared_unique_id(ctx, lib), ctx.size, ctx.rank, ctx.timeout, mode,
                          &ctx.progress);
  ExchangeRunner runner(lib, comm, ctx.size, max_send, max_recv, &ctx.progress);

  // Timed first, before CUPTI records anything, so its figures carry no tracing cost.
  uint32_t seq = 0;
  std::vector<OperationMark> marks;
  EpRankTrace trace_out;
  trace_out.rank = ctx.rank;
  const std::vector<std::vector<ExchangeSample>> samples = run_turns(
      ctx, runner, phases, warmup, iters, seq, nullptr, marks, trace_out.exchanges, trace ? 2 : 1);
  if (trace) {
    CuptiTracer tracer;
    const OperationMark ids = tracer.mark_ids(runner.handles());
    run_turns(ctx, runner, phases, warmup, iters, seq, &ids, marks, trace_out.exchanges, 2);
    trace_out.records = tracer.take();
    trace_out.records.operations = std::move(marks);
    trace_out.clock_note = tracer.clock_note();
  }

  json times = json::array();
  for (size_t k = 0; k < phases.size(); ++k) {
    std::vector<double> us, enqueue_us;
    for (const ExchangeSample& s : samples[k]) {
      us.push_back(s.time_us);
      enqueue_us.push_back(s.host_enqueue_us);
    }
    times.push_back({{"scenario", to_string(phases[k].scenario)},
                     {"phase", to_string(phases[k].phase)},
                     {"us", us},
                     {"enqueue_us", enqueue_us}});
  }
  ctx.comm.barrier();
  json result = {{"rank", ctx.rank},
                 {"bus_id", bus_id},
                 {"device", device},
                 {"gpu_name", prop.name},
                 {"nccl_version", lib.version_string()},
                 {"nccl_library", lib.path()},
                 {"times", times}};
  if (trace) result["trace"] = to_json(trace_out);
  return result;
}

}  // namespace

void register_ep_tasks() {
  workers::register_task(kEpTask, run_ep);
}

}  // namespace commtool::tracing
