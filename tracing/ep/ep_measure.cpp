#include "tracing/ep/ep_measure.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "probes/base/error.hpp"
#include "probes/base/measure/statistics.hpp"
#include "probes/base/nccl/nccl_library.hpp"
#include "probes/base/workers/cluster_group.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/topo/discover.hpp"
#include "probes/topo/rank_placement.hpp"
#include "tracing/ep/ep_task.hpp"
#include "tracing/trace/record_io.hpp"

namespace commtool::tracing {

namespace {

using nlohmann::json;

// "node-b " before a rank's GPU when the ranks are on several hosts (an MPI run), else "".
std::string host_of(const topo::RankPlacement& placement, size_t rank) {
  const std::set<std::string> hosts(placement.hosts.begin(), placement.hosts.end());
  return hosts.size() > 1 ? placement.hosts.at(rank) + " " : "";
}

topo::RankPlacement ranks_for(const std::vector<int>& devices) {
  return topo::place_ranks(devices, "diagnose ep");
}

void require_square(const ByteMatrix& m, int n, const std::string& what) {
  bool ok = m.size() == static_cast<size_t>(n);
  for (const auto& row : m)
    ok = ok && row.size() == static_cast<size_t>(n);
  if (!ok) throw Error(ExitCode::kUsage, fmt::format("{}: not a {}x{} matrix", what, n, n));
}

EpScenarioKind scenario_named(const std::string& name) {
  if (auto k = parse_ep_scenario(name)) return *k;
  throw usage_error(fmt::format("scenario \"{}\": expected routed, uniform or replicated", name));
}

EpPhase phase_named(const std::string& name) {
  if (auto p = parse_ep_phase(name)) return *p;
  throw usage_error(fmt::format("phase \"{}\": expected dispatch or combine", name));
}

}  // namespace

const char* to_string(EpScenarioKind k) {
  switch (k) {
    case EpScenarioKind::kRouted:
      return "routed";
    case EpScenarioKind::kUniform:
      return "uniform";
    case EpScenarioKind::kReplicated:
      return "replicated";
  }
  return "?";
}

const char* to_string(EpPhase p) {
  return p == EpPhase::kDispatch ? "dispatch" : "combine";
}

std::optional<EpScenarioKind> parse_ep_scenario(const std::string& name) {
  for (EpScenarioKind k :
       {EpScenarioKind::kRouted, EpScenarioKind::kUniform, EpScenarioKind::kReplicated}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

std::optional<EpPhase> parse_ep_phase(const std::string& name) {
  for (EpPhase p : {EpPhase::kDispatch, EpPhase::kCombine}) {
    if (name == to_string(p)) return p;
  }
  return std::nullopt;
}

json to_json(const EpRankTrace& t) {
  json exchanges = json::array();
  for (const EpTracedExchange& e : t.exchanges) {
    exchanges.push_back({{"seq", e.seq},
                         {"scenario", to_string(e.scenario)},
                         {"phase", to_string(e.phase)},
                         {"us", e.time_us}});
  }
  return {{"rank", t.rank},
          {"exchanges", exchanges},
          {"clock_note", t.clock_note},
          {"records", serialize_records(t.records)}};
}

EpRankTrace ep_rank_trace_from_json(const json& j) {
  EpRankTrace t;
  try {
    t.rank = j.at("rank").get<int>();
    for (const json& e : j.at("exchanges")) {
      t.exchanges.push_back(
          {e.at("seq").get<uint64_t>(), scenario_named(e.at("scenario").get<std::string>()),
           phase_named(e.at("phase").get<std::string>()), e.at("us").get<double>()});
    }
    t.clock_note = j.at("clock_note").get<std::string>();
    t.records = parse_records(j.at("records").get_ref<const std::string&>(),
                              fmt::format("rank {} records", t.rank));
  } catch (const json::exception& e) {
    throw usage_error(fmt::format("a rank's ep trace: {}", e.what()));
  }
  return t;
}

int ep_rank_count(const std::vector<int>& devices) {
  // Under MPI the job's ranks; on one machine the listed ones, or one per GPU.
  const workers::ClusterGroups* cluster = workers::active_cluster();
  const int n = cluster != nullptr ? cluster->self().size
                : devices.empty()  ? ranks_for(devices).nranks()
                                   : static_cast<int>(devices.size());
  if (n > kMaxExchangeRanks) {
    throw bad_value("devices",
                    devices.empty() ? "all" : excerpt(fmt::format("{}", fmt::join(devices, ","))),
                    fmt::format("{} ranks: an exchange takes 1 to {}", n, kMaxExchangeRanks));
  }
  return n;
}

EpMeasurement run_ep_measurement(const EpMeasureRequest& q) {
  const topo::RankPlacement placement = ranks_for(q.devices);
  const nccl::Library lib;  // fails here, clearly, when there is no NCCL
  const int n = placement.nranks();

  json scenarios = json::array();
  for (const EpScenario& s : q.scenarios) {
    require_square(s.dispatch, n, fmt::format("{} dispatch", to_string(s.kind)));
    require_square(s.combine, n, fmt::format("{} combine", to_string(s.kind)));
    scenarios.push_back(
        {{"name", to_string(s.kind)}, {"dispatch", s.dispatch}, {"combine", s.combine}});
  }
  json gpus = json::array();
  for (const topo::Gpu& g : placement.gpu)
    gpus.push_back({{"index", g.index}, {"bus_id", g.bdf}});
  const json task = {{"name", kEpTask},  {"scenarios", scenarios},
                     {"iters", q.iters}, {"warmup", q.warmup},
                     {"trace", q.trace}, {"comm", nccl::to_string(q.comm)},
                     {"gpus", gpus}};
  // Workers pass a barrier before every exchange; NCCL's start-up is the longest gap. Each GPU
  // wait and NCCL call is bounded by --timeout itself.
  const auto progress = std::chrono::duration<double>(q.timeout_s * 3);
  const std::vector<json> results = workers::run_workers_or_throw(
      q.executable, placement.specs(), task, progress, std::chrono::duration<double>(q.timeout_s));

  EpMeasurement m;
  m.nranks = n;
  m.placement = placement.summary();
  m.comm = q.comm;
  m.nccl_version = lib.version_string();
  m.nccl_library = lib.path();
  for (const EpScenario& s : q.scenarios) {
    EpScenarioTimes t;
    t.kind = s.kind;
    for (PhaseTimes* p : {&t.dispatch, &t.combine}) {
      p->rank_us.resize(static_cast<size_t>(n));
      p->rank_enqueue_us.resize(static_cast<size_t>(n));
    }
    m.scenarios.push_back(std::move(t));
  }
  for (const json& r : results) {
    const auto rank = r.at("rank").get<size_t>();
    m.gpus.push_back(fmt::format("{}GPU {} ({}, {})", host_of(placement, rank),
                                 r.at("device").get<int>(), r.at("bus_id").get<std::string>(),
                                 r.at("gpu_name").get<std::string>()));
    for (const json& times : r.at("times")) {
      const EpScenarioKind kind = scenario_named(times.at("scenario").get<std::string>());
      auto it = std::find_if(m.scenarios.begin(), m.scenarios.end(),
                             [&](const EpScenarioTimes& s) { return s.kind == kind; });
      if (it == m.scenarios.end()) {
        throw Error(ExitCode::kUsage, fmt::format("rank {}: times of {}, a scenario not asked for",
                                                  rank, to_string(kind)));
      }
      PhaseTimes& phase = phase_named(times.at("phase").get<std::string>()) == EpPhase::kDispatch
                              ? it->dispatch
                              : it->combine;
      phase.rank_us.at(rank) = times.at("us").get<std::vector<double>>();
      phase.rank_enqueue_us.at(rank) = times.at("enqueue_us").get<std::vector<double>>();
    }
  }
  if (q.trace) {
    m.traces.resize(static_cast<size_t>(n));
    for (const json& r : results) {
      EpRankTrace t = ep_rank_trace_from_json(r.at("trace"));
      const auto rank = static_cast<size_t>(t.rank);
      m.traces.at(rank) = std::move(t);
    }
  }
  for (EpScenarioTimes& s : m.scenarios) {
    s.dispatch.slowest_us = measure::slowest_per_operation(s.dispatch.rank_us);
    s.combine.slowest_us = measure::slowest_per_operation(s.combine.rank_us);
  }
  return m;
}

}  // namespace commtool::tracing
