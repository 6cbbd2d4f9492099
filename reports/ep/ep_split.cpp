#include "reports/ep/ep_split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "probes/base/tool_packages.hpp"
#include "reports/trace/chrome_trace.hpp"
#include "tracing/trace/attribution.hpp"

namespace commtool::reports {

namespace {

using tracing::EpMeasurement;
using tracing::OperationIntervals;

// One rank's intervals, found by the seq of their operation mark.
class RankIntervals {
 public:
  explicit RankIntervals(tracing::Attribution a) : a_(std::move(a)) {
    for (size_t i = 0; i < a_.operations.size(); ++i)
      index_.emplace(a_.operations[i].seq, i);
  }
  const OperationIntervals* find(uint64_t seq) const {
    auto it = index_.find(seq);
    return it == index_.end() ? nullptr : &a_.operations[it->second];
  }

 private:
  tracing::Attribution a_;
  std::unordered_map<uint64_t, size_t> index_;
};

// The largest of the values present; none when no rank has one.
class Slowest {
 public:
  void add(const std::optional<double>& v) {
    if (v) max_ = std::max(max_.value_or(*v), *v);
  }
  void add_to(std::vector<double>& out) const {
    if (max_) out.push_back(*max_);
  }

 private:
  std::optional<double> max_;
};

double median(std::vector<double> v) {
  return measure::summarize(std::move(v)).median;
}

const tracing::PhaseTimes* untraced_times(const EpMeasurement& m, tracing::EpScenarioKind scenario,
                                          tracing::EpPhase phase) {
  for (const tracing::EpScenarioTimes& s : m.scenarios) {
    if (s.kind == scenario) return phase == tracing::EpPhase::kDispatch ? &s.dispatch : &s.combine;
  }
  return nullptr;
}

EpSplitRow split_row(const EpMeasurement& m, const std::vector<RankIntervals>& ranks,
                     tracing::EpScenarioKind scenario, tracing::EpPhase phase) {
  const size_t n = m.traces.size();
  // Each rank's exchanges of this phase in the order they ran; the i-th of every rank is the
  // same exchange (the ranks take their turns in lockstep).
  std::vector<std::vector<const tracing::EpTracedExchange*>> of_rank(n);
  size_t exchanges = SIZE_MAX;
  for (size_t r = 0; r < n; ++r) {
    for (const tracing::EpTracedExchange& e : m.traces[r].exchanges) {
      if (e.scenario == scenario && e.phase == phase) of_rank[r].push_back(&e);
    }
    exchanges = std::min(exchanges, of_rank[r].size());
  }
  if (n == 0) exchanges = 0;

  EpSplitRow row;
  row.scenario = scenario;
  row.phase = phase;
  row.exchanges = static_cast<int>(exchanges);
  std::vector<double> enqueue, input_wait, kernel, exposed, dependency, spread, traced;
  std::vector<std::vector<double>> rank_enqueue(n), rank_kernel(n), rank_lag(n);
  for (size_t i = 0; i < exchanges; ++i) {
    Slowest e, iw, k, x, d, t;
    std::vector<std::optional<uint64_t>> start(n);
    for (size_t r = 0; r < n; ++r) {
      const tracing::EpTracedExchange& ex = *of_rank[r][i];
      t.add(ex.time_us);
      const OperationIntervals* o = ranks[r].find(ex.seq);
      if (o == nullptr) continue;
      e.add(o->host_enqueue_us);
      iw.add(o->input_wait_us);
      k.add(o->kernel_us);
      x.add(o->exposed_wait_us);
      d.add(o->stream_dependency_us);
      rank_enqueue[r].push_back(o->host_enqueue_us);
      row.launched_by_nccl_thread += o->launched_by_other_thread ? 1 : 0;
      if (o->kernel_us) rank_kernel[r].push_back(*o->kernel_us);
      start[r] = o->kernel_start_ns;
    }
    e.add_to(enqueue);
    iw.add_to(input_wait);
    k.add_to(kernel);
    x.add_to(exposed);
    d.add_to(dependency);
    t.add_to(traced);
    const std::optional<tracing::StartLags> lags = tracing::start_lags(start);
    if (!lags) continue;
    spread.push_back(lags->spread_us);
    for (size_t r = 0; r < n; ++r) {
      if (lags->lag_us[r]) rank_lag[r].push_back(*lags->lag_us[r]);
    }
  }
  row.host_enqueue_us = measure::summarize(enqueue);
  row.input_wait_us = measure::summarize(input_wait);
  row.kernel_us = measure::summarize(kernel);
  row.exposed_wait_us = measure::summarize(exposed);
  row.stream_dependency_us = measure::summarize(dependency);
  row.start_spread_us = measure::summarize(spread);
  row.traced_time_us = measure::summarize(traced);
  if (const tracing::PhaseTimes* u = untraced_times(m, scenario, phase)) {
    row.untraced_host_enqueue_us =
        measure::summarize(measure::slowest_per_operation(u->rank_enqueue_us));
    const double untraced = median(u->slowest_us);
    if (untraced > 0 && row.traced_time_us.n > 0) {
      row.traced_over_untraced = row.traced_time_us.median / untraced;
    }
  }
  for (size_t r = 0; r < n; ++r) {
    row.rank_host_enqueue_us.push_back(median(rank_enqueue[r]));
    row.rank_kernel_us.push_back(median(rank_kernel[r]));
    row.rank_start_lag_us.push_back(median(rank_lag[r]));
  }
  return row;
}

}  // namespace

std::optional<EpSplit> ep_split(const EpMeasurement& m) {
  if (m.traces.empty()) return std::nullopt;
  EpSplit out;
  std::vector<RankIntervals> ranks;
  for (const tracing::EpRankTrace& t : m.traces) {
    const tracing::RecordSet& r = t.records;
    out.records += r.gpu.size() + r.api.size() + r.stream_waits.size() + r.events.size() +
                   r.operations.size() + r.ranges.size();
    tracing::Attribution a = tracing::attribute(r);
    for (const std::string& w : a.warnings)
      out.warnings.push_back(fmt::format("rank {}: {}", t.rank, w));
    if (std::find(out.clock_notes.begin(), out.clock_notes.end(), t.clock_note) ==
        out.clock_notes.end()) {
      out.clock_notes.push_back(t.clock_note);
    }
    ranks.emplace_back(std::move(a));
  }
  for (const tracing::EpScenarioTimes& s : m.scenarios) {
    for (tracing::EpPhase phase : {tracing::EpPhase::kDispatch, tracing::EpPhase::kCombine})
      out.rows.push_back(split_row(m, ranks, s.kind, phase));
  }
  return out;
}

std::vector<EpFinding> ep_split_findings(const EpSplit& split, tracing::EpScenarioKind scenario) {
  std::vector<EpFinding> out;
  for (const EpSplitRow& row : split.rows) {
    // The host's cost is the untraced pass's (CUPTI slows the host far more than the GPU);
    // the GPU work's is the traced kernel interval.
    const measure::Summary& enqueue = row.untraced_host_enqueue_us;
    if (row.scenario != scenario || row.kernel_us.n == 0 || enqueue.n == 0) continue;
    // The GPU work of a grouped exchange starts when ncclGroupEnd launches it, so an enqueue
    // longer than the work is time the links sit idle between back-to-back exchanges.
    if (enqueue.median >= row.kernel_us.median) {
      // Through a non-blocking communicator NCCL hands each group to a thread it starts for
      // it; a blocking one launches on the calling thread, so the cost is partly the choice
      // of communicator and the sentence says so.
      const std::string why =
          row.launched_by_nccl_thread > 0
              ? "; NCCL launched the group from a thread it starts for each group, as it does "
                "for a non-blocking communicator (--comm nonblocking; a blocking one, as "
                "PyTorch creates them, launches on the calling thread), and that hand-off is "
                "part of the enqueue"
              : "";
      out.push_back(
          {"host-bound-exchange", EpSeverity::kWarning,
           fmt::format("{} {}: issued back to back, these exchanges are limited by the host, "
                       "not the links{}",
                       to_string(row.scenario), to_string(row.phase), why),
           fmt::format("the host takes {:.1f} us to enqueue the exchange (its ncclSend/ncclRecv "
                       "group, untraced; median, slowest rank), no less than the {:.1f} us its "
                       "GPU work takes (CUPTI, {} traced exchanges)",
                       enqueue.median, row.kernel_us.median, row.exchanges),
           row.launched_by_nccl_thread > 0
               ? "use a blocking communicator (--comm blocking), as PyTorch creates them, so "
                 "NCCL launches on the calling thread"
               : fmt::format("give each exchange more tokens (the enqueue stays, the link time "
                             "grows), or check the launching thread gets a core of its own on "
                             "the GPU's NUMA node (`numactl --cpunodebind=N`, {}) and is not "
                             "throttled",
                             tools::kNumactl)});
    }
  }
  return out;
}

nlohmann::json ep_chrome_trace(const EpMeasurement& m) {
  std::vector<std::map<uint64_t, std::string>> names(m.traces.size());
  std::vector<RankRecords> ranks;
  for (size_t r = 0; r < m.traces.size(); ++r) {
    for (const tracing::EpTracedExchange& e : m.traces[r].exchanges)
      names[r].emplace(e.seq, fmt::format("{} {}", to_string(e.scenario), to_string(e.phase)));
    ranks.push_back({m.traces[r].rank, &m.traces[r].records, &names[r]});
  }
  return chrome_trace(ranks);
}

}  // namespace commtool::reports
