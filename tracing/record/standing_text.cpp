// render_standing_text (standing.hpp): the verdict sentences first, then the detail.
#include <fmt/format.h>

#include <algorithm>

#include "probes/base/error.hpp"
#include "probes/base/tool_packages.hpp"
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
  if (!s.verdict.findings.empty()) return crossrank::render_text(s.job, s.verdict);
  // Nothing the ranks disagree on or wait for: what is left to say is about processes.
  std::string out;
  for (size_t i = 0; i < s.processes.size(); ++i) {
    const ProcessStanding& p = s.processes[i];
    if (p.state != ProcessState::kStopped) continue;
    out += fmt::format(
        "STOPPED: process {}{} has sent no heartbeat for {}{}: it died, was killed or is "
        "frozen\n",
        process_label(p), ranks_held(s, i), seconds_text(p.quiet_s),
        p.in_flight > 0
            ? fmt::format(" with {} in flight", plural(p.in_flight, "operation", "operations"))
            : " without finalising its communicators");
    out += p.host.empty()
               ? "  what to do: find how its process ended in the job's log (its exit status and "
                 "last lines); `dmesg` on its host shows an out-of-memory kill or an Xid error\n"
               : fmt::format(
                     "  what to do: on {}, `ps -o stat,wchan -p {}` ({}) says whether it still "
                     "runs (T: stopped, resume it with `kill -CONT {}`; D: stuck in the kernel); "
                     "if it is gone, the job's log has its exit status and `dmesg` an "
                     "out-of-memory kill or an Xid error\n",
                     excerpt(p.host, 60), p.pid, tools::kProcps, p.pid);
  }
  if (!out.empty()) return out;
  if (s.processes.empty()) return "No process has recorded anything yet.\n";
  if (s.in_flight > 0) {
    return fmt::format("{} in flight, none stuck so far, and no rank disagrees with another.\n",
                       plural(s.in_flight, "operation", "operations"));
  }
  return "Nothing in flight: every operation started has ended.\n";
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
    out += fmt::format("\ncommunicator {}: {}, recorded: {}\n", comm_label(c.comm, c.name),
                       c.nranks > 0 ? fmt::format("{} ranks", c.nranks) : "rank count unknown",
                       rank_list(recorded));
    for (const RankStanding& r : c.ranks)
      out += rank_line(s, r);
  }
  if (!s.processes.empty()) out += "\nprocesses:\n";
  for (const ProcessStanding& p : s.processes)
    out += process_line(p);
  return out;
}

}  // namespace commtool::record
