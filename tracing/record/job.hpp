// The user's job as `commtool record` runs it: their command, unchanged, with a few variables
// added to its environment. Unlike a worker (probes/base/workers/child_process.hpp) it keeps
// commtool's terminal, process group and standard streams, so Ctrl-C, a debugger's prompt and
// the job's output behave as without commtool, and it outlives commtool if commtool is killed:
// the job's fate is never commtool's.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace commtool::record {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Where `name` would be run from, searched in $PATH as a shell does (a name with a slash is
// taken as it is); nullopt when there is no executable file by that name.
std::optional<std::string> find_executable(const std::string& name);

class Job {
 public:
  // Starts argv with this process's environment plus `extra` (each NAME replaced if set).
  // Throws commtool::Error(kUsage) naming the command when it cannot be executed (not found,
  // not executable, not a program), after making sure no child is left.
  static Job start(const std::vector<std::string>& argv, const EnvVars& extra);

  Job() = default;
  ~Job();
  Job(Job&& other) noexcept;
  Job& operator=(Job&& other) noexcept;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  pid_t pid() const { return pid_; }
  // Reaps the job if it has ended, without blocking; true once it has.
  bool poll_exit();
  bool ended() const { return reaped_; }
  // Once ended: its exit status, or 128 + the signal that killed it, as a shell reports it.
  int shell_status() const;
  std::optional<int> exit_code() const;
  std::optional<int> signal_number() const;
  std::string describe_exit() const;  // "exited with status 1", "killed by signal 9 (SIGKILL)"

  // Sends sig to the job's own process (torchrun, say, which forwards it to its workers).
  void signal(int sig) const;
  // Ends the job and everything it started: `first` (SIGTERM unless told) to every process
  // below it and to it, `grace` for them to exit, then SIGKILL. Processes the job left behind
  // count too where this process adopted them (AdoptOrphans). Returns how many processes were
  // signalled.
  int terminate_tree(std::chrono::duration<double> grace, int first = SIGTERM);

 private:
  explicit Job(pid_t pid) : pid_(pid) {}

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// Every process below `pid` (children, their children, ...), from /proc. Empty where /proc
// does not list children (a kernel without CONFIG_PROC_CHILDREN).
std::vector<pid_t> descendants(pid_t pid);

// While alive, this process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a process of
// the job whose parent exits (a shell's `cmd &`, a launcher that dies first) is reparented to
// commtool instead of init, so the job's tree stays below commtool and terminate_tree reaches
// all of it. reap() collects those adopted ones that have exited, leaving `job` to
// Job::poll_exit. The previous setting comes back with the destructor.
class AdoptOrphans {
 public:
  AdoptOrphans();
  ~AdoptOrphans();
  AdoptOrphans(const AdoptOrphans&) = delete;
  AdoptOrphans& operator=(const AdoptOrphans&) = delete;
  void reap(pid_t job) const;

 private:
  int previous_ = 0;
};

}  // namespace commtool::record
