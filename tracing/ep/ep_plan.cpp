#include "tracing/ep/ep_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "probes/base/error.hpp"
#include "probes/base/measure/memory_limit.hpp"
#include "probes/base/workers/cluster_group.hpp"

namespace commtool::tracing {

namespace {

// The config as a routing file makes it: the layer asked for must exist; the file's expert
// count, and its token count and top-k where it gives them, replace the request's.
EpConfig config_from_file(const EpPlanRequest& q, const RoutingCounts& counts) {
  if (q.layer < 0 || static_cast<size_t>(q.layer) >= counts.layers.size()) {
    throw bad_value("layer", std::to_string(q.layer),
                    fmt::format("{} has layers 0 to {}", q.routing_file, counts.layers.size() - 1));
  }
  EpConfig c = q.config;
  c.experts = static_cast<int>(counts.layers[static_cast<size_t>(q.layer)].size());
  if (counts.tokens_per_rank) c.tokens_per_rank = static_cast<int>(*counts.tokens_per_rank);
  if (counts.topk) c.topk = *counts.topk;
  check_config(c);
  return c;
}

// The routing from the request's file, with the file's token count and top-k where it has them.
void routing_from_file(const EpPlanRequest& q, EpSetup& s) {
  const RoutingCounts counts = load_routing_counts(q.routing_file);
  s.config = config_from_file(q, counts);
  s.routing = routing_from_counts(counts, static_cast<size_t>(q.layer), s.config.ranks,
                                  static_cast<uint64_t>(s.config.tokens_per_rank), s.config.topk);
  s.routing_source = fmt::format("file {}, layer {}", q.routing_file, q.layer);
}

void check_replicate(int replicate, int experts) {
  if (replicate < 0 || replicate > experts) {
    throw bad_value("replicate", std::to_string(replicate),
                    fmt::format("must be between 0 and the expert count {}", experts));
  }
}

// A generated routing keeps every token's choices: ranks x tokens x top-k picks of 4 bytes.
void check_routing_memory(const EpConfig& c) {
  using measure::saturating_mul;
  const uint64_t picks = saturating_mul(
      saturating_mul(static_cast<uint64_t>(c.ranks), static_cast<uint64_t>(c.tokens_per_rank)),
      static_cast<uint64_t>(c.topk));
  measure::check_memory(
      "tokens_per_rank", std::to_string(c.tokens_per_rank), saturating_mul(picks, sizeof(int32_t)),
      measure::kMaxHostBytes,
      fmt::format("{} rank(s) x {} tokens x top-{} choices of 4 bytes (the generated routing)",
                  c.ranks, c.tokens_per_rank, c.topk));
}

}  // namespace

void check_ep_request(const EpPlanRequest& request) {
  EpPlanRequest q = request;
  q.config.ranks = 1;  // what holds at one rank holds at any: counts are per rank
  EpConfig c = q.config;
  if (q.routing_file.empty()) {
    check_config(c);
    check_routing_memory(c);
  } else {
    c = config_from_file(q, load_routing_counts(q.routing_file));
  }
  if (!q.placement_file.empty()) load_placement(q.placement_file, c.experts, kMaxExchangeRanks);
  check_replicate(q.replicate, c.experts);
  // Whatever the ranks, each sends every one of its tokens at least once (to itself, at
  // least): its dispatch send buffer alone is tokens x hidden x bytes per element.
  const uint64_t send =
      measure::saturating_mul(static_cast<uint64_t>(c.tokens_per_rank), token_bytes(c).dispatch);
  measure::check_memory(
      "tokens_per_rank", std::to_string(c.tokens_per_rank), send, measure::kMaxGpuBytes,
      fmt::format("at hidden {} and {} B per element, a rank's dispatch send buffer alone",
                  c.hidden, c.dispatch_bytes_per_element));
}

void check_ep_memory(const EpSetup& s, const std::vector<int>& devices) {
  using measure::saturating_add;
  // Per rank: buffers for its largest send and largest receive over every scenario and phase.
  std::vector<uint64_t> need(static_cast<size_t>(s.config.ranks), 0);
  for (const EpScenario& sc : ep_scenarios(s)) {
    for (const ByteMatrix* m : {&sc.dispatch, &sc.combine}) {
      for (size_t r = 0; r < need.size(); ++r) {
        uint64_t sent = 0, received = 0;
        for (size_t p = 0; p < need.size(); ++p) {
          sent = saturating_add(sent, (*m)[r][p]);
          received = saturating_add(received, (*m)[p][r]);
        }
        need[r] = std::max(need[r], saturating_add(sent, received));
      }
    }
  }
  // What each GPU carries: the ranks listed on it, or one rank per GPU. Under MPI, --devices
  // lists each node's GPUs by local rank, and a GPU is its host's.
  const workers::ClusterGroups* cluster = workers::active_cluster();
  std::map<std::pair<std::string, int>, std::pair<int, uint64_t>> gpu;  // GPU -> ranks, bytes
  for (size_t r = 0; r < need.size(); ++r) {
    const size_t at =
        cluster != nullptr ? static_cast<size_t>(cluster->local_rank_of(static_cast<int>(r))) : r;
    if (!devices.empty() && at >= devices.size()) continue;  // placement names such a node
    const std::pair<std::string, int> g = {
        cluster != nullptr ? cluster->hosts().at(r) : std::string(),
        devices.empty() ? static_cast<int>(at) : devices[at]};
    gpu[g].first += 1;
    gpu[g].second = saturating_add(gpu[g].second, need[r]);
  }
  for (const auto& [g, load] : gpu) {
    measure::check_memory(
        "tokens_per_rank", std::to_string(s.config.tokens_per_rank), load.second,
        measure::kMaxGpuBytes,
        fmt::format("at hidden {} and top-{}, the send and receive buffers of the {} rank(s) on "
                    "{}GPU {}",
                    s.config.hidden, s.config.topk, load.first,
                    g.first.empty() ? "" : g.first + " ", g.second));
  }
}

EpSetup plan_ep(const EpPlanRequest& q) {
  EpSetup s;
  s.config = q.config;
  const int ranks = s.config.ranks;
  if (q.routing_file.empty()) {
    check_config(s.config);
    check_routing_memory(s.config);
    s.routing = generate_routing(s.config);
    s.routing_source =
        fmt::format("generated, skew {}, seed {}", to_string(s.config.skew), s.config.seed);
  } else {
    routing_from_file(q, s);
  }
  check_replicate(q.replicate, s.config.experts);
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
