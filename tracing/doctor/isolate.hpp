// Which GPU, or which link between two GPUs, makes a collective over all of them fail or slow:
// found by running it over halves, not over every pair. Pure: the caller gives the run (an
// all-reduce over a set of GPUs); the tests give a simulated one with a bad GPU or a bad link.
//
// A set is bad when its run fails (a hang, wrong data) or, beside a set of the same size that
// ran too, is slower than kSlowShare of it (beside one that failed, a slow set is not judged). From
// a bad set S, split into halves A and B: a bad half holds a fault of its own and is searched the
// same way (both, when both are bad); when neither is, the fault needs GPUs of both (a link between
// them): the B side is narrowed by halves with the whole of A beside it, then the A side with what
// is left of B. Each fault costs O(log n) runs of at most n GPUs, so O(n log n) GPU-runs, where all
// pairs would be n^2.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace commtool::doctor {

struct RunOutcome {
  bool ok = false;    // it completed with every element right
  double busbw = 0;   // GB/s, when ok
  std::string error;  // when not ok
};
using SubsetRun = std::function<RunOutcome(const std::vector<int>& gpus)>;

inline constexpr double kSlowShare = 0.75;

struct Suspect {
  std::vector<int> gpus;  // one GPU, or the two ends of a link; more when halving stopped early
  bool between = false;   // a link between these GPUs, not a GPU of its own
  std::string evidence;   // the runs that point at it
};

struct Isolation {
  std::vector<Suspect> suspects;
  int runs = 0;
  std::vector<std::string> log;  // "GPUs 0-3: 412.0 GB/s; GPUs 4-7: failed: ..."
};

// Searches `gpus` (the whole set, already known bad). At most `max_runs` runs.
Isolation isolate(const std::vector<int>& gpus, const SubsetRun& run, int max_runs = 64);

}  // namespace commtool::doctor
