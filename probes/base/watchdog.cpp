#include "probes/base/watchdog.hpp"

#include <unistd.h>

#include <cstdio>

#include "probes/base/error.hpp"
#include "probes/base/tool_packages.hpp"

namespace commtool {

Watchdog::Watchdog(std::string what, std::chrono::duration<double> limit)
    : what_(std::move(what)), limit_(limit), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (cv_.wait_for(lock, limit_, [this] { return done_; })) return;
  // The stuck call holds no lock we need, but it may never return: report and leave without
  // running destructors that could wait on it.
  if (const char* advice = advice_.load()) {
    std::fprintf(stderr, "commtool %s: timed out after %.1f s in stage '%s' (%s)\n", what_.c_str(),
                 limit_.count(), stage_.load(), advice);
  } else if (driver_call_.load()) {
    std::fprintf(stderr,
                 "commtool %s: timed out after %.1f s in stage '%s' (a driver call did not "
                 "return; check `dmesg` for Xid errors and `nvidia-smi`; %s)\n",
                 what_.c_str(), limit_.count(), stage_.load(), tools::kNvidiaSmi);
  } else {
    std::fprintf(stderr,
                 "commtool %s: timed out after %.1f s in stage '%s' (no driver call was "
                 "running: the input took longer than --timeout to read and analyse; give a "
                 "larger --timeout)\n",
                 what_.c_str(), limit_.count(), stage_.load());
  }
  std::fflush(stderr);
  _exit(static_cast<int>(ExitCode::kTimeout));
}

}  // namespace commtool
