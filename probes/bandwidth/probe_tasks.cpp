#include "probes/bandwidth/probe_tasks.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "probes/bandwidth/host_device.hpp"
#include "probes/bandwidth/peer.hpp"
#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/workers/worker.hpp"

namespace commtool::probe {

namespace {

using nlohmann::json;

// The launcher names GPUs by bus id; the CUDA ordinal is this process's business
// (CUDA_VISIBLE_DEVICES may renumber them).
GpuPlacement placement_from(const json& g) {
  GpuPlacement p;
  p.index = g.at("index").get<int>();
  p.numa_node = g.at("numa_node").get<int>();
  p.cpus = g.at("cpus").get<std::string>();
  const std::string bdf = g.at("bus_id").get<std::string>();
  cudaError_t err = cudaDeviceGetByPCIBusId(&p.cuda_device, bdf.c_str());
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(ExitCode::kEnvironment,
                fmt::format("GPU {} ({}) is not visible to CUDA in the worker: {}", p.index, bdf,
                            cuda::describe(err)));
  }
  return p;
}

RunOptions run_options_from(const json& t, std::chrono::duration<double> timeout) {
  RunOptions r;
  r.iters = t.at("iters").get<int>();
  r.repeats = t.at("batches").get<int>();
  r.warmup = t.at("warmup").get<int>();
  r.timeout = timeout;
  return r;
}

LatencyOptions latency_options_from(const json& t, std::chrono::duration<double> timeout) {
  LatencyOptions l;
  l.repeats = t.at("batches").get<int>();
  l.chain_lines = t.at("chase_lines").get<size_t>();
  l.timeout = timeout;
  return l;
}

void append(json& out, const std::vector<Measurement>& ms) {
  for (const Measurement& m : ms)
    out.push_back(m);
}

json run_local(workers::WorkerContext& ctx, const json& task) {
  std::vector<GpuPlacement> gpus;
  for (const json& g : task.at("gpus"))
    gpus.push_back(placement_from(g));
  const uint64_t bytes = task.at("bytes").get<uint64_t>();
  const RunOptions run = run_options_from(task, ctx.timeout);
  const LatencyOptions latency = latency_options_from(task, ctx.timeout);
  const auto& probes = task.at("probes");
  auto wants = [&](const char* p) {
    return std::find(probes.begin(), probes.end(), p) != probes.end();
  };
  json measurements = json::array();
  json refused = json::array();
  // The steps of the progress line: per GPU its host<->device bandwidth and latency, then the
  // pairs' bandwidth and latency.
  const int per_gpu = (wants("h2d") ? 1 : 0) + (wants("latency") ? 1 : 0);
  const bool pairs = gpus.size() > 1;
  const int total = per_gpu * static_cast<int>(gpus.size()) + (wants("p2p") ? 1 : 0) +
                    (wants("latency") && pairs ? 1 : 0);
  int done = 0;
  // A barrier after each piece tells the launcher this worker is making progress.
  for (const GpuPlacement& g : gpus) {
    if (wants("h2d")) {
      ctx.progress.step(done++, total, fmt::format("GPU {} host<->device bandwidth", g.index));
      append(measurements, probe_host_device_bandwidth(g, bytes, run));
    }
    ctx.comm.barrier();
    if (wants("latency")) {
      ctx.progress.step(done++, total, fmt::format("GPU {} host<->device latency", g.index));
      append(measurements, probe_host_device_latency(g, latency));
    }
    ctx.comm.barrier();
  }
  if (wants("p2p")) {
    ctx.progress.step(done++, total, "GPU<->GPU bandwidth (P2P)");
    std::vector<PeerPair> no_p2p;
    append(measurements, probe_p2p_bandwidth(gpus, bytes, run, &no_p2p));
    for (const PeerPair& p : no_p2p)
      refused.push_back({p.a, p.b});
  }
  ctx.comm.barrier();
  if (wants("latency") && pairs) {
    ctx.progress.step(done++, total, "GPU<->GPU latency");
    append(measurements, probe_p2p_latency(gpus, latency));
  }
  return {{"measurements", measurements}, {"refused", refused}};
}

json run_ipc(workers::WorkerContext& ctx, const json& task) {
  const json& mine = task.at("gpus").at(static_cast<size_t>(ctx.rank));
  GpuPlacement gpu = placement_from(mine);
  IpcOptions options;
  options.bytes = task.at("bytes").get<uint64_t>();
  options.run = run_options_from(task, ctx.timeout);
  options.pingpong_rounds = task.at("pingpong_rounds").get<int>();
  options.pingpong_repeats = options.run.repeats;
  json measurements = json::array();
  append(measurements, probe_ipc(ctx.comm, gpu, options));
  return {{"measurements", measurements}, {"refused", json::array()}};
}

}  // namespace

void register_probe_tasks() {
  workers::register_task("probe-local", run_local);
  workers::register_task("probe-ipc", run_ipc);
}

}  // namespace commtool::probe
