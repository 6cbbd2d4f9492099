// A worker process as the launcher holds it: started with fork+exec in its own process group
// (so the terminal's Ctrl-C reaches only the launcher, which then stops the workers in order),
// SIGKILLed by the kernel if the launcher dies, and always reaped: the destructor kills and
// waits for a child that is still running, so an exception never leaves a zombie behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace commtool::workers {

// A child's state as waitpid(WNOHANG) tells it, through EINTR: still running, or ended with its
// wait status, or ended with none when someone else reaped it (ECHILD: SIGCHLD set to SIG_IGN
// does that; how it ended is lost).
struct ChildExit {
  bool ended = false;
  std::optional<int> wait_status;
};
ChildExit poll_child(pid_t pid);

class ChildProcess {
 public:
  // Runs argv[0] (a path; no PATH search) with argv and exactly the environment env, stdin
  // from /dev/null, stdout onto stderr (the launcher's stdout carries only its report). Call
  // from a thread that outlives the child: PR_SET_PDEATHSIG fires when the forking thread ends.
  // Throws commtool::Error(kEnvironment) when fork fails; a failed exec shows up as the child
  // exiting with status 127.
  static ChildProcess spawn(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env);

  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }
  // Reaps the child if it has exited, without blocking. Returns true once it has been reaped.
  bool poll_exit();
  // How it ended, once reaped: "exited with status 3", "killed by signal 9 (SIGKILL)".
  std::string describe_exit() const;
  bool killed_by_signal() const;
  // Sends sig to the child's process group (the worker and anything it started), if running.
  void signal(int sig) const;

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  void release();  // kills and reaps if still running

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  bool status_known_ = false;
};

// What became of a worker whose connection closed before it reported (`who`: "worker for rank 1
// (GPU 0)"): its socket closes during its exit, a moment before the exit status can be
// collected, so this waits up to `grace` for it. "... died: killed by signal 9 (SIGKILL)".
std::string describe_lost(ChildProcess& child, const std::string& who,
                          std::chrono::milliseconds grace);

// Stops every child still running: SIGTERM, up to `grace` for them to exit, then SIGKILL. Reaps
// them all, except one stuck in the kernel even after SIGKILL (a wedged driver call), which is
// named on stderr rather than waited on forever. Returns how many were running.
int stop_children(std::vector<ChildProcess>& children, std::chrono::duration<double> grace);

// Waits until every child has exited on its own or the deadline passes; true if all have.
bool wait_children(std::vector<ChildProcess>& children,
                   std::chrono::steady_clock::time_point deadline);

// The environment a worker starts with: this process's own, with GPU indices in PCI bus order as
// everywhere in commtool (CUDA_DEVICE_ORDER=PCI_BUS_ID unless the user chose an order).
std::vector<std::string> worker_environment();

}  // namespace commtool::workers
