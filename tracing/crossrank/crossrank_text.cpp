// render_text and the names it uses (crossrank.hpp): the verdict first, each finding one
// paragraph, ranks as sets.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "probes/base/error.hpp"
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
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out += ",";
    out += j == i       ? fmt::format("{}", ranks[i])
           : j == i + 1 ? fmt::format("{},{}", ranks[i], ranks[j])
                        : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string group_label(const Group& g) {
  std::string out = excerpt(g.id, 40);
  if (!g.name.empty()) out += fmt::format(" (\"{}\")", excerpt(g.name, 40));
  return out;
}

std::string where(const Group& g) {
  return fmt::format("{} {} ({} ranks)", g.kind, group_label(g),
                     g.nranks > 0 ? fmt::format("{}", g.nranks) : "?");
}

std::string clock_text(int64_t wall_ns) {
  const time_t s = static_cast<time_t>(wall_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  return fmt::format("{:02}:{:02}:{:02} UTC", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string position_text(const Group& g, uint64_t seq) {
  return fmt::format("{}{}", g.position, seq);
}

std::string since(const Finding& f) {
  return f.waiting_since_wall_ns > 0 ? " since " + clock_text(f.waiting_since_wall_ns) : "";
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
          "below the NCCL calls (a GPU, a link, the network). Next: the kernel log for Xid "
          "errors (dmesg), nvidia-smi -q for ECC and NVLink errors, NCCL's RAS status "
          "(ncclras on a node of the job), NCCL's log (NCCL_DEBUG=INFO)",
          where(g), waiting_text(job, g, f));
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
    add(fmt::format("{} x {}", *c.count, c.datatype.empty() ? "?" : excerpt(c.datatype, 30)));
  if (!c.count && !c.datatype.empty()) add(excerpt(c.datatype, 30));
  if (!c.redop.empty()) add(excerpt(c.redop, 20));
  if (c.root) add(fmt::format("root {}", *c.root));
  if (c.peer) add(fmt::format("peer {}", *c.peer));
  return fmt::format("{} {}{}{}", c.func.empty() ? "?" : excerpt(c.func, 40), g.position, seq,
                     detail.empty() ? "" : " (" + detail + ")");
}

std::string render_text(const Job& job, const Verdict& v) {
  if (v.findings.empty()) {
    return "No disagreement, no rank missing or behind: every rank did the same operations.\n";
  }
  std::string out;
  for (size_t i = 0; i < v.findings.size(); ++i) {
    if (i == 1) out += "Consequences and further findings:\n";
    out += (i == 0 ? "" : "  ") + finding_text(job, v.findings[i]) + ".\n";
  }
  return out;
}

}  // namespace commtool::crossrank
