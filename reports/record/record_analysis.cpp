// analyse_recording and the GPU clock map (record_report.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include "probes/base/error.hpp"
#include "probes/base/tool_packages.hpp"
#include "reports/record/record_report.hpp"
#include "reports/record/record_split.hpp"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collectives.hpp"
#include "tracing/record/record_text.hpp"

namespace commtool::reports {

using nccl_profiler::EndLine;
using record::ProcessRecord;
using record::Recording;

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kHang:
      return "hang";
    case Verdict::kFault:
      return "fault";
    case Verdict::kStraggler:
      return "straggler";
    case Verdict::kNone:
      return "none";
    case Verdict::kNoOperations:
      return "no-operations";
  }
  return "?";
}

namespace {

double us(int64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

int64_t window_of(int64_t gpu_ns) {
  return gpu_ns / kClockWindowNs;  // GPU times are never negative (parse_line)
}

double median_of(std::vector<double> v) {
  return measure::summarize(std::move(v)).median;
}

// Bytes per element of an NCCL type name as the profiler gives it ("ncclFloat32"); none for a
// name commtool does not know.
std::optional<size_t> nccl_type_size(const std::string& name) {
  if (name == "ncclFloat8e4m3" || name == "ncclFloat8e5m2") return 1;
  if (!name.starts_with("nccl")) return std::nullopt;
  const auto t = tracing::parse_data_type(name.substr(4));
  if (!t) return std::nullopt;
  return tracing::type_size(*t);
}

// nccl-tests' size of a collective of `count` elements at n ranks: the larger of its send
// and receive buffers (the count NCCL is given is per rank for allgather, reducescatter and
// alltoall).
std::optional<uint64_t> nccl_tests_bytes(const std::string& func, uint64_t count,
                                         const std::string& datatype, int nranks) {
  const auto size = nccl_type_size(datatype);
  const auto c = tracing::parse_collective(func);
  if (!size || !c || nranks < 1) return std::nullopt;
  const bool per_rank = *c == tracing::Collective::kAllGather ||
                        *c == tracing::Collective::kReduceScatter ||
                        *c == tracing::Collective::kAllToAll;
  return count * *size * (per_rank ? static_cast<uint64_t>(nranks) : 1);
}

std::string process_name(const ProcessRecord& p) {
  if (!p.proc) return p.file;
  return fmt::format("{} pid {}", excerpt(p.proc->host, 60), p.proc->pid);
}

// "now" for the standing: when the launcher saw the hang, else when the job ended, else the
// latest time the recording holds.
record::StandingOptions standing_options(const Recording& rec) {
  record::StandingOptions o;
  // A recording read afterwards is of a job that hung or is over (or was copied away from its
  // launcher): what is in flight in it is stuck.
  o.stuck = true;
  if (rec.meta && rec.meta->hang) {
    o.now_wall_ns = record::launcher_wall_ns(*rec.meta, rec.meta->hang->monotonic_ns);
    return o;
  }
  if (rec.meta && rec.meta->ended) {
    o.now_wall_ns = rec.meta->started_realtime_ns +
                    static_cast<int64_t>(std::llround(rec.meta->ended->wall_s * 1e9));
    o.job_ended = true;
    return o;
  }
  for (const ProcessRecord& p : rec.processes)
    o.now_wall_ns = std::max(o.now_wall_ns, p.wall_ns(p.last_t_ns));
  return o;
}

using RowKey = std::tuple<uint64_t, std::string, uint64_t, std::string>;  // comm, func, count, type

struct RowData {
  OpRow row;
  std::vector<double> api, enqueue;
  std::vector<double> input_wait, kernel, exposed_wait;  // record --cupti
  std::unordered_map<uint64_t, double> slowest_gpu_us;   // by index
  std::map<tracing::NcclWay, int> ways;                  // operations per way (count unset)
};

struct RankData {
  RankRow row;
  std::vector<double> gpu, lag;
};

// Per communicator: each operation's mapped GPU starts (wall ns) by rank, and its ranks' hosts.
struct CommStarts {
  std::map<uint64_t, std::vector<std::pair<int, int64_t>>> by_index;
  std::set<std::string> hosts;
  std::string name;
  std::map<std::string, std::set<int>> ranks_by_gpu;  // the GPUs the comm lines named
};

// The first GPU two or more of the communicator's ranks share, with those ranks.
std::optional<std::pair<std::string, std::set<int>>> shared_gpu(const CommStarts& c) {
  for (const auto& [gpu, ranks] : c.ranks_by_gpu)
    if (ranks.size() > 1) return std::pair{gpu, ranks};
  return std::nullopt;
}

// `verified`: the end line says complete and its GPU stamps are possible.
void add_operation(RowData& d, const EndLine& e, bool verified) {
  ++d.row.rank_operations;
  ++d.ways[tracing::NcclWay{e.algo, e.proto, e.channels, 0}];
  double& slowest = d.slowest_gpu_us.try_emplace(e.op.index, -1.0).first->second;
  // An unverified operation's times are partial (its enqueue [start, start] when the plugin
  // gave up first, GPU time only of the channels that reported) or impossible: counted, never
  // timed.
  if (!verified) {
    ++d.row.unverified;
    return;
  }
  if (e.api) d.api.push_back(us(e.api->end_ns - e.api->start_ns));
  d.enqueue.push_back(us(e.enqueue.end_ns - e.enqueue.start_ns));
  if (e.gpu) slowest = std::max(slowest, us(e.gpu->end_ns - e.gpu->start_ns));
}

OpRow finish_row(RowData& d) {
  OpRow row = std::move(d.row);
  row.operations = static_cast<int>(d.slowest_gpu_us.size());
  row.api_us = measure::summarize(std::move(d.api));
  row.enqueue_us = measure::summarize(std::move(d.enqueue));
  std::vector<double> gpu;
  for (const auto& [index, t] : d.slowest_gpu_us)
    if (t >= 0) gpu.push_back(t);
  row.gpu_us = measure::summarize(std::move(gpu));
  row.split_operations = static_cast<int>(d.kernel.size());
  row.input_wait_us = measure::summarize(std::move(d.input_wait));
  row.kernel_us = measure::summarize(std::move(d.kernel));
  row.exposed_wait_us = measure::summarize(std::move(d.exposed_wait));
  const auto c = tracing::parse_collective(row.func);
  if (row.bytes && c && row.gpu_us.n > 0) {
    row.busbw_gbps =
        tracing::busbw_gbps(*c, row.nranks, static_cast<double>(*row.bytes), row.gpu_us.median);
  }
  for (const auto& [way, n] : d.ways) {
    tracing::NcclWay w = way;
    w.operations = n;
    row.nccl.ways.push_back(w);
  }
  std::stable_sort(row.nccl.ways.begin(), row.nccl.ways.end(),
                   [](const auto& a, const auto& b) { return a.operations > b.operations; });
  return row;
}

// A rank that starts its collectives late is late before them: what its process does between
// NCCL calls, or its GPU; across hosts the clocks come first.
std::string straggler_advice(int rank, const std::string& process, bool cross_host) {
  const size_t at = process.rfind(" pid ");
  const std::string pid = at == std::string::npos ? "PID" : process.substr(at + 5);
  return fmt::format(
      "{}look at what rank {} ({}) does between its NCCL calls: a busy or shared core or its "
      "input pipeline (`top -H -p {}`, {}; `py-spy dump --pid {}` for Python, {}), or a "
      "throttled GPU (`nvidia-smi -q -d PERFORMANCE`; {})",
      cross_host ? fmt::format("the ranks are on several hosts: first check their clocks agree "
                               "(`chronyc tracking`, {}); then ",
                               tools::kChrony)
                 : "",
      rank, process, pid, tools::kProcps, pid, tools::kPySpy, tools::kNvidiaSmi);
}

void find_stragglers(const std::map<uint64_t, CommStarts>& starts,
                     std::map<std::pair<uint64_t, int>, RankData>& ranks,
                     std::vector<Straggler>& out) {
  for (const auto& [comm, c] : starts) {
    const double threshold = c.hosts.size() > 1 ? kCrossHostLagUs : kStragglerLagUs;
    std::map<int, std::vector<double>> lags;
    std::map<int, int> last;
    int compared = 0;
    for (const auto& [index, by_rank] : c.by_index) {
      if (by_rank.size() < 2) continue;
      ++compared;
      int64_t first = by_rank[0].second;
      for (const auto& [rank, t] : by_rank)
        first = std::min(first, t);
      const auto latest = std::max_element(by_rank.begin(), by_rank.end(),
                                           [](auto& a, auto& b) { return a.second < b.second; });
      for (const auto& [rank, t] : by_rank)
        lags[rank].push_back(us(t - first));
      if (us(latest->second - first) > threshold) ++last[latest->first];
    }
    // Ranks that share a GPU take turns on it: who starts last says nothing of a straggler.
    const bool time_sliced = shared_gpu(c).has_value();
    for (auto& [rank, v] : lags) {
      RankData& d = ranks[{comm, rank}];
      d.row.last_to_start = last[rank];
      const double max_lag = *std::max_element(v.begin(), v.end());
      d.lag = v;
      const double median = median_of(std::move(v));
      const int needed = std::max(kMinStragglerOps, (compared + 1) / 2);
      if (!time_sliced && last[rank] >= needed && median > threshold) {
        out.push_back({comm, c.name, rank, d.row.process, last[rank], compared, median, max_lag,
                       threshold, straggler_advice(rank, d.row.process, c.hosts.size() > 1)});
      }
    }
  }
}

// What the process's CUPTI layer wrote about itself; none when it wrote nothing and none was
// asked for.
std::optional<CuptiStatus> cupti_status(const ProcessRecord& p, bool asked) {
  CuptiStatus s;
  s.process = process_name(p);
  if (p.cupti.states.empty()) {
    // A process without a communicator (torchrun's own, a data loader) has nothing to split.
    if (!asked || p.ranks.empty()) return std::nullopt;
    s.state = "absent";
    s.why =
        "the CUPTI layer never started (the process did not use CUDA, or another tool's "
        "injection took CUDA_INJECTION64_PATH)";
    return s;
  }
  s.state = to_string(p.cupti.states.front().state);
  for (const nccl_profiler::CuptiLine& l : p.cupti.states) {
    s.dropped = std::max(s.dropped, l.dropped);
    if (l.state == nccl_profiler::CuptiState::kOff) {
      s.state = "off";
      s.why = l.why;
    } else if (l.state == nccl_profiler::CuptiState::kYielded && !s.yielded_wall_ns) {
      s.state = "yielded";
      s.why = l.why;
      s.yielded_wall_ns = p.wall_ns(l.t_ns);
    }
  }
  return s;
}

// The host time from which the process's CUPTI layer recorded nothing: when it yielded.
std::optional<int64_t> cupti_end_ns(const ProcessRecord& p) {
  for (const nccl_profiler::CuptiLine& l : p.cupti.states)
    if (l.state == nccl_profiler::CuptiState::kYielded) return l.t_ns;
  return std::nullopt;
}

void cupti_warnings(const RecordingReport& r, std::vector<std::string>& out) {
  for (const CuptiStatus& s : r.cupti) {
    if (s.state == "absent" || s.state == "off") {
      out.push_back(fmt::format("{}: no CUPTI split: {}", s.process, excerpt(s.why, 300)));
    } else if (s.state == "yielded") {
      out.push_back(fmt::format(
          "{}: the CUPTI layer gave CUPTI up to {} at {} (a profiler of the job's own asked "
          "for it): operations after that have no CUPTI split",
          s.process, excerpt(s.why, 200), record::utc_date_time(*s.yielded_wall_ns)));
    }
    if (s.dropped > 0) {
      out.push_back(
          fmt::format("{}: CUPTI dropped {} activity record(s): some splits may be "
                      "missing or short",
                      s.process, s.dropped));
    }
  }
}

std::string verdict_advice(const RecordingReport& r) {
  const record::Standing& s = r.standing;
  switch (r.verdict) {
    case Verdict::kHang:
    case Verdict::kFault:
      if (!s.verdict.findings.empty()) {
        return crossrank::finding_advice(s.job, s.verdict.findings.front());
      }
      return "see where every rank stood above: the ranks with operations in flight are the "
             "ones to look at; NCCL's RAS status (`ncclras`, with NCCL 2.24 and later) and "
             "NCCL's log (NCCL_DEBUG=INFO) say what holds them";
    case Verdict::kStraggler:
      return r.stragglers.front().advice;
    case Verdict::kNone:
      return "nothing to fix in the collectives; if the job was slow, compare these "
             "operations' busbw with `commtool trace` of the same collective and sizes on these "
             "GPUs";
    case Verdict::kNoOperations:
      if (s.processes.empty()) {
        return "check that the job uses NCCL at all, and that its processes got "
               "NCCL_PROFILER_PLUGIN (a launcher or container that starts them with a fresh "
               "environment drops it: pass it on, e.g. `mpirun -x NCCL_PROFILER_PLUGIN` or "
               "`docker run -e NCCL_PROFILER_PLUGIN`) and run NCCL 2.28 or later; record's "
               "standard error said what it saw";
      }
      return "check how the job ended (above): it may have stopped before its first collective; "
             "a job whose communicators have one rank each gives NCCL's profiler no operation to "
             "report: record it at two ranks or more";
  }
  return "";
}

}  // namespace

GpuClockMap::GpuClockMap(const ProcessRecord& p) {
  // Both stamps of an operation are pairs: its first channel's start and its last's stop.
  auto each_pair = [&p](auto&& f) {
    for (const record::RankRecord& r : p.ranks) {
      for (const EndLine& e : r.ops) {
        if (!e.gpu || !e.seen) continue;
        f(e.gpu->start_ns, e.seen->start_ns);
        f(e.gpu->end_ns, e.seen->end_ns);
      }
    }
  };
  each_pair([this](int64_t gpu, int64_t seen) {
    auto [it, fresh] = offsets_.try_emplace(window_of(gpu), seen - gpu);
    if (!fresh) it->second = std::min(it->second, seen - gpu);
    ++pairs_;
  });
  if (pairs_ == 0) return;
  std::vector<double> excess;
  excess.reserve(pairs_);
  each_pair([&](int64_t gpu, int64_t seen) {
    excess.push_back(us(seen - gpu - offsets_.at(window_of(gpu))));
  });
  median_excess_us_ = median_of(std::move(excess));
}

std::optional<int64_t> GpuClockMap::host_ns(int64_t gpu_ns) const {
  if (offsets_.empty()) return std::nullopt;
  const int64_t w = window_of(gpu_ns);
  auto after = offsets_.lower_bound(w);
  if (after != offsets_.end() && after->first == w) return gpu_ns + after->second;
  if (after == offsets_.begin()) return gpu_ns + after->second;
  auto before = std::prev(after);
  if (after == offsets_.end() || w - before->first <= after->first - w) {
    return gpu_ns + before->second;
  }
  return gpu_ns + after->second;
}

namespace {

// Each communicator's size, from its ranks' comm lines; a warning for each of one rank, whose
// collectives NCCL 2.28 gives a profiler no event for.
std::map<uint64_t, int> communicator_sizes(const Recording& rec,
                                           std::vector<std::string>& warnings) {
  std::map<uint64_t, int> nranks;
  for (const ProcessRecord& p : rec.processes)
    for (const record::RankRecord& r : p.ranks)
      if (r.init) nranks[r.comm] = std::max(nranks[r.comm], r.init->nranks);
  for (const auto& [comm, n] : nranks) {
    if (n != 1) continue;
    warnings.push_back(fmt::format(
        "communicator {} has one rank: NCCL 2.28 gives a profiler no event for its collectives "
        "(it copies without a kernel), so only its point-to-point operations are recorded",
        record::comm_label(comm, "")));
  }
  return nranks;
}

// What the processes' operations add up to, before the rows are finished.
struct Tally {
  std::map<RowKey, RowData> rows;
  std::map<std::pair<uint64_t, int>, RankData> ranks;
  std::map<uint64_t, CommStarts> starts;
  uint64_t impossible = 0;  // operations whose GPU stamps cannot be right
};

// One process's operations into the tally: each to its row (communicator, function, count,
// type) and rank, its GPU time mapped onto the host clock, split by CUPTI where it ran.
void tally_process(const ProcessRecord& p, const std::map<uint64_t, int>& nranks, bool cupti_asked,
                   Tally& t, RecordingReport& report) {
  const GpuClockMap clock(p);
  ClockFit& fit = report.clocks.emplace_back();
  fit.process = process_name(p);
  fit.pairs = clock.pairs();
  fit.windows = clock.windows();
  fit.median_excess_us = clock.median_excess_us();
  const std::optional<CuptiStatus> status = cupti_status(p, cupti_asked);
  if (status) report.cupti.push_back(*status);
  const std::optional<CuptiSplit> split =
      p.cupti.work.empty() ? std::nullopt : std::optional<CuptiSplit>(CuptiSplit(p.cupti));
  const std::optional<int64_t> cupti_end = cupti_end_ns(p);
  std::vector<double> leads;
  for (const record::RankRecord& r : p.ranks) {
    RankData& rank = t.ranks[{r.comm, r.rank}];
    rank.row.comm = r.comm;
    rank.row.rank = r.rank;
    rank.row.process = process_name(p);
    CommStarts& comm_starts = t.starts[r.comm];
    if (p.proc) comm_starts.hosts.insert(p.proc->host);
    if (r.init && comm_starts.name.empty()) comm_starts.name = r.init->name;
    if (r.init && !r.init->gpu.empty()) comm_starts.ranks_by_gpu[r.init->gpu].insert(r.rank);
    for (const EndLine& e : r.ops) {
      const nccl_profiler::StartLine& op = e.op;
      RowData& d = t.rows[{op.comm, op.func, op.count, op.datatype}];
      if (d.row.func.empty()) {
        d.row.comm = op.comm;
        d.row.comm_name = comm_starts.name;
        const auto size = nranks.find(op.comm);
        d.row.nranks = size != nranks.end() ? size->second : 0;
        d.row.func = op.func;
        d.row.count = op.count;
        d.row.datatype = op.datatype;
        d.row.bytes = nccl_tests_bytes(op.func, op.count, op.datatype, d.row.nranks);
      }
      // A mapped time is never early: the offset is the smallest report delay, so a mapped
      // GPU time is the true host time plus at most that delay. A kernel mapped to start
      // before NCCL enqueued its operation therefore carries a stamp that is not its own
      // (stale: NCCL 2.28 gave such stamps, tens of ms old, to point-to-point operations
      // sharing a channel in one launch).
      const std::optional<int64_t> gpu_start =
          e.gpu ? clock.host_ns(e.gpu->start_ns) : std::nullopt;
      const bool possible = !gpu_start || *gpu_start >= e.enqueue.start_ns;
      if (!possible) ++t.impossible;
      add_operation(d, e, e.complete && possible);
      if (split && gpu_start && e.complete && possible &&
          (!cupti_end || e.enqueue.start_ns < *cupti_end)) {
        const nccl_profiler::Interval mapped{*gpu_start, *clock.host_ns(e.gpu->end_ns)};
        if (const std::optional<OperationSplit> s = split->of(mapped)) {
          d.input_wait.push_back(us(s->input_wait_ns));
          d.kernel.push_back(us(s->kernel.end_ns - s->kernel.start_ns));
          d.exposed_wait.push_back(us(s->exposed_wait_ns));
          leads.push_back(us(s->kernel.start_ns - mapped.start_ns));
        }
      }
      ++rank.row.operations;
      if (!e.gpu || !e.complete || !possible) continue;
      rank.gpu.push_back(us(e.gpu->end_ns - e.gpu->start_ns));
      if (gpu_start) comm_starts.by_index[op.index].emplace_back(r.rank, p.wall_ns(*gpu_start));
    }
  }
  fit.cupti_matched = leads.size();
  if (!leads.empty()) fit.cupti_lead_us = median_of(std::move(leads));
}

// The first that holds: a hang, a fault the ranks show, a straggler, no operation at all.
Verdict verdict_of(const Recording& rec, const RecordingReport& report) {
  if ((rec.meta && rec.meta->hang) || report.standing.verdict.hang) return Verdict::kHang;
  if (report.standing.verdict.error()) return Verdict::kFault;
  if (!report.stragglers.empty()) return Verdict::kStraggler;
  if (report.standing.in_flight + report.standing.completed + report.standing.unverified == 0) {
    return Verdict::kNoOperations;
  }
  return report.verdict;
}

}  // namespace

RecordingReport analyse_recording(const Recording& rec) {
  RecordingReport report;
  report.dir = rec.dir.string();
  report.meta = rec.meta;
  report.warnings = rec.warnings;
  if (!rec.meta) {
    report.warnings.insert(report.warnings.begin(),
                           "no record.json: how the job was run and ended is unknown");
  }
  report.end_lines = rec.end_lines;
  report.standing = record::where_everyone_stands(rec, standing_options(rec));
  const std::map<uint64_t, int> nranks = communicator_sizes(rec, report.warnings);

  Tally t;
  const bool cupti_asked = rec.meta && rec.meta->cupti;
  for (const ProcessRecord& p : rec.processes)
    tally_process(p, nranks, cupti_asked, t, report);
  cupti_warnings(report, report.warnings);
  if (t.impossible > 0) {
    report.warnings.push_back(fmt::format(
        "{} operation(s) carry GPU stamps that cannot be right (the kernel mapped to start "
        "before NCCL enqueued it; seen with NCCL 2.28 on point-to-point operations sharing a "
        "launch): counted as unverified, not timed",
        t.impossible));
  }
  for (auto& [key, d] : t.rows)
    report.ops.push_back(finish_row(d));
  for (const auto& [comm, c] : t.starts) {
    if (const auto shared = shared_gpu(c)) {
      report.warnings.push_back(fmt::format(
          "communicator {}: ranks {} share GPU {}: their processes take turns on it, so their "
          "times are not those of separate GPUs and no rank is called a straggler",
          record::comm_label(comm, c.name), fmt::join(shared->second, ", "),
          excerpt(shared->first, 80)));
    }
  }
  find_stragglers(t.starts, t.ranks, report.stragglers);
  for (auto& [key, d] : t.ranks) {
    d.row.gpu_us = measure::summarize(std::move(d.gpu));
    d.row.start_lag_us = measure::summarize(std::move(d.lag));
    report.ranks.push_back(std::move(d.row));
  }
  report.verdict = verdict_of(rec, report);
  report.advice = verdict_advice(report);
  return report;
}

}  // namespace commtool::reports
