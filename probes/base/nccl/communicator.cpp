#include "probes/base/nccl/communicator.hpp"

#include <fmt/format.h>

#include <exception>
#include <thread>

#include "probes/base/error.hpp"

namespace commtool::nccl {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::microseconds(20);

// The pause between two polls. A non-blocking communicator's ncclGroupEnd returns
// ncclInProgress while a thread of NCCL's launches the group, which takes tens of
// microseconds; a sleep then lasts its 20 us plus the kernel's timer slack (50 us by default),
// and everything the caller queues after the call (the end event above all) comes that much
// late. On the H200 that made a 36 us exchange measure 52 us and its enqueue 106 us instead of
// 17 us. So: yield for the first milliseconds, sleep after (communicator start-up takes
// seconds).
class Backoff {
 public:
  void pause() {
    if (Clock::now() - start_ < kSpin) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPoll);
    }
  }

 private:
  static constexpr auto kSpin = std::chrono::milliseconds(2);
  Clock::time_point start_ = Clock::now();
};

}  // namespace

Communicator::Communicator(const Library& lib, const ncclUniqueId& id, int nranks, int rank,
                           std::chrono::duration<double> timeout, CommMode mode,
                           workers::Progress* progress)
    : lib_(lib), rank_(rank), timeout_(timeout), mode_(mode), progress_(progress) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = mode == CommMode::kBlocking ? 1 : 0;
  if (progress_) {
    progress_->phase(workers::Phase::kJoining);
    progress_->busy();
  }
  ncclResult_t r = lib_.comm_init_rank_config(&comm_, nranks, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    lib_.check(r, "ncclCommInitRankConfig");
  }
  settle(r, "communicator initialisation");
  if (progress_) {
    progress_->phase(workers::Phase::kRunning);
    progress_->idle();
  }
}

Communicator::~Communicator() {
  if (comm_ == nullptr || aborted_) return;
  if (std::uncaught_exceptions() > 0) {
    // A failing rank: finalising would wait for peers that may never come.
    lib_.comm_abort(comm_);
    return;
  }
  if (progress_) {
    progress_->phase(workers::Phase::kLeaving);
    progress_->busy();
  }
  // Finalize flushes outstanding work; if that does not finish in time, abort.
  ncclResult_t state = lib_.comm_finalize(comm_);
  const auto deadline = Clock::now() + timeout_;
  while (state == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(kPoll);
    if (lib_.comm_get_async_error(comm_, &state) != ncclSuccess) break;
  }
  if (state == ncclSuccess) {
    lib_.comm_destroy(comm_);
  } else {
    lib_.comm_abort(comm_);
  }
  if (progress_) progress_->idle();  // it may wait for its peers' results a while yet
}

void Communicator::abort_from_watchdog() {
  if (!aborted_.exchange(true)) lib_.comm_abort(comm_);
}

void Communicator::check_async(const std::string& what) {
  ncclResult_t async = ncclSuccess;
  lib_.check(lib_.comm_get_async_error(comm_, &async), "ncclCommGetAsyncError");
  if (async != ncclSuccess && async != ncclInProgress) {
    abort_with(fmt::format("{} failed: {}", what, lib_.error_string(async)));
  }
}

void Communicator::abort_with(const std::string& why) {
  if (!aborted_.exchange(true)) lib_.comm_abort(comm_);
  comm_ = nullptr;
  throw Error(ExitCode::kTimeout,
              fmt::format("rank {}: {}; the communicator was aborted", rank_, why));
}

void Communicator::settle(ncclResult_t issued, const std::string& what) {
  if (issued != ncclInProgress && issued != ncclSuccess) lib_.check(issued, what.c_str());
  const auto deadline = Clock::now() + timeout_;
  ncclResult_t state = issued;
  Backoff backoff;
  while (state == ncclInProgress) {
    if (Clock::now() > deadline) {
      abort_with(fmt::format("{} did not finish within {:.1f} s", what, timeout_.count()));
    }
    backoff.pause();
    lib_.check(lib_.comm_get_async_error(comm_, &state), "ncclCommGetAsyncError");
  }
  if (state != ncclSuccess) lib_.check(state, what.c_str());
}

void Communicator::wait(cudaEvent_t done, const std::string& what,
                        const std::function<void()>& on_poll) {
  const auto deadline = Clock::now() + timeout_;
  Backoff backoff;
  while (true) {
    if (on_poll) on_poll();
    cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      throw Error(ExitCode::kEnvironment,
                  fmt::format("rank {}: {}: {}", rank_, what, cudaGetErrorString(e)));
    }
    check_async(what);
    if (Clock::now() > deadline) {
      abort_with(fmt::format("{} did not complete within {:.1f} s", what, timeout_.count()));
    }
    backoff.pause();
  }
}

}  // namespace commtool::nccl
