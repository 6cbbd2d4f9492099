// Signals (SIGINT and SIGTERM unless told otherwise) turned into bytes on a pipe, for a poll loop
// to read at a point where it can act in order (the launcher: Ctrl-C must not leave a worker
// holding a GPU; `record`: SIGUSR1 asks where every rank stands). The handlers are installed for
// the object's lifetime and the previous ones restored after; a signal the process was already
// ignoring (nohup, a background job) stays ignored. A handler, unlike SIG_IGN, is reset by exec,
// so a child started meanwhile gets the default disposition.
#pragma once

#include <signal.h>

#include <initializer_list>
#include <vector>

#include "probes/base/workers/unique_fd.hpp"

namespace commtool::workers {

class SignalTrap {
 public:
  // Throws std::logic_error if another SignalTrap is alive: the handlers are process-wide.
  explicit SignalTrap(std::initializer_list<int> signals = {SIGINT, SIGTERM});
  ~SignalTrap();
  SignalTrap(const SignalTrap&) = delete;
  SignalTrap& operator=(const SignalTrap&) = delete;

  struct Caught {
    int sig = 0;  // 0: none
    // Sent by a process (kill, sigqueue), not by the kernel: a terminal's Ctrl-C reaches every
    // process of its foreground group from the kernel, so the job got that one too.
    bool sent_by_process = false;
  };

  int fd() const { return read_.get(); }  // readable when a signal has come
  Caught take_caught();                   // the first signal not yet taken, or sig 0
  int take() { return take_caught().sig; }

 private:
  struct Trapped {
    int sig;
    struct sigaction previous {};
    bool installed = false;
  };
  UniqueFd read_;
  UniqueFd write_;
  std::vector<Trapped> trapped_;
};

}  // namespace commtool::workers
