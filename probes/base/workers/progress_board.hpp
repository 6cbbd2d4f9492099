// Where every worker stands, kept where the launcher can read it even when the worker is stuck
// in a driver call or already dead: one slot per rank in a file of the launcher's private
// directory, mapped shared by the launcher and by every worker. What PyTorch's Flight Recorder
// keeps, without needing it: the last operations each rank enqueued (name and count, so ranks
// that disagree can be named), and how far it got with them (enqueued, started on the GPU,
// completed), plus since when it has been inside a step it bounds by --timeout.
//
// Workers write with a few atomic stores per operation; the launcher reads without locks. A
// ring entry is published seqlock-style (its seq written last), so a reader never takes half of
// one operation and half of the next for a record.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::workers {

enum class Phase : uint32_t {
  kStarting = 0,  // the process runs, its task has not reached its communicator yet
  kJoining = 1,   // creating the NCCL communicator (ncclCommInitRank)
  kRunning = 2,   // the communicator is up; operations follow
  kLeaving = 3,   // finalising the communicator
};
std::string to_string(Phase p);

// One operation as a rank enqueued it. `name` and `count` must be the same on every rank for
// the same seq ("allreduce float sum", elements); count 0 when it legitimately differs by rank
// (an all-to-allv's per-peer counts).
struct OperationRecord {
  int64_t seq = -1;
  std::string name;
  uint64_t count = 0;
};

// A copy of one slot, taken by the launcher.
struct RankProgress {
  int rank = 0;
  Phase phase = Phase::kStarting;
  int64_t enqueued = -1;  // seq of the last operation handed to NCCL; -1: none yet
  int64_t started = -1;   // the last whose GPU work was seen to start
  int64_t completed = -1;
  int64_t busy_since_ns = 0;  // CLOCK_MONOTONIC; 0: not inside a bounded step
  int step_done = 0;          // the task's own steps (Progress::step), 0 of 0: none
  int step_total = 0;
  std::string step_what;
  std::vector<OperationRecord> recent;  // the last operations enqueued, oldest first
};

// How many operations each slot remembers.
inline constexpr int kRecentOperations = 32;

// The worker's side: a no-op when the launcher gave it no board (tests, a worker started by
// hand).
class Progress {
 public:
  Progress() = default;
  // Maps `path` and takes slot `rank`; on failure stays a no-op (the board is a diagnostic aid,
  // never a reason to fail a run).
  Progress(const std::string& path, int rank, int size);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void phase(Phase p);
  // Entering a step the worker bounds by --timeout itself (a GPU wait, an NCCL call). The
  // launcher kills a worker that stays in one step much longer: in a blocking call that
  // ignores its bound (a blocking communicator's NCCL call waiting for a peer).
  void busy();
  void idle();
  void enqueued(int64_t seq, const std::string& name, uint64_t count);
  // For the progress line the user watches: `done` of the task's `total` steps are finished,
  // `what` runs now ("allreduce 1 MiB async-wait", up to 47 characters). Rank 0's is shown.
  void step(int done, int total, std::string_view what);
  void started(int64_t seq);
  void completed(int64_t seq);

 private:
  struct Slot* slot_ = nullptr;
  void* map_ = nullptr;
  size_t bytes_ = 0;
};

// The launcher's side: creates the file (one zeroed slot per rank), reads slots.
class ProgressBoard {
 public:
  ProgressBoard(std::string path, int size);  // throws Error(kEnvironment) when it cannot
  ~ProgressBoard();                           // unmaps and removes the file
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  const std::string& path() const { return path_; }
  RankProgress read(int rank) const;
  std::vector<RankProgress> read_all() const;

 private:
  std::string path_;
  int size_ = 0;
  void* map_ = nullptr;
  size_t bytes_ = 0;
};

int64_t monotonic_now_ns();

// `progress`, or a shared no-op for code run without a board (tests, a bare benchmark).
Progress& progress_or_none(Progress* progress);

}  // namespace commtool::workers
