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

// How far a rank got: one past the highest operation index it started or ended.
uint64_t reached(const RankStanding& r) {
  uint64_t next = r.started;  // indexes count from 0, so start lines alone say this without drops
  if (r.last_ended) next = std::max(next, r.last_ended->index + 1);
  if (!r.in_flight.empty()) next = std::max(next, r.in_flight.back().op.index + 1);
  return next;
}

std::optional<Holdup> find_holdup(const CommStanding& c) {
  std::optional<uint64_t> oldest;
  for (const RankStanding& r : c.ranks) {
    if (!r.in_flight.empty()) {
      oldest = std::min(oldest.value_or(UINT64_MAX), r.in_flight.front().op.index);
    }
  }
  if (!oldest) return std::nullopt;
  Holdup h;
  bool first = true;
  for (const RankStanding& r : c.ranks) {
    auto it = std::find_if(r.in_flight.begin(), r.in_flight.end(),
                           [&](const InFlightOp& op) { return op.op.index == *oldest; });
    if (it != r.in_flight.end()) {
      if (first) h.waited = it->op;
      h.since_wall_ns = first ? it->since_wall_ns : std::min(h.since_wall_ns, it->since_wall_ns);
      first = false;
      h.waiting.push_back(r.rank);
    } else if (reached(r) <= *oldest) {
      h.behind.push_back(r.rank);
    }
  }
  return h;
}

// The first field in which two operations at one index differ; empty when they agree. Only
// collectives are compared: the two sides of a point-to-point exchange differ by design.
std::string differing_field(const OpRef& a, const OpRef& b) {
  if (a.kind != OpKind::kCollective || b.kind != OpKind::kCollective) return "";
  if (a.func != b.func) return "func";
  if (a.count != b.count) return "count";
  if (a.datatype != b.datatype) return "datatype";
  return "";
}

std::vector<Mismatch> find_mismatches(const CommStanding& c) {
  std::map<uint64_t, std::vector<std::pair<int, OpRef>>> by_index;
  for (const RankStanding& r : c.ranks) {
    if (r.last_ended) by_index[r.last_ended->index].emplace_back(r.rank, *r.last_ended);
    for (const InFlightOp& op : r.in_flight)
      by_index[op.op.index].emplace_back(r.rank, op.op);
  }
  std::vector<Mismatch> out;
  for (const auto& [index, ops] : by_index) {
    for (size_t i = 1; i < ops.size(); ++i) {
      std::string field = differing_field(ops[0].second, ops[i].second);
      if (field.empty()) continue;
      out.push_back(
          {index, std::move(field), ops[0].first, ops[0].second, ops[i].first, ops[i].second});
      break;  // one per operation: the first rank that disagrees with the lowest
    }
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
    c.holdup = find_holdup(c);
    c.mismatches = find_mismatches(c);
    s.in_flight += c.in_flight;
    s.comms.push_back(std::move(c));
  }
  return s;
}

}  // namespace commtool::record
