// One cross-rank analysis for every artifact of a job: the operations each rank of each
// communicator (or process group) did, joined by their position in that group's sequence, to a
// verdict that names the rank, the operation and the group. `commtool report` and the hang
// monitor of `commtool record` give it a recording (tracing/record/record_crossrank.hpp); the
// readers of PyTorch's Flight Recorder dumps and NCCL's RAS answers give it theirs. Pure: the
// same job gives the same verdict anywhere.
//
// The rules, per group, in order; the first that matches is the verdict, the others are
// reported after it as its consequences:
//   missing     a rank below the group's size has no records at all (never joined, or no
//               recorder in its process), or has ended (finalised, exited, gone) without ever
//               starting an operation that other ranks wait in: they wait for it forever;
//   disagree    at one position the ranks called different things (function, element count,
//               data type, reduction, root): NCCL hangs or mixes data. An error even when the
//               job went on (a size mismatch can complete with wrong results);
//   behind      the oldest operation any rank waits in (lowest position) was never started by
//               some live ranks: they are behind, named with their last completed operation
//               and, where known, what their process is doing (stopped, in uninterruptible
//               sleep);
//   held        every rank started it, and some of them are in processes that cannot run
//               (stopped, zombie, gone): those hold it;
//   below       every rank started it and every process runs: what holds it is below the
//               NCCL calls (a GPU, a link, the network), with what to collect next.
// Ranks are written as sets ("ranks 0-4095 except 17"), so the text grows with the number of
// distinct groups of ranks, not with the ranks.
//
// Memory: an operation is 32 bytes (what it called is interned per job), so a job of 4,096
// ranks with 2,000 operations each holds about 260 MB.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/process_look.hpp"

namespace commtool::crossrank {

// What a rank called at one position. Unknown fields are empty and compare with nothing.
struct Call {
  std::string func;  // NCCL's names: "AllReduce", "Broadcast", "AllGather", "Send", "Recv", ...
  bool p2p = false;
  std::optional<uint64_t> count;  // elements, as NCCL counts them for this function
  std::string datatype;           // "float32", "bfloat16", ...
  std::string redop;              // "sum", "max", ...
  std::optional<int> root;        // rooted collectives
  std::optional<int> peer;        // point-to-point
  auto operator<=>(const Call&) const = default;
};

// The first field in which two calls at one position differ where both are known: "func",
// "count", "datatype", "redop" or "root"; empty when they agree. Point-to-point calls are not
// compared with one another (the two sides of an exchange differ by design).
std::string differing_field(const Call& a, const Call& b);

enum class OpState {
  kCompleted,  // ended (its kernel finished, or the recorder says it ended)
  kStarted,    // started, not ended: in flight
  kScheduled,  // enqueued, not started yet (Flight Recorder): in flight too
};

inline constexpr uint32_t kNoSite = UINT32_MAX;

struct Op {
  uint64_t seq = 0;         // position in the group's sequence, the same on every rank
  uint32_t call = 0;        // Job::call()
  uint32_t site = kNoSite;  // Job::site(): where the application called it, when known
  OpState state = OpState::kCompleted;
  int64_t start_wall_ns = 0;  // 0: unknown
};

// What a rank's process is doing, as far as anyone can tell.
enum class Liveness {
  kUnknown,
  kRunning,          // running or sleeping normally
  kStopped,          // stopped by a signal or a tracer (a debugger)
  kUninterruptible,  // in uninterruptible sleep (a driver, a file system): detail has the wait
  kZombie,           // exited, not reaped
  kGone,             // no longer there: detail says how it ended, when known
  kSilent,           // its recorder went quiet (no heartbeat): stopped, frozen or dead
};
const char* to_string(Liveness l);
// Whether a process in this state can still make progress.
bool can_run(Liveness l);

struct Life {
  Liveness state = Liveness::kUnknown;
  std::string detail;  // "wait channel nvidia_wait", "exit code 7", "no heartbeat for 12 s"
};

// A process as /proc showed it (probes/base/process_look.hpp), as a Life.
Life life_of(const proc::ProcessLook& look);

struct Rank {
  int rank = 0;
  std::string where;      // "node-a pid 4711", where known
  std::vector<Op> ops;    // ascending seq; may begin past 0 (a ring buffer dropped the oldest)
  bool finished = false;  // it left the group (finalised, destroyed): nothing more is coming
  Life life;
};

struct Group {
  std::string id;                     // the communicator's id or the process group's
  std::string name;                   // the application's name for it, if any
  int nranks = 0;                     // 0: unknown
  std::string kind = "communicator";  // what the text calls it: "communicator", "process group"
  // How a position is written before its number: "#" ("AllReduce #12", a sequence number the
  // application's tools show too) or "op " ("AllReduce op 12", an index of commtool's own).
  std::string position = "#";
  std::vector<Rank> ranks;  // those with records, any order
};

class Job {
 public:
  uint32_t call(const Call& c);  // interned: equal calls share an id
  const Call& call(uint32_t id) const { return calls_[id]; }
  uint32_t site(const std::string& s);
  const std::string& site(uint32_t id) const { return sites_[id]; }

  std::vector<Group> groups;
  // What is in flight will not finish by itself: a hang was seen (a timeout, the hang monitor),
  // or the job is over. Otherwise (a job still running normally) an operation in flight is just
  // in progress, and only disagreements and ranks without records are findings.
  bool stuck = false;
  // What a rank without records means for this kind of artifact.
  std::string absent_means = "no recorder in its process, or it never joined";
  // What to check for such a rank, for this kind of artifact: the next step of a finding that
  // names it.
  std::string absent_check =
      "check that its process started and loaded commtool's profiler plugin "
      "(NCCL_PROFILER_PLUGIN in its environment; record's standard error names the processes it "
      "saw) and reached its communicator's init (NCCL_DEBUG=INFO logs ncclCommInitRank)";

 private:
  std::vector<Call> calls_;
  std::map<Call, uint32_t> call_ids_;
  std::vector<std::string> sites_;
  std::map<std::string, uint32_t> site_ids_;
};

enum class Rule { kMissing, kDisagree, kBehind, kHeld, kBelow };
const char* to_string(Rule r);

// Ranks of one group that did the same thing.
struct Side {
  std::vector<int> ranks;
  uint32_t call = 0;
  uint32_t site = kNoSite;  // the lowest rank's
};

// Ranks that share their last completed operation (none: they completed none held).
struct LastDone {
  std::vector<int> ranks;
  std::optional<uint64_t> seq;
  std::optional<uint32_t> call;
};

// Ranks that share a process state.
struct LifeGroup {
  std::vector<int> ranks;
  Life life;
};

struct Finding {
  Rule rule = Rule::kBelow;
  size_t group = 0;              // in Job::groups
  uint64_t seq = 0;              // the operation in question
  std::optional<uint32_t> call;  // what it is (as the lowest waiting rank called it)
  std::vector<int> ranks;        // missing, behind, held: the ranks at fault; below: the waiting
  std::vector<int> waiting;      // the ranks with it in flight
  std::vector<int> past;         // the ranks that completed it (what a held rank wrote may lag)
  int64_t waiting_since_wall_ns = 0;
  std::vector<Side> sides;       // disagree: largest first, ties by lowest rank
  std::string field;             // disagree: what differs between the first two sides
  uint64_t later = 0;            // disagree: positions after this one that disagree too
  std::vector<LastDone> last;    // missing, behind: where the ranks at fault stopped
  std::vector<LifeGroup> lives;  // the ranks at fault, by what their processes do
  std::vector<int> no_records;   // missing: of `ranks`, those with no records at all
  // below: the group disagrees at or before this position, which explains the wait; not a
  // cause below NCCL.
  bool after_disagreement = false;
};

struct Verdict {
  std::vector<Finding> findings;  // the verdict first, then its consequences
  bool hang = false;              // Job::stuck with operations in flight
  bool error() const { return !findings.empty(); }
};

// Sorts every group's ranks by rank and every rank's operations by seq (stable: a position
// given twice keeps its order). Producers call it once they have filled the job.
void normalise(Job& job);

// Throws std::logic_error for a job that is not normalised (a producer's mistake).
Verdict analyse(const Job& job);

// "0-4095 except 17" when the ranks left out are few and form fewer runs than those named, else
// "0-3,8,10-12"; `nranks` 0: unknown size.
std::string rank_set(std::vector<int> ranks, int nranks);
// "rank 3" or "ranks 0-2,5".
std::string ranks_text(const std::vector<int>& ranks, int nranks);

// Wall-clock ns since the epoch as "12:03:05" and as "2026-12-04 12:03:05 UTC" (UTC; a time
// before the epoch in its own second), as every verdict and recording writes times.
std::string utc_clock(int64_t wall_ns);
std::string utc_date_time(int64_t wall_ns);
// "AllReduce #12 (1048576 x float32, sum)", with the group's way of writing a position.
std::string call_text(const Job& job, const Group& g, uint32_t call, uint64_t seq);

// One finding as a sentence ("BEHIND on communicator ...: rank 1 never started ...").
std::string finding_text(const Job& job, const Finding& f);

// What to do next about one finding, for its rule and evidence: which rank's process to look at
// and with what, what to resume, what to fix, what to collect. Never empty.
std::string finding_advice(const Job& job, const Finding& f);

// The verdict for an on-call engineer: one paragraph per finding, the first marked as the
// verdict, each followed by "  what to do: " and its advice; "No disagreement, no rank missing
// or behind" when there is none. Text from the artifacts is escaped before it reaches a
// terminal.
std::string render_text(const Job& job, const Verdict& v);

}  // namespace commtool::crossrank
