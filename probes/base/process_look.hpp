// What a process is doing, as /proc shows it to anyone on its host: running, stopped by a
// signal or a tracer, in uninterruptible sleep (and where: its kernel wait channel), a zombie,
// or gone. `commtool record` looks at the job's processes when it sees a hang and the worker
// launcher at a worker that overran its step, so that a verdict can say "rank 1's process is
// stopped" rather than only "rank 1 never started".
//
// A process is as stuck as its most stuck thread: one thread in uninterruptible sleep (a
// driver call that does not return) holds the whole rank, whatever the other threads do. So
// every thread's state is read (at most kMaxThreadsLooked of them), and folded: uninterruptible
// wins, then stopped or traced when every thread is, then zombie; otherwise running.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::proc {

inline constexpr int kMaxThreadsLooked = 4096;

enum class RunState {
  kRunning,          // running or sleeping as processes do (R, S, I)
  kStopped,          // every thread stopped by a signal (T): SIGSTOP, SIGTSTP, a job control
  kTraced,           // every thread stopped by a tracer (t), or a TracerPid: a debugger holds it
  kUninterruptible,  // a thread in uninterruptible sleep (D)
  kZombie,           // exited, not reaped by its parent (Z)
  kGone,             // no such process (or X: dead, being reaped)
};
const char* to_string(RunState s);

struct ProcessLook {
  RunState state = RunState::kGone;
  std::string wait_channel;  // kUninterruptible: the thread's wchan, when readable
  int64_t tracer_pid = 0;    // a tracer attached to it (ptrace), else 0
  int threads = 0;           // threads looked at
};

// The state letter of a /proc/<pid>/stat line ("4711 (py thon) S 1 ..."): the first field
// after the last ')', since the command name may hold spaces and parentheses. None when the
// text is not such a line.
std::optional<char> stat_state(std::string_view stat);

// The process `pid` under `proc_root` (tests give a tree of their own).
ProcessLook look_at(int64_t pid, const std::filesystem::path& proc_root = "/proc");

// A thread in uninterruptible sleep is stuck only if it stays there: driver calls take and
// release their locks in D state all the time (os_acquire_mutex while another process on the
// same GPU aborts its communicator, seen on an H200). So a process found in D is looked at
// again every kSteadyPoll until `window` has passed, and is reported in D only if every look
// found it there; the first look that finds it elsewhere is the one returned. The other states
// are taken at the first look. Every pid is watched over the same window, not one after another.
inline constexpr std::chrono::milliseconds kSteadyWindow{1000};
inline constexpr std::chrono::milliseconds kSteadyPoll{50};
std::vector<ProcessLook> look_steadily(const std::vector<int64_t>& pids,
                                       std::chrono::milliseconds window = kSteadyWindow,
                                       const std::filesystem::path& proc_root = "/proc");

// "stopped (SIGSTOP or a debugger)", "uninterruptible sleep in nvidia_ioctl", ...
std::string describe(const ProcessLook& look);

}  // namespace commtool::proc
