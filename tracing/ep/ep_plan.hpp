// The plan of `commtool diagnose ep`, before anything is measured: the routing (generated from a
// skew, or a real model's per-expert counts), the experts' placement on ranks, the dispatch and
// combine traffic and imbalance they give, the replication what-if, and the scenarios to measure
// (the routed traffic, the same bytes spread evenly, the replicated routing). A dry run stops
// here; a measured run hands ep_scenarios() to run_ep_measurement (ep_measure.hpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tracing/ep/ep_measure.hpp"
#include "tracing/ep/ep_routing.hpp"

namespace commtool::tracing {

struct EpPlanRequest {
  EpConfig config;  // its `ranks` is the expert-parallel size the plan is for
  // A model's per-expert counts (JSON or CSV) instead of a generated routing; then the file's
  // own tokens_per_rank and topk, where it gives them, replace the config's.
  std::string routing_file;
  int layer = 0;               // which layer of routing_file
  std::string placement_file;  // an expert-to-rank map; empty: contiguous blocks
  int replicate = 0;           // give the H hottest experts one replica each; 0: no what-if
};

// Everything about the routing, measured or not.
struct EpSetup {
  EpConfig config;
  std::string routing_source;    // "generated, skew zipf:1.2, seed 1" or "file x.json, layer 0"
  std::string placement_source;  // "contiguous" or the placement file
  Routing routing;
  Placement placement;
  EpTraffic traffic;
  EpMetrics metrics;
  int replicate = 0;  // the what-if's H; 0: none
  std::optional<ReplicationPlan> replication;
};

// Throws usage_error naming the value (a layer the file lacks, counts that do not add up, a
// config out of range) and Error(kUsage) for unreadable files.
EpSetup plan_ep(const EpPlanRequest& request);

// What can be checked before the rank count is known (a measured run over every GPU learns it
// from the machine): the config, the routing file and its layer, the placement file against the
// expert count (its ranks against the most an exchange takes), the replicate count, the
// generated routing's host memory at one rank, and the GPU memory any rank of a measured run
// needs at least (its dispatch send buffer). Throws what plan_ep throws for the same faults.
void check_ep_request(const EpPlanRequest& request);

// The GPU memory a measured run of `setup` takes: per rank, buffers for its largest send and
// largest receive; per GPU, the ranks `devices` puts on it (the GPU of each rank; empty: one
// rank per GPU). Throws BadValue (tokens_per_rank) above measure::kMaxGpuBytes on any GPU.
// plan_ep itself bounds the host memory of a generated routing.
void check_ep_memory(const EpSetup& setup, const std::vector<int>& devices);

// The traffic to measure, in the order the reports name it: routed, uniform (the routed bytes
// spread evenly), and replicated when the what-if moved anything.
std::vector<EpScenario> ep_scenarios(const EpSetup& setup);

}  // namespace commtool::tracing
