// render_text and the names it uses (crossrank.hpp): the verdict first, each finding one
// paragraph, ranks as sets.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "probes/base/error.hpp"
#include "probes/base/int_runs.hpp"
#include "probes/base/tool_packages.hpp"
#include "tracing/crossrank/crossrank.hpp"

namespace commtool::crossrank {

namespace {

size_t run_count(const std::vector<int>& ranks) {
  size_t n = 0;
  for (size_t i = 0; i < ranks.size(); ++i)
    n += i == 0 || ranks[i] != ranks[i - 1] + 1;
  return n;
}

// "0-3,8,10-12" of sorted, distinct ranks.
std::string runs(const std::vector<int>& ranks) {
  return int_runs(ranks, {.separator = ",", .pair_as_run = false});
}

std::string group_label(const Group& g) {
  std::string out = excerpt(g.id, 40);
  if (!g.name.empty()) out += fmt::format(" (\"{}\")", excerpt(g.name, 40));
  return out;
}

std::string where(const Group& g) {
  return fmt::format("{} {} ({})", g.kind, group_label(g),
                     g.nranks > 0 ? fmt::format("{} ranks", g.nranks) : "rank count unknown");
}

std::string position_text(const Group& g, uint64_t seq) {
  return fmt::format("{}{}", g.position, seq);
}

std::string since(const Finding& f) {
  return f.waiting_since_wall_ns > 0 ? " since " + utc_clock(f.waiting_since_wall_ns) + " UTC" : "";
}

std::string site_text(const Job& job, uint32_t site) {
  return site == kNoSite ? "" : fmt::format(" at {}", excerpt(job.site(site), 120));
}

std::string life_text(const Life& l) {
  std::string what;
  switch (l.state) {
    case Liveness::kUnknown:
      return "";
    case Liveness::kRunning:
      what = "is running";
      break;
    case Liveness::kStopped:
      what = "is stopped (a signal such as SIGSTOP, or a debugger)";
      break;
    case Liveness::kUninterruptible:
      what = "is in uninterruptible sleep (a driver or a file system holds it)";
      break;
    case Liveness::kZombie:
      what = "has exited and not been reaped (zombie)";
      break;
    case Liveness::kGone:
      what = "is gone";
      break;
    case Liveness::kSilent:
      what = "went silent (stopped, frozen or dead)";
      break;
  }
  if (l.detail.empty()) return what;
  // A state /proc gave says it all in its detail; a heartbeat's or an exit's adds to the state.
  if (l.state == Liveness::kGone || l.state == Liveness::kSilent) {
    return fmt::format("{}: {}", what, excerpt(l.detail, 120));
  }
  return "is " + excerpt(l.detail, 120);
}

// "; its process is stopped (...)" per group of ranks with a known state.
std::string lives_text(const Group& g, const Finding& f) {
  std::string out;
  for (const LifeGroup& l : f.lives) {
    const std::string life = life_text(l.life);
    if (life.empty()) continue;
    out += fmt::format("; {} {} {}",
                       f.ranks.size() == 1 ? "its" : ranks_text(l.ranks, g.nranks) + "'s",
                       l.ranks.size() == 1 ? "process" : "processes", life);
  }
  return out;
}

std::string last_text(const Job& job, const Group& g, const Finding& f) {
  std::string out;
  for (const LastDone& d : f.last) {
    const bool alone = f.last.size() == 1 && f.ranks.size() == 1;
    const std::string what =
        d.seq ? "last completed operation is " + call_text(job, g, *d.call, *d.seq)
              : std::string("completed no operation on it");
    out += alone ? "; its " + what : fmt::format("; {}: {}", ranks_text(d.ranks, g.nranks), what);
  }
  return out;
}

std::string waiting_text(const Job& job, const Group& g, const Finding& f) {
  return fmt::format(
      "{} {} in {}{}", ranks_text(f.waiting, g.nranks), f.waiting.size() == 1 ? "waits" : "wait",
      f.call ? call_text(job, g, *f.call, f.seq) : position_text(g, f.seq), since(f));
}

// "ranks 0,2 wait in it since 12:03:04 UTC", after the operation was named.
std::string waiting_in_it(const Group& g, const Finding& f) {
  return fmt::format("{} {} in{}", ranks_text(f.waiting, g.nranks),
                     f.waiting.size() == 1 ? "waits" : "wait", since(f));
}

}  // namespace

std::string finding_text(const Job& job, const Finding& f) {
  const Group& g = job.groups[f.group];
  const std::string op = f.call ? call_text(job, g, *f.call, f.seq) : position_text(g, f.seq);
  switch (f.rule) {
    case Rule::kMissing: {
      std::vector<int> ended;
      std::set_difference(f.ranks.begin(), f.ranks.end(), f.no_records.begin(), f.no_records.end(),
                          std::back_inserter(ended));
      std::string out = fmt::format("MISSING on {}: ", where(g));
      if (!f.no_records.empty()) {
        out += fmt::format("{} {} no records ({})", ranks_text(f.no_records, g.nranks),
                           f.no_records.size() == 1 ? "has" : "have", job.absent_means);
      }
      if (!ended.empty()) {
        if (!f.no_records.empty()) out += "; ";
        out += fmt::format("{} left without starting {}", ranks_text(ended, g.nranks), op);
      }
      if (!f.waiting.empty() && !ended.empty()) {
        out += fmt::format(", which {}: {} for what never comes", waiting_in_it(g, f),
                           f.waiting.size() == 1 ? "it waits" : "they wait");
      } else if (!f.waiting.empty()) {
        out += fmt::format(", while {}", waiting_text(job, g, f));
      }
      Finding ended_only = f;  // last operations and lives of the ranks that left
      ended_only.ranks = ended;
      std::erase_if(ended_only.last, [&](LastDone& d) {
        std::erase_if(d.ranks, [&](int r) {
          return std::binary_search(f.no_records.begin(), f.no_records.end(), r);
        });
        return d.ranks.empty();
      });
      std::erase_if(ended_only.lives, [&](LifeGroup& l) {
        std::erase_if(l.ranks, [&](int r) {
          return std::binary_search(f.no_records.begin(), f.no_records.end(), r);
        });
        return l.ranks.empty();
      });
      if (!ended.empty()) out += last_text(job, g, ended_only) + lives_text(g, ended_only);
      return out;
    }
    case Rule::kDisagree: {
      std::string out = fmt::format("DISAGREE on {} at {}: ", where(g), position_text(g, f.seq));
      for (size_t i = 0; i < f.sides.size(); ++i) {
        const Side& s = f.sides[i];
        out += fmt::format("{}{} called {}{}",
                           i == 0 ? "" : (i + 1 == f.sides.size() ? " but " : "; "),
                           ranks_text(s.ranks, g.nranks), call_text(job, g, s.call, f.seq),
                           site_text(job, s.site));
      }
      out += fmt::format(" (the {} differs): NCCL hangs or mixes data", f.field);
      if (f.later > 0) {
        out += fmt::format("; {} later position{} disagree too", f.later, f.later == 1 ? "" : "s");
      }
      return out;
    }
    case Rule::kBehind:
      return fmt::format("BEHIND on {}: {} never started {}, which {}", where(g),
                         ranks_text(f.ranks, g.nranks), op, waiting_in_it(g, f)) +
             last_text(job, g, f) + lives_text(g, f);
    case Rule::kHeld: {
      std::string out = fmt::format("HELD on {}: {} cannot finish {}, in flight{}", where(g),
                                    ranks_text(f.ranks, g.nranks), op, since(f)) +
                        lives_text(g, f);
      if (!f.past.empty()) {
        out += fmt::format(
            "; {} went past it: a process that stopped or died may not have written its last "
            "lines, so it may have stopped later than this",
            ranks_text(f.past, g.nranks));
      } else if (f.waiting.size() > f.ranks.size()) {
        out += fmt::format("; every rank started it, and {}", waiting_text(job, g, f));
      }
      return out;
    }
    case Rule::kBelow:
      if (f.after_disagreement) {
        return fmt::format("WAITING on {}: {}, which follows from the disagreement above", where(g),
                           waiting_text(job, g, f));
      }
      return fmt::format(
          "BELOW NCCL on {}: {}, every rank started it and every process runs: what holds it is "
          "below the NCCL calls (a GPU, a link, the network)",
          where(g), waiting_text(job, g, f));
  }
  return "";
}

namespace {

// "rank 3 (node-a pid 4711)" for the first few ranks of `ranks` that have a known place.
std::string places(const Group& g, const std::vector<int>& ranks) {
  std::vector<std::string> out;
  for (int r : ranks) {
    auto it =
        std::find_if(g.ranks.begin(), g.ranks.end(), [&](const Rank& x) { return x.rank == r; });
    if (it == g.ranks.end() || it->where.empty()) continue;
    if (out.size() == 3) {
      out.push_back("...");
      break;
    }
    out.push_back(fmt::format("rank {} ({})", r, excerpt(it->where, 80)));
  }
  std::string text;
  for (size_t i = 0; i < out.size(); ++i)
    text += (i == 0 ? "" : ", ") + out[i];
  return text;
}

// The first of `ranks` whose place is written "host pid 4711": its host and its pid.
std::optional<std::pair<std::string, std::string>> host_and_pid(const Group& g,
                                                                const std::vector<int>& ranks) {
  for (int r : ranks) {
    auto it =
        std::find_if(g.ranks.begin(), g.ranks.end(), [&](const Rank& x) { return x.rank == r; });
    if (it == g.ranks.end()) continue;
    const size_t at = it->where.rfind(" pid ");
    if (at != std::string::npos)
      return std::pair(it->where.substr(0, at), it->where.substr(at + 5));
  }
  return std::nullopt;
}

// The process id in a place written "host pid 4711", or "PID".
std::string pid_of(const Group& g, const std::vector<int>& ranks) {
  const auto place = host_and_pid(g, ranks);
  return place ? excerpt(place->second, 20) : "PID";
}

// The host in a place written "host pid 4711", or "".
std::string host_of(const Group& g, const std::vector<int>& ranks) {
  const auto place = host_and_pid(g, ranks);
  return place ? excerpt(place->first, 60) : "";
}

// How to see where a live process is: its stack.
std::string stack_step(const Group& g, const std::vector<int>& ranks) {
  const std::string pid = pid_of(g, ranks);
  const std::string at = places(g, ranks);
  const std::string who = at.empty()          ? ranks_text(ranks, g.nranks)
                          : ranks.size() == 1 ? at
                                              : ranks_text(ranks, g.nranks) + " (" + at + ")";
  return fmt::format(
      "look at what {} {} doing instead: its stack, `py-spy dump --pid {}` for Python ({}) or "
      "`gdb -p {} -batch -ex 'thread apply all bt'` ({})",
      who, ranks.size() == 1 ? "is" : "are", pid, tools::kPySpy, pid, tools::kGdb);
}

// What to do about processes that cannot run, by what they do; "" when none is known.
std::string lives_step(const Group& g, const Finding& f) {
  std::vector<std::string> steps;
  for (const LifeGroup& l : f.lives) {
    const std::string who = ranks_text(l.ranks, g.nranks);
    const std::string pid = pid_of(g, l.ranks);
    switch (l.life.state) {
      case Liveness::kStopped:
        steps.push_back(fmt::format(
            "resume {} (`kill -CONT {}`) or detach the debugger that holds it", who, pid));
        break;
      case Liveness::kUninterruptible:
        steps.push_back(fmt::format(
            "{} is stuck in the kernel: `cat /proc/{}/stack` (as root) shows where, and `dmesg` "
            "on its host shows Xid or file-system errors",
            who, pid));
        break;
      case Liveness::kZombie:
      case Liveness::kGone:
        steps.push_back(fmt::format(
            "{}'s process ended: its exit status and last lines in the job's log say why (an "
            "out-of-memory kill shows in `dmesg` on its host); restart the job from its last "
            "checkpoint",
            who));
        break;
      case Liveness::kSilent:
        steps.push_back(fmt::format(
            "on {} check whether {}'s process {} still runs (`ps -o stat,wchan -p {}`, {}) and "
            "read its last log lines",
            host_of(g, l.ranks).empty() ? who + "'s host" : host_of(g, l.ranks), who, pid, pid,
            tools::kProcps));
        break;
      case Liveness::kUnknown:
      case Liveness::kRunning:
        break;
    }
  }
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i)
    out += (i == 0 ? "" : "; ") + steps[i];
  return out;
}

}  // namespace

std::string finding_advice(const Job& job, const Finding& f) {
  const Group& g = job.groups[f.group];
  switch (f.rule) {
    case Rule::kMissing: {
      std::vector<std::string> steps;
      if (!f.no_records.empty()) {
        steps.push_back(
            fmt::format("for {}: {}", ranks_text(f.no_records, g.nranks), job.absent_check));
      }
      std::vector<int> ended;
      std::set_difference(f.ranks.begin(), f.ranks.end(), f.no_records.begin(), f.no_records.end(),
                          std::back_inserter(ended));
      if (!ended.empty()) {
        const std::string lives = lives_step(g, f);
        steps.push_back(
            lives.empty()
                ? fmt::format("find why {} left {} {} early: {} exit status and last lines in "
                              "the job's log",
                              ranks_text(ended, g.nranks), g.kind, group_label(g),
                              ended.size() == 1 ? "its" : "their")
                : lives);
      }
      if (!f.waiting.empty()) {
        steps.push_back(
            fmt::format("{} will not finish by themselves: end the job once you "
                        "have what you need",
                        ranks_text(f.waiting, g.nranks)));
      }
      std::string out;
      for (size_t i = 0; i < steps.size(); ++i)
        out += (i == 0 ? "" : "; ") + steps[i];
      return out;
    }
    case Rule::kDisagree: {
      std::string sites;
      for (const Side& s : f.sides) {
        if (s.site != kNoSite)
          sites += (sites.empty() ? "" : " and ") + excerpt(job.site(s.site), 120);
      }
      return fmt::format(
          "make every rank of {} {} call the same {} at {}{}: a branch on the rank or on the "
          "data before the call is the usual cause (PyTorch: TORCH_DISTRIBUTED_DEBUG=DETAIL "
          "checks each collective's arguments across ranks)",
          g.kind, group_label(g), f.field.empty() ? "thing" : f.field, position_text(g, f.seq),
          sites.empty() ? "" : " (called at " + sites + ")");
    }
    case Rule::kBehind: {
      const std::string lives = lives_step(g, f);
      return lives.empty() ? stack_step(g, f.ranks) : lives;
    }
    case Rule::kHeld: {
      const std::string lives = lives_step(g, f);
      return lives.empty() ? stack_step(g, f.ranks) : lives;
    }
    case Rule::kBelow:
      if (f.after_disagreement) return "fix the disagreement above: this wait follows from it";
      return fmt::format(
          "on the hosts of {}{}: the kernel log for Xid errors (`dmesg`), `nvidia-smi -q -d "
          "ECC,PCIE` for ECC and link errors and `nvidia-smi nvlink -e` for NVLink errors ({}), "
          "NCCL's RAS status (`ncclras`, shipped with NCCL 2.24 and later, on any node of the "
          "job) and NCCL's log (NCCL_DEBUG=INFO NCCL_DEBUG_FILE=/tmp/nccl.%h.%p); `commtool "
          "report` reads the RAS answer and the logs",
          ranks_text(f.waiting, g.nranks),
          places(g, f.waiting).empty() ? "" : " (" + places(g, f.waiting) + ")", tools::kNvidiaSmi);
  }
  return "";
}

std::string rank_set(std::vector<int> ranks, int nranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string plain = runs(ranks);
  if (nranks <= 1 || ranks.empty() || ranks.front() < 0 || ranks.back() >= nranks) return plain;
  std::vector<int> rest;
  for (int r = 0, i = 0; r < nranks; ++r) {
    if (i < static_cast<int>(ranks.size()) && ranks[i] == r) {
      ++i;
    } else {
      rest.push_back(r);
    }
  }
  if (rest.empty()) return plain;
  // "except" where the ranks left out are few (a fifth at most) and break the set into runs.
  if (rest.size() * 4 > ranks.size() || run_count(rest) >= run_count(ranks)) return plain;
  return fmt::format("0-{} except {}", nranks - 1, runs(rest));
}

std::string ranks_text(const std::vector<int>& ranks, int nranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_set(ranks, nranks));
}

std::string call_text(const Job& job, const Group& g, uint32_t call, uint64_t seq) {
  const Call& c = job.call(call);
  std::string detail;
  const auto add = [&](const std::string& s) { detail += (detail.empty() ? "" : ", ") + s; };
  if (c.count)
    add(fmt::format("{} x {}", *c.count,
                    c.datatype.empty() ? "unknown type" : excerpt(c.datatype, 30)));
  if (!c.count && !c.datatype.empty()) add(excerpt(c.datatype, 30));
  if (!c.redop.empty()) add(excerpt(c.redop, 20));
  if (c.root) add(fmt::format("root {}", *c.root));
  if (c.peer) add(fmt::format("peer {}", *c.peer));
  return fmt::format("{} {}{}{}", c.func.empty() ? "unknown call" : excerpt(c.func, 40), g.position,
                     seq, detail.empty() ? "" : " (" + detail + ")");
}

std::string render_text(const Job& job, const Verdict& v) {
  if (v.findings.empty()) {
    return "No disagreement, no rank missing or behind: every rank did the same operations.\n";
  }
  std::string out;
  for (size_t i = 0; i < v.findings.size(); ++i) {
    if (i == 1) out += "Consequences and further findings:\n";
    const std::string indent = i == 0 ? "" : "  ";
    out += indent + finding_text(job, v.findings[i]) + ".\n";
    out += indent + "  what to do: " + finding_advice(job, v.findings[i]) + ".\n";
  }
  return out;
}

namespace {

std::tm utc(int64_t wall_ns) {
  const int64_t s = wall_ns / 1'000'000'000 - (wall_ns % 1'000'000'000 < 0 ? 1 : 0);
  const std::time_t t = static_cast<std::time_t>(s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm;
}

}  // namespace

std::string utc_clock(int64_t wall_ns) {
  const std::tm tm = utc(wall_ns);
  return fmt::format("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string utc_date_time(int64_t wall_ns) {
  const std::tm tm = utc(wall_ns);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

}  // namespace commtool::crossrank
