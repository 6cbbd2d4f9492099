#include "reports/ep/ep_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "probes/base/measure/byte_size.hpp"
#include "reports/format/summary_format.hpp"
#include "reports/format/svg_plot.hpp"
#include "reports/format/text_table.hpp"

namespace commtool::reports {

namespace {

using nlohmann::json;
using tracing::ByteMatrix;

constexpr double kMiB = 1024.0 * 1024.0;
// A measured ratio within this of 1 is reported as no measurable difference: on the H200,
// identical exchanges measured in turns gave medians 0.91-1.04x apart over 20 operations.
constexpr double kNoise = 0.10;

std::string mib(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / kMiB);
}

double pct(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

// "12", "12 and 40", "12, 40 and 41"
std::string and_list(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += i + 1 == v.size() ? " and " : ", ";
    out += std::to_string(v[i]);
  }
  return out;
}

// Contiguous runs of a rank's experts: "0-31", "3, 7-9".
std::string expert_ranges(std::vector<int> experts) {
  std::sort(experts.begin(), experts.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < experts.size();) {
    size_t j = i;
    while (j + 1 < experts.size() && experts[j + 1] == experts[j] + 1)
      ++j;
    parts.push_back(i == j ? std::to_string(experts[i])
                           : fmt::format("{}-{}", experts[i], experts[j]));
    i = j + 1;
  }
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<std::vector<int>> experts_by_rank(const tracing::Placement& p) {
  std::vector<std::vector<int>> out(static_cast<size_t>(p.ranks));
  for (size_t e = 0; e < p.holders.size(); ++e) {
    for (int r : p.holders[e])
      out[static_cast<size_t>(r)].push_back(static_cast<int>(e));
  }
  return out;
}

const ScenarioFigures* find(const EpDiagnosis& d, const std::string& name) {
  for (const ScenarioFigures& s : d.scenarios) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

double ratio(const PhaseFigures& a, const PhaseFigures& b) {
  return b.time_us.median > 0 ? a.time_us.median / b.time_us.median : 0.0;
}

// What the hottest experts are and where they live, as one clause: "rank 3 holds experts 12 and
// 40 which get 31% of selections".
std::string hot_clause(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  std::vector<int> on_busiest;
  double share = 0;
  for (const tracing::ExpertLoad& e : m.hot) {
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

std::vector<std::string> routing_findings(const EpSetup& s) {
  const tracing::EpMetrics& m = s.metrics;
  std::vector<std::string> out;
  const auto n = s.config.ranks;
  if (n > 1) {
    const tracing::RankLoad& busiest = m.ranks[static_cast<size_t>(m.busiest_rank)];
    uint64_t received = 0;
    for (const tracing::RankLoad& r : m.ranks)
      received += r.tokens_received;
    out.push_back(fmt::format(
        "rank {} receives {:.1f}% of the dispatched tokens (an even share is {:.1f}%): imbalance "
        "{:.2f} (max/mean - 1 over ranks' received tokens), CV {:.2f}",
        m.busiest_rank,
        pct(static_cast<double>(busiest.tokens_received), static_cast<double>(received)), 100.0 / n,
        m.imbalance, m.cv));
  } else {
    out.push_back(
        "one rank: every token stays on it, so the all-to-all is a local copy and skew costs no "
        "communication here; run on 2 or more GPUs to measure what it costs");
  }
  if (!m.hot.empty()) {
    std::vector<std::string> parts;
    for (const tracing::ExpertLoad& e : m.hot) {
      parts.push_back(fmt::format("{} ({:.1f}%, rank{} {})", e.expert, 100.0 * e.share,
                                  e.ranks.size() > 1 ? "s" : "", and_list(e.ranks)));
      if (parts.size() == 8) break;
    }
    out.push_back(
        fmt::format("{} hot expert{} (over {:.0f}x the mean expert's {:.2f}% of "
                    "selections): {}{}",
                    m.hot.size(), m.hot.size() > 1 ? "s" : "", tracing::kHotLoadFactor,
                    100.0 / s.config.experts, fmt::join(parts, ", "),
                    m.hot.size() > parts.size() ? ", ..." : ""));
  } else {
    out.push_back(fmt::format("no hot expert: none gets over {:.0f}x the mean expert's share",
                              tracing::kHotLoadFactor));
  }
  if (!m.dead.empty()) {
    std::vector<int> first(m.dead.begin(), m.dead.begin() + std::min<size_t>(m.dead.size(), 12));
    out.push_back(fmt::format("{} of {} experts got no token (dead): {}{}", m.dead.size(),
                              s.config.experts, fmt::join(first, ", "),
                              m.dead.size() > first.size() ? ", ..." : ""));
  }
  if (m.dispatch_per_selection) {
    out.push_back(
        "dispatch counted per selection: the routing file has per-expert counts but no "
        "per-token choices, so a token's experts on one rank are counted as separate copies "
        "(an upper bound on the traffic)");
  }
  return out;
}

std::vector<std::string> measured_findings(const EpSetup& s, const EpDiagnosis& d) {
  std::vector<std::string> out;
  const ScenarioFigures* routed = find(d, kRouted);
  const ScenarioFigures* uniform = find(d, kUniform);
  const ScenarioFigures* replicated = find(d, kReplicated);
  if (routed == nullptr || uniform == nullptr) return out;
  if (s.config.ranks == 1) {
    out.push_back(fmt::format(
        "measured at one rank: a self send/recv through NCCL, dispatch {:.1f} us, combine {:.1f} "
        "us; these times are of a local copy and say nothing about the links",
        routed->dispatch.time_us.median, routed->combine.time_us.median));
    return out;
  }
  // The headline, in the words an MoE engineer uses.
  const double dispatch_x = ratio(routed->dispatch, uniform->dispatch);
  std::string headline = hot_clause(s);
  if (!headline.empty()) headline += ": ";
  headline +=
      fmt::format("dispatch takes {:.2f}x the uniform time ({:.1f} vs {:.1f} us)", dispatch_x,
                  routed->dispatch.time_us.median, uniform->dispatch.time_us.median);
  if (replicated != nullptr && s.replication) {
    headline += fmt::format("; replicating the top {} expert{} brings it to {:.2f}x",
                            s.replication->replicated.size(),
                            s.replication->replicated.size() > 1 ? "s" : "",
                            ratio(replicated->dispatch, uniform->dispatch));
  }
  out.push_back(headline);

  for (const auto& [name, r, u] : {std::tuple{"dispatch", &routed->dispatch, &uniform->dispatch},
                                   std::tuple{"combine", &routed->combine, &uniform->combine}}) {
    const double x = ratio(*r, *u);
    if (x < 1 + kNoise) {
      out.push_back(
          fmt::format("{}: the skew costs nothing measurable ({:.2f}x the uniform "
                      "time, within {:.0f}%)",
                      name, x, 100 * kNoise));
    } else {
      out.push_back(
          fmt::format("{}: {:.0f}% of the time is lost to the skew ({:.1f} us routed, "
                      "{:.1f} us for the same bytes spread evenly)",
                      name, pct(r->time_us.median - u->time_us.median, r->time_us.median),
                      r->time_us.median, u->time_us.median));
    }
  }
  const PhaseFigures& rd = routed->dispatch;
  std::vector<double> others;
  for (size_t r = 0; r < rd.rank_median_us.size(); ++r) {
    if (static_cast<int>(r) != rd.slowest_rank) others.push_back(rd.rank_median_us[r]);
  }
  out.push_back(fmt::format(
      "straggler: rank {} (its dispatch median {:.1f} us, the other ranks' median {:.1f} us){}",
      rd.slowest_rank, rd.rank_median_us[static_cast<size_t>(rd.slowest_rank)],
      measure::summarize(others).median,
      rd.slowest_rank == s.metrics.busiest_rank
          ? ", the rank that receives the most tokens"
          : fmt::format("; rank {} receives the most tokens", s.metrics.busiest_rank)));
  return out;
}

std::string replication_finding(const EpSetup& s, bool measured) {
  if (!s.replication) return "";
  const tracing::ReplicationPlan& p = s.replication.value();
  if (p.replicated.empty()) {
    return "--replicate: one rank has nowhere to put a replica; the plan is the routing as is";
  }
  std::vector<std::string> moves;
  for (int e : p.replicated) {
    const std::vector<int>& holders = p.placement.holders[static_cast<size_t>(e)];
    moves.push_back(fmt::format("expert {} also on rank {}", e, holders.back()));
  }
  return fmt::format("what-if (EPLB-style) {}: imbalance {:.2f} -> {:.2f}{}",
                     fmt::join(moves, ", "), s.metrics.imbalance, p.metrics.imbalance,
                     measured ? "" : " (planned; --dry-run measures nothing)");
}

json phase_json(const PhaseFigures& p) {
  return {{"time_us", summary_json(p.time_us)},
          {"host_enqueue_us", summary_json(p.host_enqueue_us)},
          {"bytes", p.bytes},
          {"moved_bytes", p.moved_bytes},
          {"effective_gbps", p.effective_gbps},
          {"bottleneck_rank", p.bottleneck_rank},
          {"bottleneck_bytes", p.bottleneck_bytes},
          {"bottleneck_gbps", p.bottleneck_gbps},
          {"rank_median_us", p.rank_median_us},
          {"slowest_rank", p.slowest_rank}};
}

json metrics_json(const tracing::EpMetrics& m) {
  json ranks = json::array();
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    const tracing::RankLoad& l = m.ranks[r];
    ranks.push_back({{"rank", r},
                     {"tokens_sent", l.tokens_sent},
                     {"tokens_received", l.tokens_received},
                     {"dispatch_bytes_sent", l.dispatch_bytes_sent},
                     {"dispatch_bytes_received", l.dispatch_bytes_received},
                     {"combine_bytes_sent", l.combine_bytes_sent},
                     {"combine_bytes_received", l.combine_bytes_received}});
  }
  auto experts = [](const std::vector<tracing::ExpertLoad>& v) {
    json out = json::array();
    for (const tracing::ExpertLoad& e : v) {
      out.push_back({{"expert", e.expert},
                     {"selections", e.selections},
                     {"share", e.share},
                     {"ranks", e.ranks}});
    }
    return out;
  };
  return {{"ranks", ranks},
          {"imbalance", m.imbalance},
          {"cv", m.cv},
          {"busiest_rank", m.busiest_rank},
          {"experts", experts(m.experts)},
          {"hot", experts(m.hot)},
          {"dead", m.dead},
          {"dispatch_per_selection", m.dispatch_per_selection}};
}

std::string matrix_table(const ByteMatrix& m) {
  std::vector<std::string> header{"src \\ dst"};
  for (size_t c = 0; c < m.size(); ++c)
    header.push_back(std::to_string(c));
  TextTable t(header);
  for (size_t r = 0; r < m.size(); ++r) {
    std::vector<std::string> row{std::to_string(r)};
    for (uint64_t b : m[r])
      row.push_back(fmt::format("{:.2f}", static_cast<double>(b) / kMiB));
    t.add_row(row);
  }
  return t.render();
}

std::string ratio_cell(const std::optional<double>& r) {
  return r ? fmt::format("{:.2f}", *r) : "-";
}

std::string split_text(const EpSplit& split) {
  TextTable t({"traffic", "phase", "host enqueue us (traced)", "input wait us", "kernel us",
               "exposed wait us", "stream dep us", "start spread us", "traced/untraced"});
  int exchanges = 0, by_nccl_thread = 0, rank_exchanges = 0;
  std::vector<std::string> costly;
  for (const EpSplitRow& r : split.rows) {
    t.add_row({r.scenario, r.phase, median_spread_us(r.host_enqueue_us),
               median_spread_us(r.input_wait_us), median_spread_us(r.kernel_us),
               median_spread_us(r.exposed_wait_us), median_spread_us(r.stream_dependency_us),
               median_spread_us(r.start_spread_us), ratio_cell(r.traced_over_untraced)});
    exchanges = std::max(exchanges, r.exchanges);
    by_nccl_thread += r.launched_by_nccl_thread;
    rank_exchanges += r.exchanges * static_cast<int>(r.rank_kernel_us.size());
    if (r.traced_over_untraced && *r.traced_over_untraced > 1 + kNoise) {
      costly.push_back(fmt::format("{} {} x{:.2f}", r.scenario, r.phase, *r.traced_over_untraced));
    }
  }
  std::string out = fmt::format(
      "\nCUPTI split (--trace: the same turns again under CUPTI, after the timed pass; per "
      "exchange the slowest rank, median [min-max] of {} exchanges. Host enqueue: host clock, "
      "from the NCCL stream's wait for the input to the consumer stream's wait for the end; "
      "input wait: the NCCL stream idle until the input was ready; kernel: first to last GPU "
      "work of the group; exposed wait: the consumer stream idle until the end event; stream "
      "dep: input ready to the consumer's first work; start spread: the last rank's kernel "
      "start after the first's; traced/untraced: median CUDA-event time with and without "
      "CUPTI)\n{}",
      exchanges, t.render());

  // Per rank, for the traffic under diagnosis (--json has every traffic).
  std::vector<const EpSplitRow*> routed;
  for (const EpSplitRow& r : split.rows) {
    if (r.scenario == kRouted) routed.push_back(&r);
  }
  if (!routed.empty()) {
    std::vector<std::string> header = {"rank"};
    for (const EpSplitRow* r : routed) {
      for (const char* what : {"enqueue us", "kernel us", "start lag us"})
        header.push_back(fmt::format("{} {}", r->phase, what));
    }
    TextTable ranks(header);
    for (size_t k = 0; k < routed.front()->rank_kernel_us.size(); ++k) {
      std::vector<std::string> cells = {std::to_string(k)};
      for (const EpSplitRow* r : routed) {
        for (const std::vector<double>* v :
             {&r->rank_host_enqueue_us, &r->rank_kernel_us, &r->rank_start_lag_us})
          cells.push_back(fmt::format("{:.1f}", v->at(k)));
      }
      ranks.add_row(cells);
    }
    out += fmt::format(
        "\nPer rank, routed traffic (medians over the traced exchanges; start lag: the rank's "
        "kernel start after the first rank's, on the one clock all ranks' records share; it "
        "includes the harness's barrier release and the rank's own input fill)\n{}",
        ranks.render());
  }
  for (const std::string& c : split.clock_notes)
    out += "  clocks: " + c + "\n";
  if (by_nccl_thread > 0) {
    out += fmt::format(
        "  NCCL launched {} of {} traced exchanges' GPU work from a thread of its own (as it "
        "does for a non-blocking communicator, --comm nonblocking): the host enqueue includes "
        "that hand-off, and under CUPTI the thread's start-up\n",
        by_nccl_thread, rank_exchanges);
  }
  if (!costly.empty()) {
    out += fmt::format(
        "  tracing slowed {}: the split is of the traced pass; the Measured times above are "
        "untraced\n",
        fmt::join(costly, ", "));
  }
  for (const std::string& w : split.warnings)
    out += "  warning: " + w + "\n";
  return out;
}

json split_json(const EpSplit& split) {
  json rows = json::array();
  for (const EpSplitRow& r : split.rows) {
    rows.push_back({{"scenario", r.scenario},
                    {"phase", r.phase},
                    {"exchanges", r.exchanges},
                    {"host_enqueue_us", summary_json(r.host_enqueue_us)},
                    {"input_wait_us", summary_json(r.input_wait_us)},
                    {"kernel_us", summary_json(r.kernel_us)},
                    {"exposed_wait_us", summary_json(r.exposed_wait_us)},
                    {"stream_dependency_us", summary_json(r.stream_dependency_us)},
                    {"start_spread_us", summary_json(r.start_spread_us)},
                    {"traced_time_us", summary_json(r.traced_time_us)},
                    {"traced_over_untraced",
                     r.traced_over_untraced ? json(*r.traced_over_untraced) : json(nullptr)},
                    {"launched_by_nccl_thread", r.launched_by_nccl_thread},
                    {"rank_host_enqueue_us", r.rank_host_enqueue_us},
                    {"rank_kernel_us", r.rank_kernel_us},
                    {"rank_start_lag_us", r.rank_start_lag_us}});
  }
  return {{"rows", rows},
          {"clock_notes", split.clock_notes},
          {"warnings", split.warnings},
          {"records", split.records}};
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
      const tracing::EpTraffic& traffic =
          t.name == kReplicated && setup.replication ? setup.replication->traffic : setup.traffic;
      ScenarioFigures f;
      f.name = t.name;
      if (t.name == kUniform) {
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
      d.findings.push_back("skew cost, straggler and what replication buys " + why);
    } else {
      d.findings = measured_findings(setup, d);
      if (d.split) {
        for (std::string& f : ep_split_findings(*d.split, kRouted))
          d.findings.push_back(std::move(f));
      }
    }
  }
  for (std::string& f : routing_findings(setup))
    d.findings.push_back(std::move(f));
  if (std::string r = replication_finding(setup, measured != nullptr); !r.empty()) {
    d.findings.push_back(std::move(r));
  }
  return d;
}

std::string ep_text(const EpSetup& s, const EpDiagnosis& d,
                    const tracing::EpMeasurement* measured) {
  const tracing::EpConfig& c = s.config;
  const tracing::TokenBytes tb = tracing::token_bytes(c);
  std::string out;
  if (measured != nullptr) {
    if (std::string label = workers::shared_gpu_label(measured->placement); !label.empty()) {
      out += label + "\n\n";
    }
  }
  out += fmt::format(
      "commtool diagnose ep: {} rank(s), {} tokens per rank, hidden {}, dispatch {} B per "
      "element ({} per token), combine {} B per element ({} per token), {} experts, top-{}\n"
      "  routing: {}; placement: {}\n",
      c.ranks, c.tokens_per_rank, c.hidden, c.dispatch_bytes_per_element,
      measure::format_byte_size(tb.dispatch), c.combine_bytes_per_element,
      measure::format_byte_size(tb.combine), c.experts, c.topk, s.routing_source,
      s.placement_source);
  if (measured != nullptr) {
    out += fmt::format("  NCCL {} ({}), {} communicators\n", measured->nccl_version,
                       measured->nccl_library, nccl::to_string(measured->comm));
    for (size_t r = 0; r < measured->gpus.size(); ++r)
      out += fmt::format("  rank {}: {}\n", r, measured->gpus[r]);
  }

  const auto by_rank = experts_by_rank(s.placement);
  TextTable ranks({"rank", "experts", "tokens sent", "tokens received", "dispatch sent MiB",
                   "dispatch received MiB", "combine sent MiB", "combine received MiB"});
  for (size_t r = 0; r < s.metrics.ranks.size(); ++r) {
    const tracing::RankLoad& l = s.metrics.ranks[r];
    ranks.add_row({std::to_string(r), expert_ranges(by_rank[r]), std::to_string(l.tokens_sent),
                   std::to_string(l.tokens_received), mib(l.dispatch_bytes_sent),
                   mib(l.dispatch_bytes_received), mib(l.combine_bytes_sent),
                   mib(l.combine_bytes_received)});
  }
  out += fmt::format("\nRanks (tokens: dispatch copies, {}; MiB as sent, self included)\n{}",
                     s.metrics.dispatch_per_selection
                         ? "one per selection (the routing file has no per-token choices)"
                         : "a token counted once per destination rank",
                     ranks.render());

  // Every expert when there are few; else the busiest ones (--json has them all).
  std::vector<tracing::ExpertLoad> experts = s.metrics.experts;
  const bool all = experts.size() <= 32;
  if (!all) {
    std::stable_sort(experts.begin(), experts.end(),
                     [](const auto& a, const auto& b) { return a.selections > b.selections; });
    experts.resize(16);
  }
  TextTable et({"expert", "selections", "share", "MiB received", "ranks"});
  for (const tracing::ExpertLoad& e : experts) {
    et.add_row({std::to_string(e.expert), std::to_string(e.selections),
                fmt::format("{:.2f}%", 100.0 * e.share), mib(e.selections * tb.dispatch),
                and_list(e.ranks)});
  }
  out += fmt::format("\nExperts ({}; received: selections x dispatch bytes per token)\n{}",
                     all ? "all" : "the 16 busiest; --json lists all", et.render());

  if (c.ranks <= 16) {
    out += fmt::format("\nDispatch matrix (MiB, source rank row -> destination rank column)\n{}",
                       matrix_table(s.traffic.dispatch_bytes));
  }

  if (!d.scenarios.empty()) {
    const ScenarioFigures* uniform = find(d, kUniform);
    TextTable t({"traffic", "phase", "time us", "host enqueue us", "MiB between ranks",
                 "effective GB/s", "bottleneck GB/s", "slowest rank", "vs uniform"});
    for (const ScenarioFigures& f : d.scenarios) {
      for (const auto& [phase, p, u] :
           {std::tuple{"dispatch", &f.dispatch, uniform ? &uniform->dispatch : nullptr},
            std::tuple{"combine", &f.combine, uniform ? &uniform->combine : nullptr}}) {
        t.add_row({f.name, phase, median_spread_us(p->time_us),
                   median_spread_us(p->host_enqueue_us), mib(p->moved_bytes),
                   fmt::format("{:.2f}", p->effective_gbps),
                   fmt::format("{:.2f} (rank {})", p->bottleneck_gbps, p->bottleneck_rank),
                   std::to_string(p->slowest_rank),
                   u != nullptr ? fmt::format("{:.2f}x", ratio(*p, *u)) : "-"});
      }
    }
    const int n = d.scenarios.front().dispatch.time_us.n;
    out += fmt::format(
        "\nMeasured (grouped ncclSend/ncclRecv, every byte checked, the traffics taking turns; "
        "time: CUDA events on the NCCL stream, median [min-max] of {} operations, each at its "
        "slowest rank; host enqueue: host clock, from the NCCL stream's wait for the input to "
        "the consumer stream's wait for the end, the whole group; effective: bytes "
        "between ranks / median; bottleneck: the most one rank receives from the others / "
        "median, nccl-tests' alltoall busbw for uniform traffic; uniform: the same bytes spread "
        "evenly; replicated: the --replicate plan)\n{}",
        n, t.render());
  }
  if (d.split) out += split_text(*d.split);

  out += "\nDiagnosis\n";
  for (const std::string& f : d.findings)
    out += "  - " + f + "\n";
  return out;
}

std::string ep_json(const EpSetup& s, const EpDiagnosis& d,
                    const tracing::EpMeasurement* measured) {
  const tracing::EpConfig& c = s.config;
  json doc = {{"schema_version", 1},
              {"command", "diagnose ep"},
              {"config",
               {{"ranks", c.ranks},
                {"tokens_per_rank", c.tokens_per_rank},
                {"hidden", c.hidden},
                {"dispatch_bytes_per_element", c.dispatch_bytes_per_element},
                {"combine_bytes_per_element", c.combine_bytes_per_element},
                {"experts", c.experts},
                {"topk", c.topk},
                {"skew", tracing::to_string(c.skew)},
                {"seed", c.seed}}},
              {"routing_source", s.routing_source},
              {"placement_source", s.placement_source},
              {"placement", s.placement.holders},
              {"dispatch_tokens", s.traffic.dispatch_tokens},
              {"dispatch_bytes", s.traffic.dispatch_bytes},
              {"combine_bytes", s.traffic.combine_bytes},
              {"metrics", metrics_json(s.metrics)},
              {"findings", d.findings},
              {"measured", measured != nullptr}};
  if (s.replication) {
    const tracing::ReplicationPlan& p = s.replication.value();
    doc["replication"] = {{"replicate", s.replicate},
                          {"replicated", p.replicated},
                          {"placement", p.placement.holders},
                          {"dispatch_bytes", p.traffic.dispatch_bytes},
                          {"metrics", metrics_json(p.metrics)}};
  }
  if (measured != nullptr) {
    doc["nccl_version"] = measured->nccl_version;
    doc["nccl_library"] = measured->nccl_library;
    doc["gpus"] = measured->gpus;
    doc["rank_placement"] = workers::to_json(measured->placement);
    doc["comm"] = nccl::to_string(measured->comm);
    json scenarios = json::array();
    for (const ScenarioFigures& f : d.scenarios) {
      scenarios.push_back({{"name", f.name},
                           {"dispatch", phase_json(f.dispatch)},
                           {"combine", phase_json(f.combine)}});
    }
    doc["scenarios"] = scenarios;
    doc["split"] = d.split ? split_json(*d.split) : json(nullptr);
  }
  return doc.dump(2) + "\n";
}

std::string ep_heat_map_svg(const EpSetup& s) {
  HeatMap map;
  map.title =
      fmt::format("diagnose ep: dispatch bytes, {} ({} ranks)", s.routing_source, s.config.ranks);
  map.row_label = "source rank";
  map.col_label = "destination rank";
  for (int r = 0; r < s.config.ranks; ++r) {
    map.row_ticks.push_back(std::to_string(r));
    map.col_ticks.push_back(std::to_string(r));
  }
  for (const std::vector<uint64_t>& row : s.traffic.dispatch_bytes) {
    std::vector<double> mib;
    for (uint64_t b : row)
      mib.push_back(static_cast<double>(b) / kMiB);
    map.values.push_back(std::move(mib));
  }
  map.value_unit = "MiB";
  return render_heat_map_svg(map);
}

}  // namespace commtool::reports
