// What the progress board says when a worker group fails: where each rank stood, which rank is
// behind, and the first operation the ranks disagree on. Pure: tests feed it snapshots.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/process_look.hpp"
#include "probes/base/workers/progress_board.hpp"

namespace commtool::workers {

// The first seq at which the ranks enqueued different operations (name or count): NCCL then
// waits forever or mixes data, so this is the cause whatever symptom came first.
struct Divergence {
  int64_t seq = -1;
  std::vector<int> majority;                            // the ranks that agree with the most others
  OperationRecord expected;                             // what they enqueued
  std::vector<std::pair<int, OperationRecord>> others;  // each other rank and what it enqueued
};
std::optional<Divergence> first_divergence(const std::vector<RankProgress>& ranks);
// "ranks disagree at operation #5: rank 1 enqueued allreduce float sum of 512 elements where
// rank 0 enqueued allreduce float sum of 1024 elements"
std::string describe(const Divergence& d);

// The account appended to a failure: one line per rank (`names` by rank, "rank 1 (GPU 0)"),
// then which rank is behind and why, when the board can tell. `shared_gpu`: some ranks share a
// GPU, where one rank's GPU work can wait behind another's, so "not started" may be innocent.
// `looks`, by rank where the launcher could look: what each worker's process was doing when
// the group failed; a process that cannot run (stopped, traced, in uninterruptible sleep, a
// zombie) is named on its line and, when the ranks do not disagree, as the cause.
std::string explain_progress(const std::vector<RankProgress>& ranks,
                             const std::vector<std::string>& names, int64_t now_ns,
                             bool shared_gpu = false,
                             const std::vector<std::optional<proc::ProcessLook>>& looks = {});

// The ranks whose process cannot run, by `looks` (as explain_progress's).
std::vector<int> ranks_that_cannot_run(const std::vector<std::optional<proc::ProcessLook>>& looks);

// A worker that sent its last words (its result, or its error such as its own timeout) and
// exited is a zombie until the launcher reaps it: its normal end, not a process that holds the
// others, so its look is dropped (`reported` by rank). Else the rank that timed out first and
// said so would be named as the cause, ahead of the rank that never started the operation.
void forget_reported_exits(std::vector<std::optional<proc::ProcessLook>>& looks,
                           const std::vector<bool>& reported);
// "rank 1 (GPU 0)'s process is stopped by a signal (SIGSTOP, SIGTSTP): ..."
std::string cannot_run_text(const std::string& name, const proc::ProcessLook& look);

// A rank busy in one bounded step (its `busy_since_ns` set) is stuck once it has been there for
// the step's bound plus this grace: enough for the worker's own timeout path (ncclCommAbort, its
// error message) to win when it works. The local launcher and every rank of an MPI job judge
// alike.
inline constexpr std::chrono::seconds kStuckGrace{1};
bool stuck_in_step(const RankProgress& p, std::chrono::duration<double> step, int64_t now_ns);
// "<name> stayed inside one step for more than 11.0 s although a step may take 10.0 s ..."
std::string stuck_in_step_text(const std::string& name, std::chrono::duration<double> step);

// Ranks as a short list: runs of three or more as a range ("0-2, 7"), pairs as "0, 1".
std::string rank_list(const std::vector<int>& ranks);

}  // namespace commtool::workers
