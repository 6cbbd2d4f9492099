// The probe command's plan (probe_plan.hpp): which probes apply to the GPUs found, the worker
// groups that run them, and the rate each measurement is judged against.
#include "probes/bandwidth/probe_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/base/measure/memory_limit.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/base/workers/placement.hpp"
#include "probes/topo/discover.hpp"
#include "probes/topo/findings.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::probe {

using nlohmann::json;

namespace {

size_t position_of(const topo::Topology& t, int gpu) {
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    if (t.gpus[i].index == gpu) return i;
  }
  throw Error(ExitCode::kUsage, fmt::format("GPU {} is not in the topology", gpu));
}

json gpu_json(const topo::Gpu& g) {
  return {
      {"index", g.index}, {"bus_id", g.bdf}, {"numa_node", g.numa_node}, {"cpus", g.cpu_affinity}};
}

std::vector<Measurement> collect(const workers::GroupOutcome& outcome,
                                 std::vector<std::pair<int, int>>* refused) {
  if (outcome.failure) throw Error(outcome.failure->code, outcome.failure->what);
  std::vector<Measurement> out;
  for (const json& r : outcome.results) {
    if (r.is_null()) continue;
    for (const json& m : r.at("measurements"))
      out.push_back(m.get<Measurement>());
    for (const json& p : r.at("refused"))
      refused->emplace_back(p.at(0).get<int>(), p.at(1).get<int>());
  }
  return out;
}

}  // namespace

std::string ipc_blocker(const std::vector<int>& placement,
                        const std::vector<std::pair<int, int>>& refused) {
  auto placed = [&](int g) { return std::count(placement.begin(), placement.end(), g) > 0; };
  for (const auto& [a, b] : refused) {
    if (placed(a) && placed(b)) {
      return fmt::format("GPU {} and GPU {} have no P2P, which CUDA IPC needs", a, b);
    }
  }
  return {};
}

std::pair<double, std::string> expected_rate(const topo::Topology& topo,
                                             const topo::Analysis& analysis, int src, int dst) {
  auto pcie = [&](int gpu) {
    size_t i = position_of(topo, gpu);
    const topo::PcieLink& l = topo.gpus[i].pcie;
    return std::make_pair(
        analysis.rates[i].pcie_payload_gbps,
        fmt::format("PCIe Gen{} x{} payload", l.attainable_gen(), l.attainable_width()));
  };
  if (src == kHost || dst == kHost) return pcie(src == kHost ? dst : src);
  if (src == dst) return {0.0, "same GPU"};
  size_t a = position_of(topo, src), b = position_of(topo, dst);
  const topo::Connection& c = analysis.matrix.cells[a][b];
  if (c.path == topo::PathClass::kNvLink) {
    int gen = std::max(analysis.rates[a].nvlink_generation, 1);
    return {c.nvlinks * topo::nvlink_link_gbps(analysis.rates[a].nvlink_generation),
            fmt::format("NVLink{} x{}", gen, c.nvlinks)};
  }
  auto pa = pcie(src), pb = pcie(dst);
  return pa.first <= pb.first ? pa : pb;
}

void set_expectations(const topo::Topology& topo, const topo::Analysis& analysis,
                      std::vector<Measurement>& measurements) {
  for (Measurement& m : measurements) {
    if (m.unit != "GB/s") continue;
    std::tie(m.expected, m.expected_basis) = expected_rate(topo, analysis, m.src, m.dst);
  }
}

namespace {

// What every worker's task carries, the local one and the IPC ones alike.
json common_task(const ProbeRequest& request) {
  return {{"bytes", request.bytes},
          {"iters", request.iters},
          {"batches", request.batches},
          {"warmup", request.warmup},
          {"pingpong_rounds", request.pingpong_rounds},
          {"chase_lines", request.chase_lines}};
}

// Adds a worker group's measurements to the report; the pairs it found without P2P go to
// `refused`.
void add_measurements(ProbeReport& report, const workers::GroupOutcome& outcome,
                      std::vector<std::pair<int, int>>& refused) {
  auto ms = collect(outcome, &refused);
  report.measurements.insert(report.measurements.end(), ms.begin(), ms.end());
}

// The probes one worker runs over every GPU from one process: h2d, latency and p2p, as asked.
// No worker runs when none of them is.
void run_local_probes(const ProbeRequest& request, bool all, bool do_p2p, const json& common,
                      std::chrono::duration<double> progress, ProbeReport& report,
                      std::vector<std::pair<int, int>>& refused) {
  const auto& gpus = report.topology.gpus;
  json local = common;
  local["name"] = "probe-local";
  local["probes"] = json::array();
  if (all || request.h2d) local["probes"].push_back("h2d");
  if (all || request.latency) local["probes"].push_back("latency");
  if (do_p2p) local["probes"].push_back("p2p");
  local["gpus"] = json::array();
  for (const topo::Gpu& g : gpus)
    local["gpus"].push_back(gpu_json(g));
  if (!local["probes"].empty()) {
    auto outcome = workers::run_workers(request.executable, {{0, gpus[0].index}}, local, progress);
    add_measurements(report, outcome, refused);
  }
}

// The GPU of each IPC worker rank: --devices as listed, else one rank per GPU.
std::vector<int> ipc_placement(const ProbeRequest& request, const std::vector<topo::Gpu>& gpus) {
  std::vector<int> placement = request.ipc_placement;
  if (placement.empty()) {
    for (const topo::Gpu& g : gpus)
      placement.push_back(g.index);
  }
  return placement;
}

// The IPC probe: one worker per rank of the placement, rank r on GPU placement[r].
void run_ipc_probes(const ProbeRequest& request, const std::vector<int>& placement,
                    const json& common, std::chrono::duration<double> progress, ProbeReport& report,
                    std::vector<std::pair<int, int>>& refused) {
  json ipc = common;
  ipc["name"] = "probe-ipc";
  ipc["gpus"] = json::array();
  std::vector<workers::WorkerSpec> specs;
  for (size_t r = 0; r < placement.size(); ++r) {
    const topo::Gpu& g = report.topology.gpus[position_of(report.topology, placement[r])];
    ipc["gpus"].push_back(gpu_json(g));
    specs.push_back({static_cast<int>(r), g.index});
  }
  // P2P must hold between every pair the ranks' GPUs form; the workers check with CUDA.
  auto outcome = workers::run_workers(request.executable, specs, ipc, progress);
  add_measurements(report, outcome, refused);
}

// Each pair found without P2P, with the topology's reason for it.
void add_refusals(ProbeReport& report, const std::vector<std::pair<int, int>>& refused) {
  const auto& gpus = report.topology.gpus;
  for (const auto& [a, b] : refused) {
    size_t ia = position_of(report.topology, a), ib = position_of(report.topology, b);
    report.refused.push_back({a, b,
                              topo::p2p_refusal_reason(report.topology, gpus[ia], gpus[ib],
                                                       report.analysis.matrix.cells[ia][ib])});
  }
}

}  // namespace

void check_probe_request(const ProbeRequest& request) {
  using measure::saturating_mul;
  const std::string size = measure::format_byte_size(request.bytes);
  const bool all = !(request.h2d || request.p2p || request.ipc || request.latency);
  // Every bandwidth probe holds two buffers of --size on a GPU; the IPC probe two per rank.
  const int sharing =
      (all || request.ipc)
          ? std::max(1, workers::summarize_placement(request.ipc_placement).most_ranks_on_a_gpu)
          : 1;
  if (all || request.h2d || request.p2p || request.ipc) {  // --latency alone copies no --size
    measure::check_memory(
        "size", size, saturating_mul(request.bytes, 2 * static_cast<uint64_t>(sharing)),
        measure::kMaxGpuBytes,
        fmt::format("{} worker rank(s) on one GPU with two buffers of {} each", sharing, size));
  }
  if (all || request.h2d) {
    measure::check_memory(
        "size", size, saturating_mul(request.bytes, 2), measure::kMaxHostBytes,
        fmt::format("the host<->device probe's two pinned host buffers of {}", size));
  }
}

ProbeReport run_probes(const ProbeRequest& request) {
  check_probe_request(request);
  ProbeReport report;
  report.request = request;
  report.topology = topo::discover_for_launcher(request.devices, "probe");
  report.analysis = topo::analyze(report.topology);
  const auto& gpus = report.topology.gpus;
  const bool all = !(request.h2d || request.p2p || request.ipc || request.latency);
  const bool several = gpus.size() > 1 || request.ipc_placement.size() > 1;
  bool do_p2p = (all || request.p2p) && gpus.size() > 1;
  bool do_ipc = (all || request.ipc) && several;
  if ((all || request.p2p) && !do_p2p) {
    report.skipped.push_back({"p2p", "only one GPU: no pair to measure", request.p2p});
  }
  if ((all || request.ipc) && !do_ipc) {
    report.skipped.push_back(
        {"ipc", "only one GPU: no pair of worker processes to measure", request.ipc});
  }

  const auto timeout = std::chrono::duration<double>(request.timeout_s);
  // A worker shows progress at barriers between measurements; one measurement is up to
  // a warm-up batch and the timed ones, each bounded by --timeout.
  const auto progress = timeout * (request.batches + 3);
  const json common = common_task(request);
  std::vector<std::pair<int, int>> refused;
  run_local_probes(request, all, do_p2p, common, progress, report, refused);

  const std::vector<int> placement = ipc_placement(request, gpus);
  // --p2p ran first when it could: a pair it found without P2P rules CUDA IPC out, and saying
  // so beats failing the run. (Asked for alone, --ipc finds out in its workers.)
  if (std::string why = ipc_blocker(placement, refused); do_ipc && !why.empty()) {
    do_ipc = false;
    report.skipped.push_back({"ipc", why, request.ipc});
  }
  if (do_ipc) run_ipc_probes(request, placement, common, progress, report, refused);
  add_refusals(report, refused);
  set_expectations(report.topology, report.analysis, report.measurements);
  return report;
}

}  // namespace commtool::probe
