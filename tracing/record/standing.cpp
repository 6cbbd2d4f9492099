#include "tracing/record/standing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <map>

#include "probes/base/error.hpp"

namespace commtool::record {

using nccl_profiler::OpKind;

OpRef op_ref(const nccl_profiler::StartLine& s) {
  return {s.index, s.kind, s.seq, s.func, s.count, s.datatype, s.peer};
}

const char* to_string(ProcessState s) {
  switch (s) {
    case ProcessState::kRunning:
      return "running";
    case ProcessState::kExited:
      return "exited";
    case ProcessState::kStopped:
      return "stopped";
    case ProcessState::kSilent:
      return "silent";
  }
  return "?";
}

namespace {

double seconds_between(int64_t from_ns, int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

ProcessStanding process_standing(const ProcessRecord& p, const StandingOptions& o) {
  ProcessStanding s;
  s.file = p.file;
  if (p.proc) {
    s.host = p.proc->host;
    s.pid = p.proc->pid;
  }
  s.dropped_lines = p.dropped_lines;
  if (p.first_drop_ns) s.first_drop_wall_ns = p.wall_ns(*p.first_drop_ns);
  bool open = false;  // something in flight or not finalised
  for (const RankRecord& r : p.ranks) {
    s.in_flight += r.in_flight.size();
    open = open || !r.in_flight.empty() || !r.fin_ns;
  }
  if (!p.proc || p.lines <= 1) return s;  // kSilent
  if (p.last_alive_ns) s.last_alive_wall_ns = p.wall_ns(*p.last_alive_ns);
  const int64_t last_sign = s.last_alive_wall_ns.value_or(p.wall_ns(p.last_t_ns));
  s.quiet_s = std::max(0.0, seconds_between(last_sign, o.now_wall_ns));
  if (!o.job_ended && s.quiet_s <= o.heartbeat_lapse_s) {
    s.state = ProcessState::kRunning;
  } else {
    s.state = open ? ProcessState::kStopped : ProcessState::kExited;
  }
  return s;
}

RankStanding rank_standing(const RankRecord& r, const ProcessRecord& p, size_t process) {
  RankStanding s;
  s.rank = r.rank;
  s.process = process;
  s.started = r.started;
  s.completed = r.completed;
  s.unverified = r.unverified;
  s.forgotten = r.forgotten;
  s.finalized = r.fin_ns.has_value();
  if (r.last_ended) {
    const nccl_profiler::EndLine& e = *r.last_ended;
    s.last_ended = op_ref(e.op);
    s.last_ended_complete = e.complete;
    s.last_ended_wall_ns = p.wall_ns(e.seen ? e.seen->end_ns : e.enqueue.end_ns);
  }
  for (const auto& [index, start] : r.in_flight)
    s.in_flight.push_back({op_ref(start), p.wall_ns(start.t_ns)});
  return s;
}

crossrank::Call call_of(const nccl_profiler::StartLine& s, int root) {
  crossrank::Call c;
  c.func = s.func;
  c.p2p = s.kind == OpKind::kP2p;
  c.count = s.count;
  c.datatype = s.datatype;
  if (c.p2p) {
    c.peer = s.peer;
  } else if (root >= 0 && (s.func == "Broadcast" || s.func == "Reduce")) {
    c.root = root;
  }
  return c;
}

// The rank's process as far as the recording (its heartbeat) or the monitor can tell.
crossrank::Life life_of(const ProcessStanding& p, const StandingOptions& o) {
  if (auto it = o.lives.find({p.host, p.pid}); it != o.lives.end()) return it->second;
  switch (p.state) {
    case ProcessState::kRunning:
      return {crossrank::Liveness::kRunning, ""};
    case ProcessState::kStopped:
      return {crossrank::Liveness::kSilent,
              fmt::format("no heartbeat for {:.0f} s", std::max(1.0, p.quiet_s))};
    case ProcessState::kExited:
    case ProcessState::kSilent:
      break;
  }
  return {};
}

// One rank of the cross-rank job: its ended operations (all of them, or the latest the monitor
// keeps) and those in flight, by index.
crossrank::Rank job_rank(crossrank::Job& job, const RankRecord& r, const ProcessRecord& p,
                         const ProcessStanding& ps, const StandingOptions& o) {
  crossrank::Rank out;
  out.rank = r.rank;
  out.where = ps.host.empty() ? p.file : fmt::format("{} pid {}", ps.host, ps.pid);
  out.finished = r.fin_ns.has_value();
  out.life = life_of(ps, o);
  const auto ended = [&](const nccl_profiler::EndLine& e) {
    out.ops.push_back({.seq = e.op.index,
                       .call = job.call(call_of(e.op, e.root)),
                       .site = crossrank::kNoSite,
                       .state = crossrank::OpState::kCompleted,
                       .start_wall_ns = p.wall_ns(e.op.t_ns)});
  };
  for (const nccl_profiler::EndLine& e : r.ops)
    ended(e);
  for (const nccl_profiler::EndLine& e : r.recent)
    ended(e);
  for (const auto& [index, start] : r.in_flight) {
    out.ops.push_back({.seq = index,
                       .call = job.call(call_of(start, -1)),
                       .site = crossrank::kNoSite,
                       .state = crossrank::OpState::kStarted,
                       .start_wall_ns = p.wall_ns(start.t_ns)});
  }
  return out;
}

}  // namespace

Standing where_everyone_stands(const Recording& rec, const StandingOptions& options) {
  Standing s;
  s.now_wall_ns = options.now_wall_ns;
  s.warnings = rec.warnings;
  std::map<uint64_t, CommStanding> comms;
  for (size_t i = 0; i < rec.processes.size(); ++i) {
    const ProcessRecord& p = rec.processes[i];
    s.processes.push_back(process_standing(p, options));
    for (const RankRecord& r : p.ranks) {
      CommStanding& c = comms[r.comm];
      c.comm = r.comm;
      if (r.init) {
        c.nranks = std::max(c.nranks, r.init->nranks);
        if (c.name.empty()) c.name = r.init->name;
      }
      c.ranks.push_back(rank_standing(r, p, i));
      c.in_flight += r.in_flight.size();
      s.completed += r.completed;
      s.unverified += r.unverified;
    }
  }
  for (auto& [id, c] : comms) {
    std::sort(c.ranks.begin(), c.ranks.end(),
              [](const RankStanding& a, const RankStanding& b) { return a.rank < b.rank; });
    for (int r = 0, next = 0; r < c.nranks; ++r) {
      while (next < static_cast<int>(c.ranks.size()) && c.ranks[next].rank < r)
        ++next;
      if (next == static_cast<int>(c.ranks.size()) || c.ranks[next].rank != r) {
        c.unseen.push_back(r);
      }
    }
    s.in_flight += c.in_flight;
    s.comms.push_back(std::move(c));
  }
  s.job.stuck = options.stuck;
  std::map<uint64_t, size_t> group_of;
  for (const CommStanding& c : s.comms) {
    group_of[c.comm] = s.job.groups.size();
    s.job.groups.push_back({.id = fmt::format("{:016x}", c.comm),
                            .name = c.name,
                            .nranks = c.nranks,
                            .kind = "communicator",
                            .position = "op ",
                            .ranks = {}});
  }
  for (size_t i = 0; i < rec.processes.size(); ++i) {
    const ProcessRecord& p = rec.processes[i];
    for (const RankRecord& r : p.ranks) {
      s.job.groups[group_of[r.comm]].ranks.push_back(
          job_rank(s.job, r, p, s.processes[i], options));
    }
  }
  crossrank::normalise(s.job);
  s.verdict = crossrank::analyse(s.job);
  return s;
}

}  // namespace commtool::record
