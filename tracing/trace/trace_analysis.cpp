#include "tracing/trace/trace_analysis.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "tracing/collectives/collective_data.hpp"
#include "tracing/trace/attribution.hpp"

namespace commtool::tracing {

namespace {

using measure::summarize;
using measure::Summary;

constexpr size_t kMaxWarnings = 20;

// Per seq, the slowest rank's time: a collective is not over until every rank is done.
Summary slowest_rank_times(const TraceRun& run, uint64_t bytes, bool traced) {
  std::map<uint64_t, double> by_seq;
  for (const RankRun& r : run.ranks) {
    for (const OperationSample& s : r.samples) {
      if (s.bytes != bytes || s.traced != traced) continue;
      double& t = by_seq[s.seq];
      t = std::max(t, s.time_us);
    }
  }
  std::vector<double> v;
  v.reserve(by_seq.size());
  for (const auto& [seq, t] : by_seq)
    v.push_back(t);
  return summarize(std::move(v));
}

bool same_collective(const std::string& func, Collective c) {
  if (auto parsed = parse_collective(func)) return *parsed == c;
  // Point-to-point events of grouped send/recv.
  return (func == "Send" || func == "Recv") &&
         (c == Collective::kSendRecv || c == Collective::kAllToAll);
}

NcclChoice nccl_choice(const TraceRun& run, Collective c, DataType t, const BufferLayout& layout) {
  std::map<std::tuple<std::string, std::string, int>, int> seen;
  for (const RankRun& r : run.ranks) {
    for (const nccl_profiler::CollectiveRecord& rec : r.nccl) {
      if (!same_collective(rec.func, c)) continue;
      // NCCL 2.28 moves AllGather and Broadcast as bytes (ncclInt8) and reports that count.
      if (rec.count != layout.count && rec.count != layout.send_elements &&
          rec.count != layout.recv_elements && rec.count != layout.count * type_size(t)) {
        continue;
      }
      ++seen[{rec.algo, rec.proto, rec.channels}];
    }
  }
  NcclChoice choice;
  if (seen.empty()) {
    const std::string why = run.ranks.empty() ? "no ranks" : run.ranks.front().plugin_status;
    choice.unknown_why = why.empty() ? "no profiler records" : why;
  }
  for (const auto& [key, n] : seen) {
    const auto& [algo, proto, channels] = key;
    choice.ways.push_back({algo, proto, channels, n});
  }
  return choice;
}

// Per batch of this size (the i-th of every rank together): its time per operation, averaged
// over the ranks that ran it.
std::vector<double> batch_means(const TraceRun& run, uint64_t bytes) {
  std::vector<double> sum;
  std::vector<int> ranks;
  for (const RankRun& r : run.ranks) {
    size_t i = 0;
    for (const BatchSample& b : r.batches) {
      if (b.bytes != bytes || b.ops <= 0) continue;
      if (i == sum.size()) {
        sum.push_back(0);
        ranks.push_back(0);
      }
      sum[i] += b.time_us / b.ops;
      ++ranks[i];
      ++i;
    }
  }
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] /= ranks[i];
  return sum;
}

SizeRow size_row(const TraceRun& run, uint64_t bytes, Collective c, DataType t) {
  SizeRow row;
  row.bytes = bytes;
  const BufferLayout layout = buffer_layout(c, t, bytes, run.meta.nranks);
  row.count = layout.count;
  const bool traced = run.meta.cupti;
  row.time_us = slowest_rank_times(run, bytes, traced);
  row.algbw_gbps = algbw_gbps(static_cast<double>(bytes), row.time_us.median);
  row.busbw_gbps = busbw_gbps(c, run.meta.nranks, static_cast<double>(bytes), row.time_us.median);
  for (const RankRun& r : run.ranks) {
    for (const OperationSample& s : r.samples) {
      if (s.bytes == bytes) row.wrong_elements += s.wrong_elements;
    }
    for (const BatchSample& b : r.batches) {
      if (b.bytes == bytes) row.wrong_elements += b.wrong_elements;
    }
  }
  row.nccl_choice = nccl_choice(run, c, t, layout);
  if (std::vector<double> batches = batch_means(run, bytes); !batches.empty()) {
    row.batch_us = summarize(batches);
    row.batch_busbw_gbps =
        busbw_gbps(c, run.meta.nranks, static_cast<double>(bytes), row.batch_us->median);
  }
  if (traced && run.meta.untraced_pass) {
    Summary untraced = slowest_rank_times(run, bytes, false);
    if (untraced.n > 0 && untraced.median > 0) {
      row.untraced_time_us = untraced;
      row.traced_over_untraced = row.time_us.median / untraced.median;
    }
    std::vector<double> host_traced, host_untraced;
    for (const RankRun& r : run.ranks) {
      for (const OperationSample& s : r.samples) {
        if (s.bytes != bytes) continue;
        (s.traced ? host_traced : host_untraced).push_back(s.host_call_us);
      }
    }
    if (!host_traced.empty() && !host_untraced.empty()) {
      row.host_call_delta_us = summarize(host_traced).median - summarize(host_untraced).median;
    }
  }
  return row;
}

struct SplitKey {
  uint64_t bytes;
  CompletionMode mode;
  int poll_ms;
  auto operator<=>(const SplitKey&) const = default;
};

struct SplitSamples {
  std::vector<double> call, wait, dependency, kernel, exposed, input;
  bool polls = false;
  int complete = 0;
  int operations = 0;
  std::map<uint64_t, std::vector<std::optional<uint64_t>>> starts;  // seq -> by rank
};

void add(std::vector<double>& v, const std::optional<double>& x) {
  if (x) v.push_back(*x);
}

std::vector<SplitRow> split_rows(const TraceRun& run, TraceReport& report) {
  std::map<SplitKey, SplitSamples> groups;
  for (const RankRun& r : run.ranks) {
    if (r.records.operations.empty()) continue;
    Attribution a = attribute(r.records);
    for (std::string& w : a.warnings)
      report.warnings.push_back(fmt::format("rank {}: {}", r.rank, w));
    std::map<uint64_t, const OperationSample*> sample_of;
    for (const OperationSample& s : r.samples) {
      if (s.traced) sample_of[s.seq] = &s;
    }
    for (const OperationIntervals& op : a.operations) {
      auto it = sample_of.find(op.seq);
      if (it == sample_of.end()) continue;
      const OperationSample& s = *it->second;
      SplitSamples& g = groups[{s.bytes, s.mode, s.poll_ms}];
      g.call.push_back(op.host_enqueue_us);
      if (s.mode != CompletionMode::kSync) g.wait.push_back(op.host_wait_us);
      g.polls = g.polls || op.host_wait_polls;
      add(g.dependency, op.stream_dependency_us);
      add(g.kernel, op.kernel_us);
      add(g.exposed, op.exposed_wait_us);
      add(g.input, op.input_wait_us);
      g.complete += op.complete_at_wait_return.value_or(false) ? 1 : 0;
      ++g.operations;
      std::vector<std::optional<uint64_t>>& starts = g.starts[op.seq];
      starts.resize(run.ranks.size());
      if (static_cast<size_t>(r.rank) < starts.size()) {
        starts[static_cast<size_t>(r.rank)] = op.kernel_start_ns;
      }
    }
  }
  std::vector<SplitRow> rows;
  for (auto& [key, g] : groups) {
    SplitRow row;
    row.bytes = key.bytes;
    row.mode = key.mode;
    row.poll_ms = key.poll_ms;
    row.host_call_us = summarize(g.call);
    row.host_wait_us = summarize(g.wait);
    row.host_wait_polls = g.polls;
    row.stream_dependency_us = summarize(g.dependency);
    if (row.stream_dependency_us.n > 0 && row.stream_dependency_us.median > 0) {
      row.host_over_dependency =
          (row.host_call_us.median + row.host_wait_us.median) / row.stream_dependency_us.median;
    }
    row.complete = g.complete;
    row.operations = g.operations;
    row.kernel_us = summarize(g.kernel);
    row.exposed_wait_us = summarize(g.exposed);
    row.input_wait_us = summarize(g.input);
    if (run.ranks.size() > 1) {
      std::vector<double> spread;
      std::vector<std::vector<double>> lag(run.ranks.size());
      for (const auto& [seq, starts] : g.starts) {
        const std::optional<StartLags> lags = start_lags(starts);
        if (!lags) continue;
        spread.push_back(lags->spread_us);
        for (size_t k = 0; k < lag.size(); ++k) {
          if (lags->lag_us[k]) lag[k].push_back(*lags->lag_us[k]);
        }
      }
      row.start_spread_us = summarize(spread);
      for (std::vector<double>& l : lag)
        row.rank_start_lag_us.push_back(summarize(std::move(l)).median);
    }
    rows.push_back(row);
  }
  // Sizes in sweep order, modes in the order asked.
  auto mode_rank = [&](CompletionMode m) {
    auto it = std::find(run.meta.modes.begin(), run.meta.modes.end(), m);
    return it - run.meta.modes.begin();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const SplitRow& a, const SplitRow& b) {
    return std::tuple(a.bytes, mode_rank(a.mode)) < std::tuple(b.bytes, mode_rank(b.mode));
  });
  return rows;
}

std::vector<ScopeRow> scope_rows(const TraceRun& run) {
  std::map<std::pair<CompletionMode, int>, std::vector<const StreamScopeSample*>> groups;
  std::vector<std::pair<CompletionMode, int>> order;
  for (const RankRun& r : run.ranks) {
    for (const StreamScopeSample& s : r.scope) {
      auto key = std::make_pair(s.mode, s.poll_ms);
      if (!groups.contains(key)) order.push_back(key);
      groups[key].push_back(&s);
    }
  }
  std::vector<ScopeRow> rows;
  for (const auto& key : order) {
    ScopeRow row;
    row.mode = key.first;
    row.poll_ms = key.second;
    std::vector<double> wait, lead;
    for (const StreamScopeSample* s : groups[key]) {
      ++row.samples;
      row.b_first += s->b_before_a_us > 0 ? 1 : 0;
      row.complete_at_wait_return += s->complete_at_wait_return ? 1 : 0;
      wait.push_back(s->host_wait_us);
      lead.push_back(s->b_before_a_us);
    }
    row.host_wait_us = summarize(wait);
    row.b_before_a_us = summarize(lead);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

std::string to_string(const NcclChoice& c) {
  if (!c.known()) return c.unknown_why.empty() ? "unknown" : "unknown (" + c.unknown_why + ")";
  std::vector<std::string> parts;
  for (const NcclWay& w : c.ways) {
    std::string what = w.algo.empty() ? fmt::format("p2p, {} ch", w.channels)
                                      : fmt::format("{}/{}, {} ch", w.algo, w.proto, w.channels);
    parts.push_back(c.ways.size() == 1 ? what : fmt::format("{} x{}", what, w.operations));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

TraceReport analyse(const TraceRun& run) {
  TraceReport report;
  report.meta = run.meta;
  report.saved = run.saved;
  report.saved_warnings = run.warnings;
  report.warnings = run.warnings;
  const Collective c = run.meta.collective;
  const DataType t = run.meta.dtype;
  // A GPU is a host's: the same bus id on two hosts (an MPI run) is two GPUs.
  std::set<std::string> hosts;
  std::vector<std::string> gpus;
  for (const RankRun& r : run.ranks) {
    gpus.push_back(r.host + "/" + r.bus_id);
    hosts.insert(r.host);
  }
  report.placement = workers::summarize_placement(gpus);
  for (const RankRun& r : run.ranks) {
    report.gpus.push_back(hosts.size() > 1 ? fmt::format("rank {}: {} GPU {} ({}, {})", r.rank,
                                                         r.host, r.device, r.bus_id, r.gpu_name)
                                           : fmt::format("rank {}: GPU {} ({}, {})", r.rank,
                                                         r.device, r.bus_id, r.gpu_name));
    if (std::find(report.plugin_status.begin(), report.plugin_status.end(), r.plugin_status) ==
        report.plugin_status.end()) {
      report.plugin_status.push_back(r.plugin_status);
    }
    if (!r.clock_note.empty() && std::find(report.clock_notes.begin(), report.clock_notes.end(),
                                           r.clock_note) == report.clock_notes.end()) {
      report.clock_notes.push_back(r.clock_note);
    }
    const RecordSet& rs = r.records;
    report.records += rs.gpu.size() + rs.api.size() + rs.stream_waits.size() + rs.events.size() +
                      rs.operations.size() + rs.ranges.size();
  }
  for (uint64_t bytes : run.meta.sizes)
    report.sizes.push_back(size_row(run, bytes, c, t));
  report.splits = split_rows(run, report);
  report.scope = scope_rows(run);
  bool unmatched = false, dropped = false;
  for (const RankRun& r : run.ranks)
    dropped = dropped || r.records.dropped_records > 0;
  for (const std::string& w : report.warnings)
    unmatched = unmatched || w.find(": operation ") != std::string::npos;
  if (!run.warnings.empty()) {
    report.advice.push_back(
        "a record file was cut short, as a run killed while writing leaves it: the figures "
        "above leave its last record out; run the trace again for a whole one");
  }
  if (dropped || unmatched) {
    report.advice.push_back(
        "CUPTI's records of some operations are missing, so their completion split is left out "
        "(the collective's own times, from CUDA events, are whole): run again with fewer "
        "measured operations per size (--iters) so that CUPTI's buffers hold every record");
  }
  const size_t keep = kMaxWarnings + run.warnings.size();
  if (report.warnings.size() > keep) {
    const size_t more = report.warnings.size() - keep;
    report.warnings.resize(keep);
    report.warnings.push_back(fmt::format("... and {} more warnings like these", more));
  }
  return report;
}

}  // namespace commtool::tracing
