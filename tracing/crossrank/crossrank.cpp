#include "tracing/crossrank/crossrank.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace commtool::crossrank {

const char* to_string(Liveness l) {
  switch (l) {
    case Liveness::kUnknown:
      return "unknown";
    case Liveness::kRunning:
      return "running";
    case Liveness::kStopped:
      return "stopped";
    case Liveness::kUninterruptible:
      return "uninterruptible";
    case Liveness::kZombie:
      return "zombie";
    case Liveness::kGone:
      return "gone";
    case Liveness::kSilent:
      return "silent";
  }
  return "?";
}

bool can_run(Liveness l) {
  return l == Liveness::kUnknown || l == Liveness::kRunning;
}

Life life_of(const proc::ProcessLook& look) {
  switch (look.state) {
    case proc::RunState::kRunning:
      return {Liveness::kRunning, proc::describe(look)};
    case proc::RunState::kStopped:
    case proc::RunState::kTraced:
      return {Liveness::kStopped, proc::describe(look)};
    case proc::RunState::kUninterruptible:
      return {Liveness::kUninterruptible, proc::describe(look)};
    case proc::RunState::kZombie:
      return {Liveness::kZombie, proc::describe(look)};
    case proc::RunState::kGone:
      break;
  }
  return {Liveness::kGone, "no such process on its host"};
}

const char* to_string(Rule r) {
  switch (r) {
    case Rule::kMissing:
      return "missing";
    case Rule::kDisagree:
      return "disagree";
    case Rule::kBehind:
      return "behind";
    case Rule::kHeld:
      return "held";
    case Rule::kBelow:
      return "below";
  }
  return "?";
}

std::string differing_field(const Call& a, const Call& b) {
  if (a.p2p && b.p2p) return "";
  if (a.func != b.func || a.p2p != b.p2p) return "func";
  if (a.count && b.count && *a.count != *b.count) return "count";
  if (!a.datatype.empty() && !b.datatype.empty() && a.datatype != b.datatype) return "datatype";
  if (!a.redop.empty() && !b.redop.empty() && a.redop != b.redop) return "redop";
  if (a.root && b.root && *a.root != *b.root) return "root";
  return "";
}

uint32_t Job::call(const Call& c) {
  auto [it, added] = call_ids_.try_emplace(c, static_cast<uint32_t>(calls_.size()));
  if (added) calls_.push_back(c);
  return it->second;
}

uint32_t Job::site(const std::string& s) {
  auto [it, added] = site_ids_.try_emplace(s, static_cast<uint32_t>(sites_.size()));
  if (added) sites_.push_back(s);
  return it->second;
}

namespace {

bool in_flight(const Op& op) {
  return op.state != OpState::kCompleted;
}

const Op* op_at(const Rank& r, uint64_t seq) {
  auto it = std::lower_bound(r.ops.begin(), r.ops.end(), seq,
                             [](const Op& op, uint64_t s) { return op.seq < s; });
  return it != r.ops.end() && it->seq == seq ? &*it : nullptr;
}

std::optional<uint64_t> last_seq(const Rank& r) {
  if (r.ops.empty()) return std::nullopt;
  return r.ops.back().seq;
}

// Groups are normalised: ranks ascending.
const Rank* rank_of(const Group& g, int rank) {
  auto it = std::lower_bound(g.ranks.begin(), g.ranks.end(), rank,
                             [](const Rank& r, int x) { return r.rank < x; });
  return it != g.ranks.end() && it->rank == rank ? &*it : nullptr;
}

bool by_seq(const Op& a, const Op& b) {
  return a.seq < b.seq;
}

bool by_rank(const Rank& a, const Rank& b) {
  return a.rank < b.rank;
}

bool ended(const Rank& r) {
  return r.finished || r.life.state == Liveness::kGone || r.life.state == Liveness::kZombie;
}

// Ranks by their last completed operation, in order of that operation.
std::vector<LastDone> last_done(const Group& g, const std::vector<int>& ranks) {
  std::map<std::optional<uint64_t>, LastDone> by_seq;
  for (int rank : ranks) {
    std::optional<uint64_t> seq;
    std::optional<uint32_t> call;
    if (const Rank* r = rank_of(g, rank)) {
      for (auto it = r->ops.rbegin(); it != r->ops.rend(); ++it) {
        if (it->state == OpState::kCompleted) {
          seq = it->seq;
          call = it->call;
          break;
        }
      }
    }
    LastDone& d = by_seq[seq];
    d.seq = seq;
    if (!d.call) d.call = call;
    d.ranks.push_back(rank);
  }
  std::vector<LastDone> out;
  for (auto& [seq, d] : by_seq)
    out.push_back(std::move(d));
  return out;
}

std::vector<LifeGroup> lives_of(const Group& g, const std::vector<int>& ranks) {
  std::vector<LifeGroup> out;
  for (int rank : ranks) {
    Life life;
    if (const Rank* r = rank_of(g, rank)) life = r->life;
    auto it = std::find_if(out.begin(), out.end(), [&](const LifeGroup& l) {
      return l.life.state == life.state && l.life.detail == life.detail;
    });
    if (it == out.end()) {
      out.push_back({{rank}, life});
    } else {
      it->ranks.push_back(rank);
    }
  }
  return out;
}

// The positions where ranks disagree, lowest first, with the sides of the lowest.
void find_disagreements(const Job& job, const Group& g, size_t index, Verdict& v) {
  std::unordered_map<uint64_t, uint32_t> reference;  // seq -> the first rank's call
  std::set<uint64_t> bad;
  for (const Rank& r : g.ranks) {
    for (const Op& op : r.ops) {
      auto [it, added] = reference.try_emplace(op.seq, op.call);
      if (added || it->second == op.call) continue;
      if (!differing_field(job.call(it->second), job.call(op.call)).empty()) bad.insert(op.seq);
    }
  }
  if (bad.empty()) return;
  Finding f;
  f.rule = Rule::kDisagree;
  f.group = index;
  f.seq = *bad.begin();
  f.later = bad.size() - 1;
  for (const Rank& r : g.ranks) {
    const Op* op = op_at(r, f.seq);
    if (op == nullptr) continue;
    auto side = std::find_if(f.sides.begin(), f.sides.end(), [&](const Side& s) {
      return differing_field(job.call(s.call), job.call(op->call)).empty();
    });
    if (side == f.sides.end()) {
      f.sides.push_back({{r.rank}, op->call, op->site});
    } else {
      side->ranks.push_back(r.rank);
      if (r.rank < side->ranks.front()) side->site = op->site;
    }
  }
  for (Side& s : f.sides)
    std::sort(s.ranks.begin(), s.ranks.end());
  std::sort(f.sides.begin(), f.sides.end(), [](const Side& a, const Side& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
    return a.ranks.front() < b.ranks.front();
  });
  f.field = differing_field(job.call(f.sides[0].call), job.call(f.sides[1].call));
  v.findings.push_back(std::move(f));
}

// What holds the oldest operation in flight, by the rules after `disagree`.
void find_holdup(const Group& g, size_t index, const std::vector<int>& no_records, Verdict& v,
                 std::vector<Finding>& missing) {
  std::optional<uint64_t> oldest;
  for (const Rank& r : g.ranks) {
    for (const Op& op : r.ops) {
      if (in_flight(op)) {
        oldest = std::min(oldest.value_or(UINT64_MAX), op.seq);
        break;
      }
    }
  }
  if (!oldest) return;
  v.hang = true;
  Finding base;
  base.group = index;
  base.seq = *oldest;
  std::vector<int> gone, behind, cannot_run;
  for (const Rank& r : g.ranks) {
    const Op* op = op_at(r, *oldest);
    if (op != nullptr && in_flight(*op)) {
      if (!base.call) {
        base.call = op->call;
        base.waiting_since_wall_ns = op->start_wall_ns;
      } else if (op->start_wall_ns != 0 && (base.waiting_since_wall_ns == 0 ||
                                            op->start_wall_ns < base.waiting_since_wall_ns)) {
        base.waiting_since_wall_ns = op->start_wall_ns;
      }
      base.waiting.push_back(r.rank);
      if (!can_run(r.life.state)) cannot_run.push_back(r.rank);
    } else if (op != nullptr) {
      base.past.push_back(r.rank);  // completed it
    } else if (last_seq(r).value_or(0) <= *oldest) {
      (ended(r) ? gone : behind).push_back(r.rank);
    }
  }
  const auto finding = [&](Rule rule, std::vector<int> ranks) {
    Finding f = base;
    f.rule = rule;
    std::sort(ranks.begin(), ranks.end());
    f.ranks = std::move(ranks);
    f.last = last_done(g, f.ranks);
    f.lives = lives_of(g, f.ranks);
    return f;
  };
  if (!gone.empty() || !no_records.empty()) {
    std::vector<int> ranks = gone;
    ranks.insert(ranks.end(), no_records.begin(), no_records.end());
    Finding f = finding(Rule::kMissing, ranks);
    f.no_records = no_records;
    missing.push_back(std::move(f));
  }
  if (!behind.empty()) {
    v.findings.push_back(finding(Rule::kBehind, behind));
  } else if (!cannot_run.empty()) {
    v.findings.push_back(finding(Rule::kHeld, cannot_run));
  } else if (gone.empty() && no_records.empty()) {
    v.findings.push_back(finding(Rule::kBelow, base.waiting));
  }
}

int rule_order(Rule r) {
  return static_cast<int>(r);
}

}  // namespace

void normalise(Job& job) {
  for (Group& g : job.groups) {
    std::stable_sort(g.ranks.begin(), g.ranks.end(), by_rank);
    for (Rank& r : g.ranks)
      if (!std::is_sorted(r.ops.begin(), r.ops.end(), by_seq))
        std::stable_sort(r.ops.begin(), r.ops.end(), by_seq);
  }
}

Verdict analyse(const Job& job) {
  Verdict v;
  std::vector<Finding> missing;
  for (size_t i = 0; i < job.groups.size(); ++i) {
    const Group& g = job.groups[i];
    const bool normalised = std::is_sorted(g.ranks.begin(), g.ranks.end(), by_rank) &&
                            std::all_of(g.ranks.begin(), g.ranks.end(), [](const Rank& r) {
                              return std::is_sorted(r.ops.begin(), r.ops.end(), by_seq);
                            });
    if (!normalised) throw std::logic_error("crossrank::analyse: the job is not normalised");
    std::vector<int> no_records;
    for (int rank = 0, next = 0; rank < g.nranks; ++rank) {
      while (next < static_cast<int>(g.ranks.size()) && g.ranks[next].rank < rank)
        ++next;
      if (next == static_cast<int>(g.ranks.size()) || g.ranks[next].rank != rank) {
        no_records.push_back(rank);
      }
    }
    const size_t before = v.findings.size();
    find_disagreements(job, g, i, v);
    // Where the group first disagrees; UINT64_MAX: nowhere.
    const uint64_t disagree_at = v.findings.size() > before ? v.findings.back().seq : UINT64_MAX;
    if (job.stuck) {
      find_holdup(g, i, no_records, v, missing);
      if (v.findings.size() > before) {
        Finding& last = v.findings.back();
        if (last.rule == Rule::kBelow && disagree_at <= last.seq) {
          last.after_disagreement = true;
        }
      }
    }
    if (!no_records.empty() &&
        (!job.stuck || std::none_of(missing.begin(), missing.end(),
                                    [&](const Finding& f) { return f.group == i; }))) {
      Finding f;
      f.rule = Rule::kMissing;
      f.group = i;
      f.ranks = no_records;
      f.no_records = no_records;
      missing.push_back(std::move(f));
    }
  }
  v.findings.insert(v.findings.begin(), missing.begin(), missing.end());
  std::stable_sort(v.findings.begin(), v.findings.end(), [](const Finding& a, const Finding& b) {
    return rule_order(a.rule) < rule_order(b.rule);
  });
  return v;
}

}  // namespace commtool::crossrank
