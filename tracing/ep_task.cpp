#include "tracing/ep_task.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <numeric>

#include "probes/cuda/cuda_check.hpp"
#include "probes/error.hpp"
#include "probes/nccl/communicator.hpp"
#include "probes/workers/worker.hpp"
#include "tracing/ep_exchange.hpp"
#include "tracing/nccl_worker.hpp"

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

json run_ep(workers::WorkerContext& ctx, const json& task) {
  keep_nvlink_multicast_off();
  const std::string bus_id =
      task.at("gpus").at(static_cast<size_t>(ctx.rank)).at("bus_id").get<std::string>();
  const int device = select_device(bus_id);
  cudaDeviceProp prop{};
  CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  const int iters = task.at("iters").get<int>();
  const int warmup = task.at("warmup").get<int>();

  struct Phase {
    std::string scenario, name;
    ExchangeCounts counts;
  };
  std::vector<Phase> phases;
  uint64_t max_send = 0, max_recv = 0;
  for (const json& s : task.at("scenarios")) {
    const std::string name = s.at("name").get<std::string>();
    for (const char* phase : {"dispatch", "combine"}) {
      Phase p{name, phase, counts_for(s.at(phase).get<Matrix>(), ctx.rank)};
      max_send = std::max(max_send, total(p.counts.send_bytes));
      max_recv = std::max(max_recv, total(p.counts.recv_bytes));
      phases.push_back(std::move(p));
    }
  }

  nccl::Library lib;
  nccl::Communicator comm(lib, shared_unique_id(ctx, lib), ctx.size, ctx.rank, ctx.timeout);
  ExchangeRunner runner(lib, comm, ctx.size, max_send, max_recv);

  // Round-robin over the phases, so that clock ramps and other drift during the run fall on
  // every scenario alike: the routed and uniform times are compared with each other.
  std::vector<std::vector<double>> us(phases.size());
  uint32_t seq = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    for (size_t k = 0; k < phases.size(); ++k, ++seq) {
      const Phase& p = phases[k];
      ctx.comm.barrier();  // the ranks start together
      const std::string what = fmt::format("{} {} #{}", p.scenario, p.name, seq);
      const ExchangeSample s = runner.run(p.counts, seq, what);
      if (s.wrong_bytes != 0) {
        throw Error(ExitCode::kVerification,
                    fmt::format("rank {}: {}: {} received byte(s) differ from what their senders "
                                "wrote",
                                ctx.rank, what, s.wrong_bytes));
      }
      if (i >= warmup) us[k].push_back(s.time_us);
    }
  }
  json times = json::array();
  for (size_t k = 0; k < phases.size(); ++k) {
    times.push_back({{"scenario", phases[k].scenario}, {"phase", phases[k].name}, {"us", us[k]}});
  }
  ctx.comm.barrier();
  return {{"rank", ctx.rank},
          {"bus_id", bus_id},
          {"device", device},
          {"gpu_name", prop.name},
          {"nccl_version", lib.version_string()},
          {"nccl_library", lib.path()},
          {"times", times}};
}

}  // namespace

void register_ep_tasks() {
  workers::register_task(kEpTask, run_ep);
}

}  // namespace commtool::tracing
