// SIGINT and SIGTERM turned into bytes on a pipe, for a poll loop to read at a point where it can
// stop its workers in order (the launcher: Ctrl-C must not leave a worker holding a GPU). The
// handlers are installed for the object's lifetime and the previous ones restored after; a
// signal the process was already ignoring (nohup, a background job) stays ignored.
#pragma once

#include <signal.h>

#include "probes/base/workers/unique_fd.hpp"

namespace commtool::workers {

class SignalTrap {
 public:
  // Throws std::logic_error if another SignalTrap is alive: the handlers are process-wide.
  SignalTrap();
  ~SignalTrap();
  SignalTrap(const SignalTrap&) = delete;
  SignalTrap& operator=(const SignalTrap&) = delete;

  int fd() const { return read_.get(); }  // readable when a signal has come
  int take();                             // the first signal not yet taken, or 0

 private:
  struct Trapped {
    int sig;
    struct sigaction previous {};
    bool installed = false;
  };
  UniqueFd read_;
  UniqueFd write_;
  Trapped trapped_[2] = {{SIGINT}, {SIGTERM}};
};

}  // namespace commtool::workers
