// The renderers of diagnose ep: its text report, its JSON document and the dispatch heat map.
// They format the plan, the diagnosis and the measurement, and decide nothing.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "probes/base/measure/byte_size.hpp"
#include "reports/ep/ep_report.hpp"
#include "reports/ep/ep_words.hpp"
#include "reports/format/summary_format.hpp"
#include "reports/format/svg_plot.hpp"
#include "reports/format/text_table.hpp"

namespace commtool::reports {

namespace {

using nlohmann::json;
using tracing::ByteMatrix;
using tracing::EpScenarioKind;
using namespace ep_words;

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
    t.add_row({to_string(r.scenario), to_string(r.phase), median_spread_us(r.host_enqueue_us),
               median_spread_us(r.input_wait_us), median_spread_us(r.kernel_us),
               median_spread_us(r.exposed_wait_us), median_spread_us(r.stream_dependency_us),
               median_spread_us(r.start_spread_us), ratio_cell(r.traced_over_untraced)});
    exchanges = std::max(exchanges, r.exchanges);
    by_nccl_thread += r.launched_by_nccl_thread;
    rank_exchanges += r.exchanges * static_cast<int>(r.rank_kernel_us.size());
    if (r.traced_over_untraced && *r.traced_over_untraced > 1 + kNoise) {
      costly.push_back(fmt::format("{} {} x{:.2f}", to_string(r.scenario), to_string(r.phase),
                                   *r.traced_over_untraced));
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
    if (r.scenario == EpScenarioKind::kRouted) routed.push_back(&r);
  }
  if (!routed.empty()) {
    std::vector<std::string> header = {"rank"};
    for (const EpSplitRow* r : routed) {
      for (const char* what : {"enqueue us", "kernel us", "start lag us"})
        header.push_back(fmt::format("{} {}", to_string(r->phase), what));
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
    rows.push_back({{"scenario", to_string(r.scenario)},
                    {"phase", to_string(r.phase)},
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

namespace {

// What was asked and where it ran: the first lines of the text report.
std::string ep_header(const EpSetup& s, const tracing::EpMeasurement* measured) {
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
  return out;
}

std::string ranks_text(const EpSetup& s) {
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
  return fmt::format("\nRanks (tokens: dispatch copies, {}; MiB as sent, self included)\n{}",
                     s.metrics.dispatch_per_selection
                         ? "one per selection (the routing file has no per-token choices)"
                         : "a token counted once per destination rank",
                     ranks.render());
}

// Every expert when there are few; else the busiest ones (--json has them all).
std::string experts_text(const EpSetup& s) {
  const tracing::TokenBytes tb = tracing::token_bytes(s.config);
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
  return fmt::format("\nExperts ({}; received: selections x dispatch bytes per token)\n{}",
                     all ? "all" : "the 16 busiest; --json lists all", et.render());
}

std::string measured_text(const EpDiagnosis& d) {
  const ScenarioFigures* uniform = find(d, EpScenarioKind::kUniform);
  TextTable t({"traffic", "phase", "time us", "host enqueue us", "MiB between ranks",
               "effective GB/s", "bottleneck GB/s", "slowest rank", "vs uniform"});
  for (const ScenarioFigures& f : d.scenarios) {
    for (const auto& [phase, p, u] :
         {std::tuple{"dispatch", &f.dispatch, uniform ? &uniform->dispatch : nullptr},
          std::tuple{"combine", &f.combine, uniform ? &uniform->combine : nullptr}}) {
      t.add_row({to_string(f.kind), phase, median_spread_us(p->time_us),
                 median_spread_us(p->host_enqueue_us), mib(p->moved_bytes),
                 fmt::format("{:.2f}", p->effective_gbps),
                 fmt::format("{:.2f} (rank {})", p->bottleneck_gbps, p->bottleneck_rank),
                 std::to_string(p->slowest_rank),
                 u != nullptr ? fmt::format("{:.2f}x", ratio(*p, *u)) : "-"});
    }
  }
  const int n = d.scenarios.front().dispatch.time_us.n;
  return fmt::format(
      "\nMeasured (grouped ncclSend/ncclRecv, every byte checked, the traffics taking turns; "
      "time: CUDA events on the NCCL stream, median [min-max] of {} operations, each at its "
      "slowest rank; host enqueue: host clock, from the NCCL stream's wait for the input to "
      "the consumer stream's wait for the end, the whole group; effective: bytes "
      "between ranks / median; bottleneck: the most one rank receives from the others / "
      "median, nccl-tests' alltoall busbw for uniform traffic; uniform: the same bytes spread "
      "evenly; replicated: the --replicate plan)\n{}",
      n, t.render());
}

json findings_json(const std::vector<EpFinding>& findings) {
  json out = json::array();
  for (const EpFinding& f : findings) {
    out.push_back({{"code", f.code},
                   {"severity", to_string(f.severity)},
                   {"message", f.message},
                   {"evidence", f.evidence},
                   {"advice", f.advice}});
  }
  return out;
}

}  // namespace

std::string ep_text(const EpSetup& s, const EpDiagnosis& d,
                    const tracing::EpMeasurement* measured) {
  std::string out = ep_header(s, measured) + ranks_text(s) + experts_text(s);
  if (s.config.ranks <= 16) {
    out += fmt::format("\nDispatch matrix (MiB, source rank row -> destination rank column)\n{}",
                       matrix_table(s.traffic.dispatch_bytes));
  }
  if (!d.scenarios.empty()) out += measured_text(d);
  if (d.split) out += split_text(*d.split);
  out += "\nDiagnosis\n";
  for (const EpFinding& f : d.findings) {
    out += fmt::format("  {} [{}] {}\n", f.severity == EpSeverity::kWarning ? "WARNING" : "note",
                       f.code, f.message);
    if (!f.evidence.empty()) out += "      evidence: " + f.evidence + "\n";
    if (!f.advice.empty()) out += "      what to do: " + f.advice + "\n";
  }
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
              {"findings", findings_json(d.findings)},
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
      scenarios.push_back({{"name", to_string(f.kind)},
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
