// The launcher side of the process model: starts one worker process per rank, referees their
// barriers and allgathers over a private Unix-domain socket, and collects their results. The
// launcher itself never touches CUDA, so a worker stuck in a GPU call can always be killed and
// reported; nothing here waits on a worker without a bound.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/error.hpp"

namespace commtool::workers {

struct WorkerSpec {
  int rank;
  int device;  // CUDA ordinal, PCI bus order
};

struct WorkerFailure {
  int rank;  // the failing rank, or the first of those the group waited for
  int device;
  std::string what;  // the whole sentence, naming rank(s), GPU(s) and what went wrong
  ExitCode code;     // what commtool should exit with
  // When a worker refused a value of the request (a BadValue): its parts, so that the caller
  // can name the value its own way. Empty otherwise.
  std::string bad_field, bad_value, bad_why;
};

struct GroupOutcome {
  std::vector<nlohmann::json> results;  // by rank; null for a rank that did not report
  std::optional<WorkerFailure> failure;
  // Where the private socket lived and which processes ran: by the time run_workers returns
  // the directory is removed and every process reaped. For tests and --verbose.
  std::string socket_dir;
  std::vector<pid_t> worker_pids;  // by rank
};

// Runs `task` (a JSON object whose "name" picks the worker's handler) on one worker per spec:
//   executable __worker --socket PATH --rank R --size N --device D --timeout S --progress FILE
// S is `step`, the bound each worker puts on every GPU wait and NCCL call (--timeout); zero
// means `timeout`. FILE is the progress board (progress_board.hpp) the workers write.
// `executable` is a path for execve (/proc/self/exe for this binary); specs must hold ranks
// 0..N-1 once each. Returns when every rank has reported, or at the first failure:
//  - a worker reported an error: its message and exit code;
//  - a worker died before reporting: "worker for rank 2 (GPU 1) died: killed by signal 9
//    (SIGKILL)", exit code 5;
//  - no worker made progress for `timeout` (start-up, a barrier, an allgather, the results):
//    "rank 1 (GPU 0) did not reach barrier #3 within 2.0 s", exit code 5;
//  - a worker stayed inside one step it marked busy on the board for more than `step` + 1 s
//    (a blocking NCCL call waiting for a peer that never comes), exit code 5;
//  - the board shows the ranks enqueued different operations at one seq (a collective
//    mismatch), exit code 5, whatever else failed first.
// When the workers used the board, the failure's sentence goes on with where each rank stood
// and which one is behind (progress_report.hpp).
// Afterwards the workers still running get SIGTERM, then SIGKILL a second later, and are
// reaped; the socket and its directory are removed; also when this throws.
//
// While it runs, SIGINT and SIGTERM stop the workers the same way, print "commtool:
// interrupted; stopped N workers" and end the process with status 128 + the signal (130, 143).
// One call at a time per process (it owns those two signals while it runs); call it from a
// thread that lives until it returns.
//
// Throws commtool::Error(kEnvironment) when the socket or a process cannot be created.
//
// While a ClusterScope is alive (an MPI job, cluster_group.hpp) the group spans the job instead:
// specs must hold every rank of the job, each node starts its own rank's worker from its own
// executable, and the outcome is complete at rank 0 only.
GroupOutcome run_workers(const std::string& executable, const std::vector<WorkerSpec>& specs,
                         const nlohmann::json& task, std::chrono::duration<double> timeout,
                         std::chrono::duration<double> step = {});

// run_workers for a caller that wants only the results, by rank: a failed group is thrown as
// Error(its exit code, its sentence).
std::vector<nlohmann::json> run_workers_or_throw(const std::string& executable,
                                                 const std::vector<WorkerSpec>& specs,
                                                 const nlohmann::json& task,
                                                 std::chrono::duration<double> timeout,
                                                 std::chrono::duration<double> step = {});

}  // namespace commtool::workers
