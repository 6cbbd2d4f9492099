// render_standing_text (standing.hpp): the verdict sentences first, then the detail.
#include <fmt/format.h>

#include <algorithm>

#include "probes/base/error.hpp"
#include "tracing/record/record_text.hpp"
#include "tracing/record/standing.hpp"

namespace commtool::record {

namespace {

std::string process_label(const ProcessStanding& p) {
  if (p.host.empty()) return p.file;
  return fmt::format("{} pid {}", excerpt(p.host, 60), p.pid);
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string field_value(const OpRef& op, const std::string& field) {
  if (field == "func") return excerpt(op.func, 40);
  if (field == "count") return fmt::format("{}", op.count);
  return excerpt(op.datatype, 40);
}

std::string mismatch_sentence(const CommStanding& c, const Mismatch& m) {
  return fmt::format(
      "MISMATCH on communicator {}: operation {} has {} {} at rank {} but {} {} at rank {}: NCCL "
      "waits forever or mixes data",
      comm_label(c.comm, c.name), m.index, m.field, field_value(m.a, m.field), m.rank_a, m.field,
      field_value(m.b, m.field), m.rank_b);
}

// "its last op was AllReduce #1041, ended at 12:03:04" for one rank behind; per rank for more.
std::string last_ops_of(const CommStanding& c, const std::vector<int>& ranks) {
  std::string out;
  for (int rank : ranks) {
    const RankStanding* r = nullptr;
    for (const RankStanding& x : c.ranks)
      if (x.rank == rank) r = &x;
    const std::string who = ranks.size() == 1 ? "its" : fmt::format("rank {}'s", rank);
    if (!out.empty()) out += "; ";
    if (r == nullptr || !r->last_ended) {
      out += fmt::format("{} no operation ended", ranks.size() == 1 ? "it had" : who);
    } else {
      out += fmt::format("{} last op was {}, ended at {}{}", who, op_label(*r->last_ended),
                         utc_clock(r->last_ended_wall_ns),
                         r->last_ended_complete ? "" : " (unverified)");
    }
  }
  return out;
}

std::string holdup_sentence(const Standing& s, const CommStanding& c, const Holdup& h) {
  const std::string where = fmt::format("communicator {} ({} ranks)", comm_label(c.comm, c.name),
                                        c.nranks > 0 ? fmt::format("{}", c.nranks) : "?");
  const std::string waited = op_label(h.waited);
  const std::string waiting =
      fmt::format("{} {} waited in {} since {} ({})", ranks_phrase(h.waiting),
                  h.waiting.size() == 1 ? "has" : "have", waited, utc_clock(h.since_wall_ns),
                  seconds_text(static_cast<double>(s.now_wall_ns - h.since_wall_ns) / 1e9));
  if (!h.behind.empty()) {
    return fmt::format("{}: {} never started {} - {}; {}", where, ranks_phrase(h.behind), waited,
                       last_ops_of(c, h.behind), waiting);
  }
  for (const Mismatch& m : c.mismatches) {
    if (m.index == h.waited.index) {
      return fmt::format("{}: {}; the ranks disagree on what it is (the MISMATCH above)", where,
                         waiting);
    }
  }
  std::vector<int> stopped;  // waiting ranks whose process is gone: they will never finish
  for (const RankStanding& r : c.ranks) {
    if (s.processes[r.process].state == ProcessState::kStopped &&
        std::find(h.waiting.begin(), h.waiting.end(), r.rank) != h.waiting.end()) {
      stopped.push_back(r.rank);
    }
  }
  if (!stopped.empty()) {
    return fmt::format(
        "{}: {}; {} started it in a process that stopped (above) and will never "
        "finish it",
        where, waiting, ranks_phrase(stopped));
  }
  if (!c.unseen.empty()) {
    return fmt::format(
        "{}: {}; {} never recorded on it (no plugin in its process, or it never "
        "joined)",
        where, waiting, ranks_phrase(c.unseen));
  }
  return fmt::format(
      "{}: {}; every recorded rank started it, so none is behind: what holds it "
      "is below the NCCL calls (a GPU, a link, the network)",
      where, waiting);
}

// "rank 1 of communicator 00000000deadbeef" for each rank the process holds.
std::string ranks_held(const Standing& s, size_t process) {
  std::vector<std::string> held;
  for (const CommStanding& c : s.comms) {
    for (const RankStanding& r : c.ranks) {
      if (r.process == process) {
        held.push_back(fmt::format("rank {} of {}", r.rank, comm_label(c.comm, c.name)));
      }
    }
  }
  if (held.empty()) return "";
  std::string out = " (";
  for (size_t i = 0; i < held.size(); ++i)
    out += (i > 0 ? ", " : "") + held[i];
  return out + ")";
}

std::string verdict(const Standing& s) {
  std::string out;
  for (const CommStanding& c : s.comms)
    for (const Mismatch& m : c.mismatches)
      out += mismatch_sentence(c, m) + "\n";
  for (size_t i = 0; i < s.processes.size(); ++i) {
    const ProcessStanding& p = s.processes[i];
    if (p.state != ProcessState::kStopped) continue;
    out += fmt::format(
        "STOPPED: process {}{} has sent no heartbeat for {}{}: it died or was killed\n",
        process_label(p), ranks_held(s, i), seconds_text(p.quiet_s),
        p.in_flight > 0
            ? fmt::format(" with {} in flight", plural(p.in_flight, "operation", "operations"))
            : " without finalising its communicators");
  }
  for (const CommStanding& c : s.comms) {
    if (c.holdup) {
      out += holdup_sentence(s, c, *c.holdup) + "\n";
    } else if (!c.unseen.empty()) {
      out += fmt::format(
          "communicator {} ({} ranks): {} never recorded on it (no plugin in its "
          "process, or it never joined)\n",
          comm_label(c.comm, c.name), c.nranks, ranks_phrase(c.unseen));
    }
  }
  if (out.empty()) {
    out = s.processes.empty() ? "No process has recorded anything yet.\n"
                              : "Nothing in flight: every operation started has ended.\n";
  }
  return out;
}

std::string rank_line(const Standing& s, const RankStanding& r) {
  std::string out = fmt::format("    rank {}  {}: {} completed", r.rank,
                                process_label(s.processes[r.process]), r.completed);
  if (r.unverified > 0) out += fmt::format(", {} unverified", r.unverified);
  if (r.last_ended) {
    out +=
        fmt::format("; last ended {} (op {}, {} x {}) at {}{}", op_label(*r.last_ended),
                    r.last_ended->index, r.last_ended->count, excerpt(r.last_ended->datatype, 40),
                    utc_clock(r.last_ended_wall_ns), r.last_ended_complete ? "" : " (unverified)");
  }
  if (r.in_flight.empty()) {
    out += "; nothing in flight";
  } else {
    const InFlightOp& op = r.in_flight.front();
    out +=
        fmt::format("; in flight: {} since {} ({})", op_label(op.op), utc_clock(op.since_wall_ns),
                    seconds_text(static_cast<double>(s.now_wall_ns - op.since_wall_ns) / 1e9));
    if (r.in_flight.size() > 1) out += fmt::format(" and {} after it", r.in_flight.size() - 1);
  }
  if (r.forgotten > 0) out += fmt::format("; {} started without an end line", r.forgotten);
  if (r.finalized) out += "; finalised";
  return out + "\n";
}

std::string process_line(const ProcessStanding& p) {
  std::string out = fmt::format("  {}: {}", process_label(p), to_string(p.state));
  if (p.last_alive_wall_ns) {
    out += fmt::format(", last heartbeat {} ({} before now)", utc_clock(*p.last_alive_wall_ns),
                       seconds_text(p.quiet_s));
  }
  if (p.in_flight > 0) out += fmt::format(", {} in flight", p.in_flight);
  return out + "\n";
}

}  // namespace

std::string render_standing_text(const Standing& s) {
  std::string out = verdict(s);
  out += fmt::format(
      "({} in flight, {} completed, {} unverified; {} communicator(s), {} process(es); now {})\n",
      s.in_flight, s.completed, s.unverified, s.comms.size(), s.processes.size(),
      utc_date_time(s.now_wall_ns));
  for (const std::string& w : s.warnings)
    out += "WARNING: " + w + "\n";
  for (const ProcessStanding& p : s.processes) {
    if (p.dropped_lines == 0) continue;
    out += fmt::format(
        "WARNING: process {} lost {} lines{} (the plugin's buffer was full): an operation whose "
        "end line was lost looks in flight\n",
        process_label(p), p.dropped_lines,
        p.first_drop_wall_ns ? " since " + utc_clock(*p.first_drop_wall_ns) : "");
  }
  for (const CommStanding& c : s.comms) {
    std::vector<int> recorded;
    for (const RankStanding& r : c.ranks)
      recorded.push_back(r.rank);
    out += fmt::format("\ncommunicator {}: {} ranks, recorded: {}\n", comm_label(c.comm, c.name),
                       c.nranks > 0 ? fmt::format("{}", c.nranks) : "?", rank_list(recorded));
    for (const RankStanding& r : c.ranks)
      out += rank_line(s, r);
  }
  if (!s.processes.empty()) out += "\nprocesses:\n";
  for (const ProcessStanding& p : s.processes)
    out += process_line(p);
  return out;
}

}  // namespace commtool::record
