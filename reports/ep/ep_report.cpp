// diagnose_ep: the figures of every measured scenario and phase, and the findings, from the
// plan and the measurement alone (pure; the renderers are ep_render.cpp).
#include "reports/ep/ep_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "probes/base/tool_packages.hpp"
#include "reports/ep/ep_words.hpp"

namespace commtool::reports {

namespace {

using tracing::ByteMatrix;
using tracing::EpScenarioKind;
using namespace ep_words;

double pct(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

// "12", "12 and 40", "12, 40 and 41"
// What the hottest experts are and where they live, as one clause: "rank 3 holds experts 12 and
// 40 which get 31% of selections".
// The hot experts that a generated routing's own draws do not explain (all of them for a
// counts file), busiest first.
std::vector<tracing::ExpertLoad> hot_beyond_chance(const EpSetup& s) {
  const ExpertNoise noise = expert_noise(s);
  std::vector<tracing::ExpertLoad> hot;
  for (const tracing::ExpertLoad& e : s.metrics.hot) {
    if (!noise.generated || static_cast<double>(e.selections) > noise.hot_above) hot.push_back(e);
  }
  return hot;
}

// Whether the dead experts are more than a generated routing's draws leave unpicked by chance.
bool dead_beyond_chance(const EpSetup& s) {
  const ExpertNoise noise = expert_noise(s);
  return !noise.generated || s.metrics.dead.size() > static_cast<size_t>(noise.dead_up_to);
}

std::string hot_clause(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  std::vector<int> on_busiest;
  double share = 0;
  for (const tracing::ExpertLoad& e : hot_beyond_chance(s)) {
    if (std::find(e.ranks.begin(), e.ranks.end(), m.busiest_rank) != e.ranks.end()) {
      on_busiest.push_back(e.expert);
      share += e.share;
    }
  }
  if (on_busiest.empty()) return "";
  return fmt::format("rank {} holds expert{} {} which get{} {:.0f}% of selections", m.busiest_rank,
                     on_busiest.size() > 1 ? "s" : "", and_list(on_busiest),
                     on_busiest.size() > 1 ? "" : "s", 100.0 * share);
}

// The rank that receives the fewest tokens (lowest on ties).
int quietest_rank(const tracing::EpMetrics& m) {
  const auto it = std::min_element(
      m.ranks.begin(), m.ranks.end(),
      [](const auto& a, const auto& b) { return a.tokens_received < b.tokens_received; });
  return static_cast<int>(it - m.ranks.begin());
}

// The busiest rank's experts by selections, most first, at most `n`.
std::vector<int> busiest_experts_of(const EpSetup& s, int rank, size_t n) {
  std::vector<int> experts = experts_by_rank(s.placement)[static_cast<size_t>(rank)];
  std::stable_sort(experts.begin(), experts.end(), [&](int a, int b) {
    return s.metrics.experts[static_cast<size_t>(a)].selections >
           s.metrics.experts[static_cast<size_t>(b)].selections;
  });
  if (experts.size() > n) experts.resize(n);
  return experts;
}

// What evens out the busiest rank: fewer experts on it when the placement gives it more; else
// what the --replicate plan leaves, or its hottest experts replicated or moved to the quietest.
std::string balance_advice(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  const int busiest = m.busiest_rank, quietest = quietest_rank(m);
  const auto by_rank = experts_by_rank(s.placement);
  const size_t held = by_rank[static_cast<size_t>(busiest)].size();
  const size_t fewest = by_rank[static_cast<size_t>(quietest)].size();
  if (held > fewest) {
    return fmt::format(
        "rank {} holds {} experts where rank {} holds {}: place the experts evenly (an expert "
        "count the rank count divides, or a --placement file that gives rank {} fewer)",
        busiest, held, quietest, fewest, busiest);
  }
  const std::vector<int> top = busiest_experts_of(s, busiest, 3);
  if (s.replication && !s.replication->replicated.empty()) {
    const double left = s.replication->metrics.imbalance;
    if (left < kImbalanceWarning) {
      return fmt::format(
          "the --replicate {} plan below brings the imbalance to {:.2f}: put its replicas in the "
          "model's expert placement (EPLB's replica map)",
          s.replicate, left);
    }
    return fmt::format(
        "the --replicate {} plan below still leaves imbalance {:.2f}: replicate more experts (a "
        "larger --replicate) or move rank {}'s busiest experts ({}) to rank {}, which receives "
        "the least, with a --placement file",
        s.replicate, left, busiest, and_list(top), quietest);
  }
  return fmt::format(
      "spread rank {}'s load: replicate its busiest expert{} {} on other ranks (--replicate {} "
      "plans it, EPLB-style, and prints the imbalance left), or move one to rank {}, which "
      "receives the least, with a --placement file",
      busiest, top.size() > 1 ? "s" : "", and_list(top), top.size(), quietest);
}

std::optional<EpFinding> balance_finding(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  const auto n = s.config.ranks;
  if (n == 1) {
    return EpFinding{
        "one-rank", EpSeverity::kNote,
        "one rank: every token stays on it, so the all-to-all is a local copy and skew costs "
        "no communication here; run on 2 or more GPUs to measure what it costs",
        "1 rank",
        "plan for the expert-parallel size the model runs at (--ranks 8 for 8 GPUs, one rank "
        "per GPU), or run on a machine with 2 or more GPUs without --dry-run"};
  }
  // Imbalance that a generated routing's own draws explain says nothing of the skew.
  const double noise = imbalance_noise(s);
  if (m.imbalance <= noise) return std::nullopt;
  const tracing::RankLoad& busiest = m.ranks[static_cast<size_t>(m.busiest_rank)];
  uint64_t received = 0;
  for (const tracing::RankLoad& r : m.ranks)
    received += r.tokens_received;
  const std::string noise_text =
      s.routing.per_token()
          ? fmt::format(
                "; the generated routing's sampling noise explains up to {:.2f} at these "
                "counts",
                noise)
          : "";
  return EpFinding{
      "rank-imbalance", m.imbalance >= kImbalanceWarning ? EpSeverity::kWarning : EpSeverity::kNote,
      fmt::format("rank {} receives {:.1f}% of the dispatched tokens (an even share is "
                  "{:.1f}%)",
                  m.busiest_rank,
                  pct(static_cast<double>(busiest.tokens_received), static_cast<double>(received)),
                  100.0 / n),
      fmt::format("imbalance {:.2f} (max/mean - 1 over ranks' received tokens; a warning "
                  "from {:.2f}{}), CV {:.2f}",
                  m.imbalance, kImbalanceWarning, noise_text, m.cv),
      balance_advice(s)};
}

// At a few selections per expert, a draw that favours no expert already leaves experts
// unpicked and puts some over twice the mean: say so once, instead of a hot or dead finding
// that chance explains.
std::optional<EpFinding> chance_finding(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  const ExpertNoise noise = expert_noise(s);
  if (!noise.generated) return std::nullopt;
  const size_t hot_by_chance = m.hot.size() - hot_beyond_chance(s).size();
  const bool dead_by_chance = !m.dead.empty() && !dead_beyond_chance(s);
  if (hot_by_chance == 0 && !dead_by_chance) return std::nullopt;
  std::vector<std::string> what;
  if (hot_by_chance > 0) {
    what.push_back(fmt::format("{} expert{} over {:.0f}x the mean", hot_by_chance,
                               hot_by_chance > 1 ? "s" : "", tracing::kHotLoadFactor));
  }
  if (dead_by_chance) what.push_back(fmt::format("{} with no token", m.dead.size()));
  return EpFinding{
      "few-selections", EpSeverity::kNote,
      fmt::format("{} selections per expert are too few to tell hot or dead experts from "
                  "chance: {} {} what a routing that favours no expert gives here",
                  fmt::format("{:.1f}", noise.mean), fmt::join(what, " and "),
                  what.size() > 1 ? "are" : "is"),
      fmt::format("{} tokens x top-{} over {} experts; by chance an expert reaches up to {:.0f} "
                  "selections and up to {} experts get none",
                  s.routing.tokens_per_rank * static_cast<uint64_t>(s.config.ranks), s.config.topk,
                  s.config.experts, noise.hot_above, noise.dead_up_to),
      "plan with a real batch's token count (--tokens; DeepSeek-V3's benchmark batch is 4096 "
      "per rank) or read the model's routing counts (--routing) before acting on experts"};
}

std::optional<EpFinding> hot_finding(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  const std::vector<tracing::ExpertLoad> beyond = hot_beyond_chance(s);
  if (beyond.empty() && !m.hot.empty()) return std::nullopt;  // chance_finding says why
  if (beyond.empty()) {
    const auto busiest =
        std::max_element(m.experts.begin(), m.experts.end(),
                         [](const auto& a, const auto& b) { return a.selections < b.selections; });
    return EpFinding{
        "no-hot-expert", EpSeverity::kNote,
        fmt::format("no hot expert: none gets over {:.0f}x the mean expert's share",
                    tracing::kHotLoadFactor),
        busiest == m.experts.end()
            ? ""
            : fmt::format("the busiest, expert {}, gets {:.2f}% of selections; the mean "
                          "expert {:.2f}%",
                          busiest->expert, 100.0 * busiest->share, 100.0 / s.config.experts),
        "nothing to replicate: no expert draws more than its share"};
  }
  std::vector<std::string> parts;
  std::vector<int> hottest;
  for (const tracing::ExpertLoad& e : beyond) {
    parts.push_back(fmt::format("{} ({:.1f}%, rank{} {})", e.expert, 100.0 * e.share,
                                e.ranks.size() > 1 ? "s" : "", and_list(e.ranks)));
    if (hottest.size() < 4) hottest.push_back(e.expert);
    if (parts.size() == 8) break;
  }
  const std::string which =
      beyond.size() > hottest.size()
          ? fmt::format("the {} hot experts ({}, ...)", beyond.size(), fmt::join(hottest, ", "))
          : fmt::format("expert{} {}", hottest.size() > 1 ? "s" : "", and_list(hottest));
  std::string advice = s.replicate >= static_cast<int>(beyond.size())
                           ? fmt::format(
                                 "the --replicate {} plan below gives {} a replica{}: see the "
                                 "imbalance it leaves",
                                 s.replicate, which, beyond.size() > 1 ? " each" : "")
                           : fmt::format(
                                 "give {} a replica{} on other ranks (--replicate {} plans it, "
                                 "EPLB-style, and prints the imbalance left)",
                                 which, beyond.size() > 1 ? " each" : "", beyond.size());
  advice += s.routing.per_token()
                ? ""
                : "; in training, a router this skewed also points at the load-balancing "
                  "loss: check its coefficient";
  return EpFinding{
      "hot-experts", EpSeverity::kWarning,
      fmt::format("{} hot expert{} (over {:.0f}x the mean expert's {:.2f}% of selections)",
                  beyond.size(), beyond.size() > 1 ? "s" : "", tracing::kHotLoadFactor,
                  100.0 / s.config.experts),
      fmt::format("expert (share, holders): {}{}", fmt::join(parts, ", "),
                  beyond.size() > parts.size() ? ", ..." : ""),
      advice};
}

std::vector<EpFinding> routing_findings(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  std::vector<EpFinding> out;
  if (std::optional<EpFinding> balance = balance_finding(s)) out.push_back(std::move(*balance));
  if (std::optional<EpFinding> chance = chance_finding(s)) out.push_back(std::move(*chance));
  if (std::optional<EpFinding> hot = hot_finding(s)) out.push_back(std::move(*hot));
  if (!m.dead.empty() && dead_beyond_chance(s)) {
    std::vector<int> first(m.dead.begin(), m.dead.begin() + std::min<size_t>(m.dead.size(), 12));
    const uint64_t selections = s.routing.tokens_per_rank * static_cast<uint64_t>(s.config.ranks) *
                                static_cast<uint64_t>(s.config.topk);
    out.push_back(
        {"dead-experts", EpSeverity::kWarning,
         fmt::format("{} of {} experts got no token (dead)", m.dead.size(), s.config.experts),
         fmt::format("experts with 0 selections: {}{}", fmt::join(first, ", "),
                     m.dead.size() > first.size() ? ", ..." : ""),
         s.routing.per_token()
             ? fmt::format("the --skew leaves them unpicked, more than chance would at {} "
                           "selections over {} experts (up to {}): if the model's router starves "
                           "experts like this, raise its load-balancing loss; plan with its "
                           "routing counts (--routing) to see the real ones",
                           selections, s.config.experts, expert_noise(s).dead_up_to)
             : "check that the file is the layer and model meant (--layer); in a trained model a "
               "dead expert is wasted memory and a sign of router collapse: raise the "
               "load-balancing loss or re-initialise those experts"});
  }
  if (m.dispatch_per_selection) {
    out.push_back({"dispatch-per-selection", EpSeverity::kNote,
                   "dispatch counted per selection: a token's experts on one rank are counted "
                   "as separate copies (an upper bound on the traffic)",
                   fmt::format("the routing ({}) has per-expert counts but no per-token choices",
                               s.routing_source),
                   "read the bytes as an upper bound; for DeepEP's per-token count, generate a "
                   "routing with a --skew that matches these counts (zipf:S or hot:K:F)"});
  }
  return out;
}

// The headline, in the words an MoE engineer uses.
EpFinding headline_finding(const EpSetup& s, const ScenarioFigures& routed,
                           const ScenarioFigures& uniform, const ScenarioFigures* replicated) {
  const double dispatch_x = ratio(routed.dispatch, uniform.dispatch);
  std::string message = hot_clause(s);
  if (!message.empty()) message += ": ";
  message += fmt::format("dispatch takes {:.2f}x the uniform time", dispatch_x);
  if (replicated != nullptr && s.replication) {
    message += fmt::format("; replicating the top {} expert{} brings it to {:.2f}x",
                           s.replication->replicated.size(),
                           s.replication->replicated.size() > 1 ? "s" : "",
                           ratio(replicated->dispatch, uniform.dispatch));
  }
  const bool slow = dispatch_x >= 1 + kNoise;
  std::string advice;
  if (!slow) {
    advice = "nothing to rebalance for these links: the skew costs the dispatch no measurable time";
  } else if (replicated != nullptr && s.replication && !s.replication->replicated.empty() &&
             ratio(replicated->dispatch, uniform.dispatch) < dispatch_x * (1 - kNoise)) {
    advice = fmt::format(
        "replicate expert{} {} as the plan does (EPLB-style, in the model's expert placement): "
        "measured, it takes the dispatch from {:.2f}x to {:.2f}x the uniform time",
        s.replication->replicated.size() > 1 ? "s" : "", and_list(s.replication->replicated),
        dispatch_x, ratio(replicated->dispatch, uniform.dispatch));
  } else {
    advice = fmt::format(
        "even out what rank {} receives (the rank and expert findings below say which experts), "
        "then run again: --replicate N measures an EPLB-style plan beside this one",
        s.metrics.busiest_rank);
  }
  return {"skew-slowdown", slow ? EpSeverity::kWarning : EpSeverity::kNote, message,
          fmt::format("dispatch median {:.1f} us routed, {:.1f} us uniform (the same bytes spread "
                      "evenly)",
                      routed.dispatch.time_us.median, uniform.dispatch.time_us.median),
          advice};
}

EpFinding straggler_finding(const EpSetup& s, const PhaseFigures& rd,
                            const std::vector<std::string>& gpus) {
  std::vector<double> others;
  for (size_t r = 0; r < rd.rank_median_us.size(); ++r) {
    if (static_cast<int>(r) != rd.slowest_rank) others.push_back(rd.rank_median_us[r]);
  }
  const auto slowest = static_cast<size_t>(rd.slowest_rank);
  const std::string gpu = slowest < gpus.size() ? " (" + gpus[slowest] + ")" : "";
  std::string advice =
      rd.slowest_rank == s.metrics.busiest_rank
          ? fmt::format(
                "expected of the rank with the most to receive: even out rank {}'s load "
                "(the rank and expert findings below say how) and it goes",
                rd.slowest_rank)
          : fmt::format(
                "rank {}{} is slow with no more to receive than the others: look at its GPU and "
                "links, `commtool probe` for their bandwidth, `commtool topo` for PCIe width and "
                "NVLinks, `nvidia-smi -q -d PERFORMANCE,CLOCK` for throttling ({})",
                rd.slowest_rank, gpu, tools::kNvidiaSmi);
  return {
      "straggler", EpSeverity::kNote,
      fmt::format("straggler: rank {}{}", rd.slowest_rank,
                  rd.slowest_rank == s.metrics.busiest_rank
                      ? ", the rank that receives the most tokens"
                      : fmt::format("; rank {} receives the most tokens", s.metrics.busiest_rank)),
      fmt::format("its dispatch median {:.1f} us, the other ranks' median {:.1f} us",
                  rd.rank_median_us[static_cast<size_t>(rd.slowest_rank)],
                  measure::summarize(others).median),
      std::move(advice)};
}

std::vector<EpFinding> measured_findings(const EpSetup& s, const EpDiagnosis& d,
                                         const std::vector<std::string>& gpus) {
  std::vector<EpFinding> out;
  const ScenarioFigures* routed = find(d, EpScenarioKind::kRouted);
  const ScenarioFigures* uniform = find(d, EpScenarioKind::kUniform);
  const ScenarioFigures* replicated = find(d, EpScenarioKind::kReplicated);
  if (routed == nullptr || uniform == nullptr) return out;
  if (s.config.ranks == 1) {
    out.push_back({"one-rank-measured", EpSeverity::kNote,
                   "measured at one rank: these times are of a local copy and say nothing about "
                   "the links",
                   fmt::format("a self send/recv through NCCL, dispatch {:.1f} us, combine "
                               "{:.1f} us",
                               routed->dispatch.time_us.median, routed->combine.time_us.median),
                   "run on 2 or more GPUs (one rank per GPU, --devices 0,1,...) to measure the "
                   "exchange over the links"});
    return out;
  }
  out.push_back(headline_finding(s, *routed, *uniform, replicated));
  for (const auto& [name, r, u] : {std::tuple{"dispatch", &routed->dispatch, &uniform->dispatch},
                                   std::tuple{"combine", &routed->combine, &uniform->combine}}) {
    const double x = ratio(*r, *u);
    if (x < 1 + kNoise) {
      out.push_back(
          {"no-skew-cost", EpSeverity::kNote,
           fmt::format("{}: the skew costs nothing measurable", name),
           fmt::format("{:.2f}x the uniform time, within {:.0f}%", x, 100 * kNoise),
           fmt::format("nothing to do for the {}: its time is the bytes', not the skew's", name)});
    } else {
      // The dispatch waits on the rank that receives the most, the combine on the rank that
      // sends the most back: the same rank, as combine is dispatch's transpose.
      out.push_back(
          {"skew-cost", EpSeverity::kWarning,
           fmt::format("{}: {:.0f}% of the time is lost to the skew", name,
                       pct(r->time_us.median - u->time_us.median, r->time_us.median)),
           fmt::format("{:.1f} us routed, {:.1f} us for the same bytes spread evenly",
                       r->time_us.median, u->time_us.median),
           fmt::format("the {} waits on rank {} (bottleneck {:.2f} GB/s): even out its experts' "
                       "load (the rank and expert findings below say which) to win back up to "
                       "{:.1f} us per {}",
                       name, r->bottleneck_rank, r->bottleneck_gbps,
                       r->time_us.median - u->time_us.median, name)});
    }
  }
  out.push_back(straggler_finding(s, routed->dispatch, gpus));
  return out;
}

std::optional<EpFinding> replication_finding(const EpSetup& s, bool measured) {
  if (!s.replication) return std::nullopt;
  const tracing::ReplicationPlan& p = s.replication.value();
  if (p.replicated.empty()) {
    return EpFinding{"replication-nowhere", EpSeverity::kNote,
                     "--replicate: one rank has nowhere to put a replica; the plan is the "
                     "routing as is",
                     "1 rank",
                     "plan replicas at the expert-parallel size the model runs at (--ranks 2 or "
                     "more)"};
  }
  std::vector<std::string> moves;
  for (int e : p.replicated) {
    const std::vector<int>& holders = p.placement.holders[static_cast<size_t>(e)];
    moves.push_back(fmt::format("expert {} also on rank {}", e, holders.back()));
  }
  std::string advice;
  if (p.metrics.imbalance < s.metrics.imbalance * (1 - kNoise)) {
    advice = measured ? "compare the replicated and routed rows of the Measured table: where the "
                        "replicated one is faster, put these replicas in the model's expert "
                        "placement (EPLB's replica map)"
                      : "measure it: run the same command on the GPUs without --dry-run, which "
                        "times the replicated traffic beside the routed one";
  } else {
    advice = fmt::format(
        "these {} replica{} barely move the imbalance: replicate more experts (a larger "
        "--replicate) or move experts between ranks with a --placement file",
        p.replicated.size(), p.replicated.size() > 1 ? "s" : "");
  }
  return EpFinding{
      "replication-what-if", EpSeverity::kNote,
      fmt::format("what-if (EPLB-style) {}", fmt::join(moves, ", ")),
      fmt::format("imbalance {:.2f} -> {:.2f}{}", s.metrics.imbalance, p.metrics.imbalance,
                  measured ? "" : " (planned; --dry-run measures nothing)"),
      std::move(advice)};
}
}  // namespace

PhaseFigures phase_figures(const ByteMatrix& matrix, const tracing::PhaseTimes& times) {
  PhaseFigures p;
  p.time_us = measure::summarize(times.slowest_us);
  p.host_enqueue_us = measure::summarize(measure::slowest_per_operation(times.rank_enqueue_us));
  std::vector<uint64_t> received(matrix.size(), 0);
  for (size_t src = 0; src < matrix.size(); ++src) {
    for (size_t dst = 0; dst < matrix[src].size(); ++dst) {
      p.bytes += matrix[src][dst];
      if (src == dst) continue;
      p.moved_bytes += matrix[src][dst];
      received[dst] += matrix[src][dst];
    }
  }
  if (!received.empty()) {
    const auto most = std::max_element(received.begin(), received.end());
    p.bottleneck_rank = static_cast<int>(most - received.begin());
    p.bottleneck_bytes = *most;
  }
  if (p.time_us.median > 0) {
    p.effective_gbps = static_cast<double>(p.moved_bytes) / (p.time_us.median * 1e3);
    p.bottleneck_gbps = static_cast<double>(p.bottleneck_bytes) / (p.time_us.median * 1e3);
  }
  for (const std::vector<double>& rank : times.rank_us)
    p.rank_median_us.push_back(measure::summarize(rank).median);
  if (!p.rank_median_us.empty()) {
    p.slowest_rank =
        static_cast<int>(std::max_element(p.rank_median_us.begin(), p.rank_median_us.end()) -
                         p.rank_median_us.begin());
  }
  return p;
}

EpDiagnosis diagnose_ep(const EpSetup& setup, const tracing::EpMeasurement* measured) {
  EpDiagnosis d;
  if (measured != nullptr) {
    for (const tracing::EpScenarioTimes& t : measured->scenarios) {
      const tracing::EpTraffic& traffic = t.kind == EpScenarioKind::kReplicated && setup.replication
                                              ? setup.replication->traffic
                                              : setup.traffic;
      ScenarioFigures f;
      f.kind = t.kind;
      if (t.kind == EpScenarioKind::kUniform) {
        const auto n = setup.config.ranks;
        f.dispatch = phase_figures(
            tracing::uniform_matrix(tracing::matrix_total(traffic.dispatch_bytes), n), t.dispatch);
        f.combine = phase_figures(
            tracing::uniform_matrix(tracing::matrix_total(traffic.combine_bytes), n), t.combine);
      } else {
        f.dispatch = phase_figures(traffic.dispatch_bytes, t.dispatch);
        f.combine = phase_figures(traffic.combine_bytes, t.combine);
      }
      d.scenarios.push_back(std::move(f));
    }
  }
  if (measured != nullptr) {
    d.split = ep_split(*measured);
    if (std::string why = workers::shared_gpu_withheld(measured->placement); !why.empty()) {
      // The skew cost, the straggler and the host-bound finding all compare times; between
      // processes time-slicing one GPU no such comparison says anything about this machine.
      d.findings.push_back(
          {"verdicts-withheld", EpSeverity::kNote,
           "skew cost, straggler and what replication buys " + why,
           fmt::format("{} ranks on {} GPU(s), up to {} on one", measured->placement.ranks,
                       measured->placement.gpus, measured->placement.most_ranks_on_a_gpu),
           fmt::format("run on a machine with {} GPUs, one rank per GPU (--devices naming {} "
                       "different GPUs), for the comparisons",
                       measured->placement.ranks, measured->placement.ranks)});
    } else {
      d.findings = measured_findings(setup, d, measured->gpus);
      if (d.split) {
        for (EpFinding& f : ep_split_findings(*d.split, EpScenarioKind::kRouted))
          d.findings.push_back(std::move(f));
      }
    }
  }
  for (EpFinding& f : routing_findings(setup))
    d.findings.push_back(std::move(f));
  if (std::optional<EpFinding> r = replication_finding(setup, measured != nullptr)) {
    d.findings.push_back(std::move(*r));
  }
  return d;
}

}  // namespace commtool::reports
