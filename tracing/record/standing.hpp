// Where every rank of a recorded job stands: per communicator (one id across the processes
// that hold its ranks), what each rank last finished and what it has started and not finished,
// and from that who holds the others up. `commtool record`'s hang monitor prints it when the
// job goes quiet; `commtool report` prints it for a recording that hung. Pure: the same
// recording and "now" give the same standing anywhere.
//
// The verdict is the cross-rank analysis's (tracing/crossrank/crossrank.hpp) over the
// recording's operations, by index on each communicator: every ended operation a report reads
// (Retention::kAll), the latest kRecentEndedPerRank of each rank in the hang monitor
// (Retention::kStanding), and those in flight. A process's state comes from its heartbeat (one
// alive line a second): older than StandingOptions::heartbeat_lapse_s while it has operations
// in flight or communicators not finalised, it has stopped (died, was killed, or is frozen);
// the monitor, which can look at the processes of its own host, says which
// (StandingOptions::lives). An operation whose end line says complete=false ended without its
// kernel being seen to finish: it counts as unverified, not in flight.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tracing/crossrank/crossrank.hpp"
#include "tracing/profiler/record_line.hpp"
#include "tracing/record/recording.hpp"

namespace commtool::record {

struct StandingOptions {
  int64_t now_wall_ns = 0;         // "now", wall-clock ns since the epoch
  double heartbeat_lapse_s = 5.0;  // a heartbeat older than this: the process has stopped
  bool job_ended = false;          // the job is over: no process runs, however recent its heartbeat
  // What is in flight is stuck (a hang was seen, or the job is over): the verdict then says who
  // holds it. Otherwise only disagreements and ranks without records are findings.
  bool stuck = false;
  // What each process is doing, by (host, pid), where someone could look (the monitor, on its
  // own host); the others' state is their heartbeat's.
  std::map<std::pair<std::string, int64_t>, crossrank::Life> lives;
};

// What an operation was: enough to name it and to compare it across ranks.
struct OpRef {
  uint64_t index = 0;
  nccl_profiler::OpKind kind = nccl_profiler::OpKind::kCollective;
  std::optional<uint64_t> seq;
  std::string func;
  uint64_t count = 0;
  std::string datatype;
  int peer = -1;
  bool operator==(const OpRef&) const = default;
};
OpRef op_ref(const nccl_profiler::StartLine& s);

struct InFlightOp {
  OpRef op;
  int64_t since_wall_ns = 0;  // its start line's time
};

struct RankStanding {
  int rank = 0;
  size_t process = 0;  // in Standing::processes
  uint64_t started = 0, completed = 0, unverified = 0, forgotten = 0;
  std::optional<OpRef> last_ended;  // the ended operation of highest index
  bool last_ended_complete = true;
  int64_t last_ended_wall_ns = 0;     // when its kernel was last seen, else its enqueue ended
  std::vector<InFlightOp> in_flight;  // oldest first
  bool finalized = false;
};

enum class ProcessState {
  kRunning,  // heartbeat within the lapse, and the job not over
  kExited,   // heartbeat stopped, every communicator finalised, nothing in flight
  kStopped,  // heartbeat stopped otherwise: died or was killed
  kSilent,   // no line yet beyond, at most, its proc line
};
const char* to_string(ProcessState s);

struct ProcessStanding {
  std::string file;
  std::string host;
  int64_t pid = 0;
  ProcessState state = ProcessState::kSilent;
  std::optional<int64_t> last_alive_wall_ns;
  double quiet_s = 0;  // since its last heartbeat (or last line, without one)
  uint64_t in_flight = 0;
  uint64_t dropped_lines = 0;
  std::optional<int64_t> first_drop_wall_ns;
};

struct CommStanding {
  uint64_t comm = 0;
  std::string name;
  int nranks = 0;                   // from its comm lines; 0 when none was recorded
  std::vector<RankStanding> ranks;  // by rank
  std::vector<int> unseen;          // ranks below nranks that no process recorded
  uint64_t in_flight = 0;
};

struct Standing {
  int64_t now_wall_ns = 0;
  uint64_t in_flight = 0;                  // started, no end line yet
  uint64_t completed = 0;                  // end lines with complete = true
  uint64_t unverified = 0;                 // end lines with complete = false
  std::vector<ProcessStanding> processes;  // as Recording::processes
  std::vector<CommStanding> comms;         // by communicator id
  std::vector<std::string> warnings;       // the recording's
  // The cross-rank verdict: one group per communicator (Standing::comms' order), positions are
  // operation indexes ("AllReduce op 5").
  crossrank::Job job;
  crossrank::Verdict verdict;
};

Standing where_everyone_stands(const Recording& rec, const StandingOptions& options);

// For an on-call engineer: the cross-rank verdict first (or that nothing is in flight), then per
// communicator each rank's last and in-flight operations, then the processes. Wall-clock times
// in UTC.
std::string render_standing_text(const Standing& s);

}  // namespace commtool::record
