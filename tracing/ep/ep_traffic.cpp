// Where the experts live and what follows from it, for diagnose ep: the contiguous placement,
// the dispatch and combine matrices a routing makes under a placement, the load metrics the
// report judges, and the EPLB-style replication what-if (ep_routing.hpp says what each means).
// The routing itself is ep_routing.cpp's; placements read from files are routing_files.cpp's.
#include "tracing/ep/ep_routing.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "probes/base/error.hpp"

namespace commtool::tracing {

// ---- placement --------------------------------------------------------------------------------

Placement contiguous_placement(int experts, int ranks) {
  Placement p{ranks, std::vector<std::vector<int>>(experts)};
  const int base = experts / ranks, extra = experts % ranks;
  int e = 0;
  for (int r = 0; r < ranks; ++r)
    for (int i = 0; i < base + (r < extra ? 1 : 0); ++i)
      p.holders[e++] = {r};
  return p;
}

namespace {

// Every expert held by distinct ranks in range; the rank counts agree.
void check_placement(const Placement& p, int experts, int ranks) {
  if (p.ranks != ranks || p.holders.size() != static_cast<size_t>(experts))
    throw usage_error(fmt::format(
        "the placement is for {} experts on {} ranks, the routing has {} experts on {} ranks",
        p.holders.size(), p.ranks, experts, ranks));
  for (int e = 0; e < experts; ++e) {
    std::vector<int> h = p.holders[e];
    std::sort(h.begin(), h.end());
    if (h.empty() || h.front() < 0 || h.back() >= ranks ||
        std::adjacent_find(h.begin(), h.end()) != h.end())
      throw usage_error(fmt::format("expert {}: its holders {} are not distinct ranks in 0..{}", e,
                                    fmt::join(p.holders[e], ","), ranks - 1));
  }
}

}  // namespace

// ---- matrices ---------------------------------------------------------------------------------

RankMatrix dispatch_matrix(const Routing& routing, const Placement& placement) {
  check_placement(placement, routing.experts, routing.ranks);
  const int ranks = routing.ranks;
  RankMatrix m(ranks, std::vector<uint64_t>(ranks, 0));
  // The holder of the j-th selection of expert e from source s: holders take turns from s.
  auto holder = [&](int e, uint64_t j, int s) {
    const std::vector<int>& h = placement.holders[e];
    return h[(j + static_cast<uint64_t>(s)) % h.size()];
  };
  for (int s = 0; s < ranks; ++s) {
    if (!routing.per_token()) {  // every selection is a token of its own
      for (int e = 0; e < routing.experts; ++e) {
        const uint64_t count = routing.selections[s][e], n = placement.holders[e].size();
        for (uint64_t turn = 0; turn < n; ++turn)
          m[s][holder(e, turn, s)] += count / n + (turn < count % n ? 1 : 0);
      }
      continue;
    }
    std::vector<uint64_t> turn(routing.experts, 0);
    std::vector<uint64_t> counted_token(ranks, UINT64_MAX);  // [d]: the last token sent to d
    const auto k = static_cast<size_t>(routing.topk);
    for (uint64_t t = 0; t < routing.tokens_per_rank; ++t) {
      for (size_t j = 0; j < k; ++j) {
        const int32_t e = routing.token_experts[s][t * k + j];
        const int d = holder(e, turn[e]++, s);
        if (counted_token[d] != t) {  // once per distinct destination
          counted_token[d] = t;
          ++m[s][d];
        }
      }
    }
  }
  return m;
}

RankMatrix transpose(const RankMatrix& m) {
  RankMatrix t(m.empty() ? 0 : m[0].size(), std::vector<uint64_t>(m.size(), 0));
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[i].size(); ++j)
      t[j][i] = m[i][j];
  return t;
}

RankMatrix scaled(const RankMatrix& m, uint64_t factor) {
  RankMatrix out = m;
  for (auto& row : out)
    for (uint64_t& x : row)
      x *= factor;
  return out;
}

uint64_t matrix_total(const RankMatrix& m) {
  uint64_t total = 0;
  for (const auto& row : m)
    total = std::accumulate(row.begin(), row.end(), total);
  return total;
}

RankMatrix uniform_matrix(uint64_t total_bytes, int ranks) {
  const auto pairs = static_cast<uint64_t>(ranks) * static_cast<uint64_t>(ranks);
  RankMatrix m(ranks, std::vector<uint64_t>(ranks, total_bytes / pairs));
  uint64_t extra = total_bytes % pairs;
  for (int s = 0; s < ranks && extra > 0; ++s)
    for (int d = 0; d < ranks && extra > 0; ++d, --extra)
      ++m[s][d];
  return m;
}

EpTraffic ep_traffic(const RankMatrix& dispatch_tokens, const TokenBytes& bytes) {
  return {dispatch_tokens, scaled(dispatch_tokens, bytes.dispatch),
          scaled(transpose(dispatch_tokens), bytes.combine)};
}

// ---- metrics ----------------------------------------------------------------------------------

double imbalance(const std::vector<uint64_t>& values) {
  if (values.empty()) return 0;
  const double mean =
      static_cast<double>(std::accumulate(values.begin(), values.end(), uint64_t{0})) /
      static_cast<double>(values.size());
  if (mean == 0) return 0;
  return static_cast<double>(*std::max_element(values.begin(), values.end())) / mean - 1;
}

double coefficient_of_variation(const std::vector<uint64_t>& values) {
  if (values.empty()) return 0;
  const auto n = static_cast<double>(values.size());
  double mean = 0, squares = 0;
  for (uint64_t v : values)
    mean += static_cast<double>(v) / n;
  if (mean == 0) return 0;
  for (uint64_t v : values)
    squares += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean) / n;
  return std::sqrt(squares) / mean;
}

namespace {

std::vector<uint64_t> expert_totals(const Routing& routing) {
  std::vector<uint64_t> totals(routing.experts, 0);
  for (const auto& row : routing.selections)
    for (int e = 0; e < routing.experts; ++e)
      totals[e] += row[e];
  return totals;
}

// Experts by selections, most first, ties by index.
std::vector<int> by_load(const std::vector<uint64_t>& totals) {
  std::vector<int> order(totals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return totals[a] > totals[b]; });
  return order;
}

}  // namespace

EpMetrics ep_metrics(const Routing& routing, const Placement& placement, const EpTraffic& traffic) {
  EpMetrics m;
  m.dispatch_per_selection = !routing.per_token();
  const int ranks = routing.ranks;
  m.ranks.resize(ranks);
  std::vector<uint64_t> received(ranks, 0);
  for (int s = 0; s < ranks; ++s) {
    for (int d = 0; d < ranks; ++d) {
      RankLoad &from = m.ranks[s], &to = m.ranks[d];
      from.tokens_sent += traffic.dispatch_tokens[s][d];
      to.tokens_received += traffic.dispatch_tokens[s][d];
      from.dispatch_bytes_sent += traffic.dispatch_bytes[s][d];
      to.dispatch_bytes_received += traffic.dispatch_bytes[s][d];
      from.combine_bytes_sent += traffic.combine_bytes[s][d];
      to.combine_bytes_received += traffic.combine_bytes[s][d];
    }
  }
  for (int r = 0; r < ranks; ++r)
    received[r] = m.ranks[r].tokens_received;
  m.imbalance = imbalance(received);
  m.cv = coefficient_of_variation(received);
  m.busiest_rank =
      static_cast<int>(std::max_element(received.begin(), received.end()) - received.begin());

  const std::vector<uint64_t> totals = expert_totals(routing);
  const uint64_t all = std::accumulate(totals.begin(), totals.end(), uint64_t{0});
  for (int e = 0; e < routing.experts; ++e) {
    double share = all == 0 ? 0 : static_cast<double>(totals[e]) / static_cast<double>(all);
    m.experts.push_back({e, totals[e], share, placement.holders[e]});
    if (totals[e] == 0) m.dead.push_back(e);
  }
  const double hot_above = kHotLoadFactor * static_cast<double>(all) / routing.experts;
  for (int e : by_load(totals))
    if (static_cast<double>(totals[e]) > hot_above) m.hot.push_back(m.experts[e]);
  return m;
}

// ---- replication ------------------------------------------------------------------------------

namespace {

// Each rank's planned selections: every expert's total split over its holders, the remainder
// one each to the first.
std::vector<uint64_t> planned_loads(const std::vector<uint64_t>& totals, const Placement& p) {
  std::vector<uint64_t> load(p.ranks, 0);
  for (size_t e = 0; e < totals.size(); ++e) {
    const std::vector<int>& h = p.holders[e];
    for (size_t i = 0; i < h.size(); ++i)
      load[h[i]] += totals[e] / h.size() + (i < totals[e] % h.size() ? 1 : 0);
  }
  return load;
}

}  // namespace

ReplicationPlan plan_replication(const Routing& routing, const Placement& placement, int hottest,
                                 const TokenBytes& bytes) {
  if (hottest < 0 || hottest > routing.experts)
    throw bad_value("replicate", std::to_string(hottest),
                    fmt::format("must be between 0 and the expert count {}", routing.experts));
  check_placement(placement, routing.experts, routing.ranks);
  ReplicationPlan plan;
  plan.placement = placement;
  const std::vector<uint64_t> totals = expert_totals(routing);
  const std::vector<int> order = by_load(totals);
  for (int i = 0; i < hottest; ++i) {
    const int e = order[i];
    std::vector<int>& holders = plan.placement.holders[e];
    const std::vector<uint64_t> load = planned_loads(totals, plan.placement);
    int target = -1;
    for (int r = 0; r < routing.ranks; ++r)
      if (std::find(holders.begin(), holders.end(), r) == holders.end() &&
          (target < 0 || load[r] < load[target]))
        target = r;
    if (target < 0) continue;  // every rank holds it already (one rank)
    holders.push_back(target);
    plan.replicated.push_back(e);
  }
  plan.traffic = ep_traffic(dispatch_matrix(routing, plan.placement), bytes);
  plan.metrics = ep_metrics(routing, plan.placement, plan.traffic);
  return plan;
}

}  // namespace commtool::tracing
