// An NCCL communicator whose every wait is bounded, in either of NCCL's two modes:
//
// - blocking (ncclConfig_t.blocking = 1, what PyTorch creates and the default): NCCL launches
//   each operation on the calling thread, as a framework's call does, and a call waiting for a
//   peer (ncclCommInitRank, a grouped send/recv's connection set-up) cannot be interrupted from
//   inside the process: NCCL does not support ncclCommAbort while another thread is in a
//   blocking init. Such a call is bounded from outside: the caller marks itself busy on the
//   launcher's progress board, and the launcher kills a worker that stays busy past --timeout.
// - non-blocking (blocking = 0): every call returns at once (ncclInProgress) and NCCL launches
//   a group from a thread it starts for it; init and every wait poll ncclCommGetAsyncError
//   against a deadline, and a stuck communicator is aborted (ncclCommAbort) in-process.
//
// Either way an event wait polls against the deadline and aborts the communicator past it, with
// an error naming the rank and the operation, exit code 5.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "probes/base/nccl/nccl_library.hpp"
#include "probes/base/workers/progress_board.hpp"

namespace commtool::nccl {

enum class CommMode { kBlocking, kNonBlocking };
std::string to_string(CommMode m);  // "blocking", "nonblocking"
std::optional<CommMode> parse_comm_mode(const std::string& text);

class Communicator {
 public:
  // `progress`, when given, learns when this rank joins and leaves (and is marked busy for it).
  Communicator(const Library& lib, const ncclUniqueId& id, int nranks, int rank,
               std::chrono::duration<double> timeout, CommMode mode = CommMode::kBlocking,
               workers::Progress* progress = nullptr);
  // Finalises (bounded by the timeout in non-blocking mode), else aborts; aborts at once while
  // an exception unwinds, so a failing rank reports without waiting for its peers.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  CommMode mode() const { return mode_; }

  // After a call that may return ncclInProgress: waits until the communicator is ready again.
  void settle(ncclResult_t issued, const std::string& what);

  // Waits for `done` (recorded after the operation) while watching the communicator's async
  // error; aborts and throws Error(kTimeout) naming `what` past the deadline. `on_poll` runs
  // between two polls (progress reporting).
  void wait(cudaEvent_t done, const std::string& what,
            const std::function<void()>& on_poll = nullptr);

  // Throws Error(kEnvironment) with NCCL's words if the communicator reported an error.
  void check_async(const std::string& what);

  // For a watchdog thread whose owner is stuck in a blocking CUDA call (cudaDeviceSynchronize
  // behind a collective that never ends): aborting makes NCCL's kernels return. The owner
  // must then stop using the communicator; its destructor does nothing more.
  void abort_from_watchdog();

 private:
  [[noreturn]] void abort_with(const std::string& why);

  const Library& lib_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  std::chrono::duration<double> timeout_;
  CommMode mode_;
  workers::Progress* progress_;
  std::atomic<bool> aborted_{false};
};

}  // namespace commtool::nccl
