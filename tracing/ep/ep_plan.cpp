#include "tracing/ep/ep_plan.hpp"

#include <fmt/format.h>

#include "probes/base/error.hpp"

namespace commtool::tracing {

namespace {

// The routing from the request's file, with the file's token count and top-k where it has them.
void routing_from_file(const EpPlanRequest& q, EpSetup& s) {
  const RoutingCounts counts = load_routing_counts(q.routing_file);
  if (q.layer < 0 || static_cast<size_t>(q.layer) >= counts.layers.size()) {
    throw bad_value("layer", std::to_string(q.layer),
                    fmt::format("{} has layers 0 to {}", q.routing_file, counts.layers.size() - 1));
  }
  const auto layer = static_cast<size_t>(q.layer);
  s.config.experts = static_cast<int>(counts.layers[layer].size());
  if (counts.tokens_per_rank) s.config.tokens_per_rank = static_cast<int>(*counts.tokens_per_rank);
  if (counts.topk) s.config.topk = *counts.topk;
  check_config(s.config);
  s.routing = routing_from_counts(counts, layer, s.config.ranks,
                                  static_cast<uint64_t>(s.config.tokens_per_rank), s.config.topk);
  s.routing_source = fmt::format("file {}, layer {}", q.routing_file, q.layer);
}

}  // namespace

EpSetup plan_ep(const EpPlanRequest& q) {
  EpSetup s;
  s.config = q.config;
  const int ranks = s.config.ranks;
  if (q.routing_file.empty()) {
    s.routing = generate_routing(s.config);  // checks the config
    s.routing_source =
        fmt::format("generated, skew {}, seed {}", to_string(s.config.skew), s.config.seed);
  } else {
    routing_from_file(q, s);
  }
  if (q.placement_file.empty()) {
    s.placement = contiguous_placement(s.config.experts, ranks);
    s.placement_source = "contiguous";
  } else {
    s.placement = load_placement(q.placement_file, s.config.experts, ranks);
    s.placement_source = q.placement_file;
  }
  const TokenBytes bytes = token_bytes(s.config);
  s.traffic = ep_traffic(dispatch_matrix(s.routing, s.placement), bytes);
  s.metrics = ep_metrics(s.routing, s.placement, s.traffic);
  s.replicate = q.replicate;
  if (q.replicate > 0) s.replication = plan_replication(s.routing, s.placement, q.replicate, bytes);
  return s;
}

std::vector<EpScenario> ep_scenarios(const EpSetup& s) {
  const int n = s.config.ranks;
  std::vector<EpScenario> out;
  out.push_back({EpScenarioKind::kRouted, s.traffic.dispatch_bytes, s.traffic.combine_bytes});
  out.push_back({EpScenarioKind::kUniform,
                 uniform_matrix(matrix_total(s.traffic.dispatch_bytes), n),
                 uniform_matrix(matrix_total(s.traffic.combine_bytes), n)});
  if (s.replication && !s.replication->replicated.empty()) {
    out.push_back({EpScenarioKind::kReplicated, s.replication->traffic.dispatch_bytes,
                   s.replication->traffic.combine_bytes});
  }
  return out;
}

}  // namespace commtool::tracing
