#include "probes/base/workers/progress_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "probes/base/int_runs.hpp"

namespace commtool::workers {

namespace {

const OperationRecord* find_op(const RankProgress& p, int64_t seq) {
  for (const OperationRecord& op : p.recent) {
    if (op.seq == seq) return &op;
  }
  return nullptr;
}

std::string op_text(const OperationRecord& op) {
  return op.count > 0 ? fmt::format("{} of {} elements", op.name, op.count) : op.name;
}

std::string op_name(const RankProgress& p, int64_t seq) {
  const OperationRecord* op = find_op(p, seq);
  return op ? fmt::format("{} #{}", op->name, seq) : fmt::format("operation #{}", seq);
}

bool same(const OperationRecord& a, const OperationRecord& b) {
  return a.name == b.name && a.count == b.count;
}

std::string seconds_since(int64_t since_ns, int64_t now_ns) {
  return fmt::format("{:.1f} s", static_cast<double>(now_ns - since_ns) / 1e9);
}

std::string rank_line(const RankProgress& p, int64_t now_ns) {
  std::string line;
  if (p.phase == Phase::kStarting) return "had not begun joining the communicator";
  if (p.phase == Phase::kJoining) {
    line = "joining the communicator";
  } else if (p.enqueued < 0) {
    line = fmt::format("{}; no operation enqueued yet", to_string(p.phase));
  } else {
    line = fmt::format("{}; last enqueued {}", to_string(p.phase), op_name(p, p.enqueued));
    if (p.completed >= p.enqueued) {
      line += ", complete";
    } else {
      line += p.started >= p.enqueued ? ", started on the GPU, not complete"
                                      : ", not started on the GPU";
      if (p.completed >= 0) line += fmt::format(" (last complete: #{})", p.completed);
    }
  }
  if (p.busy_since_ns > 0)
    line += fmt::format("; in this step for {}", seconds_since(p.busy_since_ns, now_ns));
  return line;
}

// Which ranks are behind the others, and why; "" when the board cannot tell.
std::string behind(const std::vector<RankProgress>& ranks) {
  std::vector<int> not_joined, joined;
  for (const RankProgress& p : ranks) {
    (p.phase == Phase::kStarting || p.phase == Phase::kJoining ? not_joined : joined)
        .push_back(p.rank);
  }
  if (!not_joined.empty() && !joined.empty()) {
    return fmt::format("rank(s) {} never joined the communicator that rank(s) {} joined",
                       rank_list(not_joined), rank_list(joined));
  }
  if (!not_joined.empty()) {
    std::vector<int> starting;
    for (const RankProgress& p : ranks) {
      if (p.phase == Phase::kStarting) starting.push_back(p.rank);
    }
    if (!starting.empty() && starting.size() < ranks.size()) {
      return fmt::format(
          "rank(s) {} never began joining the communicator, which rank(s) {} wait in",
          rank_list(starting), rank_list([&] {
            std::vector<int> waiting;
            for (const RankProgress& p : ranks)
              if (p.phase == Phase::kJoining) waiting.push_back(p.rank);
            return waiting;
          }()));
    }
    return "";
  }
  int64_t lowest = INT64_MAX, highest = -1;
  for (const RankProgress& p : ranks) {
    lowest = std::min(lowest, p.enqueued);
    highest = std::max(highest, p.enqueued);
  }
  const RankProgress* ahead = nullptr;
  std::vector<int> late, on_time;
  for (const RankProgress& p : ranks) {
    if (p.enqueued == highest) ahead = &p;
    (p.enqueued < highest ? late : on_time).push_back(p.rank);
  }
  if (!late.empty()) {
    return fmt::format("rank(s) {} never enqueued {} (last enqueued: #{}), which rank(s) {} did",
                       rank_list(late), op_name(*ahead, highest), lowest, rank_list(on_time));
  }
  if (highest < 0) return "";
  std::vector<int> started, not_started;
  for (const RankProgress& p : ranks) {
    if (p.completed >= highest) continue;
    (p.started >= highest ? started : not_started).push_back(p.rank);
  }
  if (!not_started.empty() && !started.empty()) {
    return fmt::format(
        "rank(s) {} enqueued {} but the GPU never started it (work queued ahead of it on the "
        "rank's streams had not finished), while rank(s) {} started it and wait for them",
        rank_list(not_started), op_name(*ahead, highest), rank_list(started));
  }
  if (!started.empty() && not_started.empty()) {
    return fmt::format(
        "every rank that has not completed {} started it on the GPU: the collective itself did "
        "not finish (NCCL, its transport, or a peer that died)",
        op_name(*ahead, highest));
  }
  return "";
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  return int_runs(ranks, {.separator = ", ", .pair_as_run = false});
}

std::optional<Divergence> first_divergence(const std::vector<RankProgress>& ranks) {
  std::set<int64_t> seqs;
  for (const RankProgress& p : ranks) {
    for (const OperationRecord& op : p.recent)
      seqs.insert(op.seq);
  }
  for (int64_t seq : seqs) {
    // Group the ranks that have this seq by what they enqueued.
    std::vector<std::pair<OperationRecord, std::vector<int>>> groups;
    for (const RankProgress& p : ranks) {
      const OperationRecord* op = find_op(p, seq);
      if (op == nullptr) continue;
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& grp) { return same(grp.first, *op); });
      if (g == groups.end()) {
        groups.push_back({*op, {p.rank}});
      } else {
        g->second.push_back(p.rank);
      }
    }
    if (groups.size() < 2) continue;
    auto largest = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    Divergence d;
    d.seq = seq;
    d.expected = largest->first;
    d.majority = largest->second;
    for (const auto& [op, members] : groups) {
      if (&op == &largest->first) continue;
      for (int r : members)
        d.others.emplace_back(r, op);
    }
    std::sort(d.others.begin(), d.others.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return d;
  }
  return std::nullopt;
}

std::string describe(const Divergence& d) {
  std::string others;
  for (const auto& [rank, op] : d.others) {
    if (!others.empty()) others += "; ";
    others += fmt::format("rank {} enqueued {}", rank, op_text(op));
  }
  return fmt::format(
      "the ranks enqueued different operations at #{} (a collective mismatch: NCCL waits forever "
      "or mixes data): {} where rank(s) {} enqueued {}",
      d.seq, others, rank_list(d.majority), op_text(d.expected));
}

std::vector<int> ranks_that_cannot_run(const std::vector<std::optional<proc::ProcessLook>>& looks) {
  std::vector<int> out;
  for (size_t r = 0; r < looks.size(); ++r) {
    if (looks[r] && looks[r]->state != proc::RunState::kRunning &&
        looks[r]->state != proc::RunState::kGone) {
      out.push_back(static_cast<int>(r));
    }
  }
  return out;
}

void forget_reported_exits(std::vector<std::optional<proc::ProcessLook>>& looks,
                           const std::vector<bool>& reported) {
  for (size_t r = 0; r < looks.size() && r < reported.size(); ++r) {
    if (reported[r] && looks[r] && looks[r]->state == proc::RunState::kZombie) looks[r].reset();
  }
}

std::string cannot_run_text(const std::string& name, const proc::ProcessLook& look) {
  return fmt::format(
      "{}'s process is {}: it cannot take part in the operation the other ranks wait in with it",
      name, proc::describe(look));
}

std::string explain_progress(const std::vector<RankProgress>& ranks,
                             const std::vector<std::string>& names, int64_t now_ns, bool shared_gpu,
                             const std::vector<std::optional<proc::ProcessLook>>& looks) {
  const auto name_of = [&](int rank) {
    return static_cast<size_t>(rank) < names.size() ? names[static_cast<size_t>(rank)]
                                                    : fmt::format("rank {}", rank);
  };
  std::string out = "where each rank stood (commtool's progress board):";
  for (const RankProgress& p : ranks) {
    out += fmt::format("\n  {}: {}", name_of(p.rank), rank_line(p, now_ns));
    if (static_cast<size_t>(p.rank) < looks.size() && looks[static_cast<size_t>(p.rank)] &&
        looks[static_cast<size_t>(p.rank)]->state != proc::RunState::kRunning) {
      out +=
          fmt::format("; its process is {}", proc::describe(*looks[static_cast<size_t>(p.rank)]));
    }
  }
  const std::vector<int> held = ranks_that_cannot_run(looks);
  if (std::optional<Divergence> d = first_divergence(ranks)) {
    out += "\n  cause: " + describe(*d);
  } else if (!held.empty()) {
    for (int r : held)
      out += "\n  cause: " + cannot_run_text(name_of(r), *looks[static_cast<size_t>(r)]);
  } else if (std::string b = behind(ranks); !b.empty()) {
    out += "\n  behind: " + b;
    if (shared_gpu && b.find("never started") != std::string::npos) {
      out +=
          "\n  (the ranks share a GPU: a rank's work can also wait there behind another "
          "rank's, so a rank named here may be one the stalled rank holds up)";
    }
  }
  return out;
}

bool stuck_in_step(const RankProgress& p, std::chrono::duration<double> step, int64_t now_ns) {
  const auto bound = std::chrono::duration_cast<std::chrono::nanoseconds>(step + kStuckGrace);
  return p.busy_since_ns != 0 && now_ns - p.busy_since_ns > bound.count();
}

std::string stuck_in_step_text(const std::string& name, std::chrono::duration<double> step) {
  return fmt::format(
      "{} stayed inside one step for more than {:.1f} s although a step may take {:.1f} s (the "
      "timeout): it is stuck in a call that cannot be bounded from inside (a blocking NCCL call "
      "waiting for a peer, or the driver), so it was stopped",
      name, (step + kStuckGrace).count(), step.count());
}

}  // namespace commtool::workers
