// The worker side of the launcher/worker split: one process per rank, each
// with its own CUDA context, started by the launcher as `commtool __worker ...`. A worker
// connects to the launcher's private socket, receives one task, runs the handler registered
// under the task's "name" and sends back its result or its error.
//
// No worker outlives its launcher: the kernel SIGKILLs it when the launcher dies
// (PR_SET_PDEATHSIG), and it leaves when the launcher's socket closes. This file knows nothing
// of CUDA; the handlers do.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "probes/base/error.hpp"
#include "probes/base/workers/communicator.hpp"
#include "probes/base/workers/progress_board.hpp"

namespace commtool::workers {

// argv[1] of a worker process; hidden from users.
inline constexpr const char* kWorkerCommand = "__worker";

// What a handler knows about where it runs.
struct WorkerContext {
  int rank;
  int size;
  int device;  // the CUDA ordinal to use (PCI bus order)
  Communicator& comm;
  std::chrono::duration<double> timeout;  // --timeout: the bound on each GPU operation
  Progress& progress;                     // this rank's slot on the launcher's progress board
};

// Runs one task and returns its result. Throws commtool::Error to fail the run with that exit
// code and message; the message should name the rank ("rank 1: wrong data").
using TaskHandler = std::function<nlohmann::json(WorkerContext&, const nlohmann::json& task)>;

// Makes `name` runnable as a task; a second registration of a name replaces the first. Call
// before worker_main, from main().
void register_task(const std::string& name, TaskHandler handler);

// cli's exit status for a bug (an exception that is not commtool::Error); ExitCode does not
// name it because scripts are never asked to act on it.
inline constexpr ExitCode kInternalErrorCode = static_cast<ExitCode>(1);

// The whole life of a worker process: parses
//   commtool __worker --socket PATH --rank R --size N --device D --timeout S [--progress FILE]
// connects, says HELLO, runs the TASK and reports. Returns the process's exit status: 0, or the
// code of the error it reported.
int worker_main(int argc, char** argv);

}  // namespace commtool::workers
