// An NCCL communicator that can never hang its owner: created non-blocking
// (ncclConfig_t.blocking = 0), every wait on it polls ncclCommGetAsyncError against a deadline,
// and a stuck communicator is aborted (ncclCommAbort) with an error naming the rank and the
// operation, exit code 5.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <string>

#include "probes/nccl/nccl_library.hpp"

namespace commtool::nccl {

class Communicator {
 public:
  Communicator(const Library& lib, const ncclUniqueId& id, int nranks, int rank,
               std::chrono::duration<double> timeout);
  ~Communicator();  // finalises within the timeout, else aborts
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }

  // After a call that may return ncclInProgress: waits until the communicator is ready again.
  void settle(ncclResult_t issued, const std::string& what);

  // Waits for `done` (recorded after the operation) while watching the communicator's async
  // error; aborts and throws Error(kTimeout) naming `what` past the deadline.
  void wait(cudaEvent_t done, const std::string& what);

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
  std::atomic<bool> aborted_{false};
};

}  // namespace commtool::nccl
