#include "probes/base/workers/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>
#include <utility>

#include "probes/base/error.hpp"

extern char** environ;

namespace commtool::workers {

namespace {

using namespace std::chrono_literals;

// How long a SIGKILLed process may take to disappear before we stop waiting: one blocked in an
// uninterruptible driver call dies only when the call returns, which may be never.
constexpr auto kKillWait = 5s;

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "unknown";
}

}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env) {
  // Everything the child needs is built before fork: the child of a multi-threaded process may
  // only make async-signal-safe calls until it execs.
  std::vector<char*> args = pointers(argv);
  std::vector<char*> envp = pointers(env);
  std::string exec_failed = fmt::format("commtool: cannot run worker {}\n", argv.at(0));
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("cannot start a worker: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);       // survives exec
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    int null = ::open("/dev/null", O_RDONLY);
    if (null > 0) {
      ::dup2(null, 0);
      ::close(null);
    }
    // Standard output is the launcher's report (a --json document, say): whatever a worker's
    // libraries print there (NCCL_DEBUG=INFO logs to stdout) goes to standard error instead.
    ::dup2(2, 1);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(args[0], args.data(), envp.data());
    ssize_t ignored = ::write(2, exec_failed.data(), exec_failed.size());
    (void)ignored;
    ::_exit(127);
  }
  // Also here, so that signalling the group cannot race the child's own setpgid.
  ::setpgid(pid, pid);
  return ChildProcess(pid);
}

ChildProcess::~ChildProcess() {
  release();
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(other.reaped_),
      status_(other.status_),
      status_known_(other.status_known_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    status_ = other.status_;
    status_known_ = other.status_known_;
  }
  return *this;
}

void ChildProcess::release() {
  if (!running()) return;
  signal(SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + kKillWait;
  while (!poll_exit() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
}

ChildExit poll_child(pid_t pid) {
  int status = 0;
  pid_t got;
  do {
    got = ::waitpid(pid, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == pid) return {true, status};
  if (got < 0) return {true, std::nullopt};
  return {};
}

bool ChildProcess::poll_exit() {
  if (!running()) return reaped_;
  const ChildExit e = poll_child(pid_);
  if (e.ended) {
    reaped_ = true;
    status_known_ = e.wait_status.has_value();
    status_ = e.wait_status.value_or(0);
  }
  return reaped_;
}

bool ChildProcess::killed_by_signal() const {
  return status_known_ && WIFSIGNALED(status_);
}

std::string ChildProcess::describe_exit() const {
  if (!status_known_) return "ended (its exit status was collected elsewhere)";
  if (WIFSIGNALED(status_)) {
    int sig = WTERMSIG(status_);
    return fmt::format("killed by signal {} ({})", sig, signal_name(sig));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status_));
}

void ChildProcess::signal(int sig) const {
  if (!running()) return;  // a reaped pid may already belong to someone else
  ::kill(-pid_, sig);
  ::kill(pid_, sig);  // in case it has not reached its own process group yet
}

bool wait_children(std::vector<ChildProcess>& children,
                   std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    bool all = true;
    for (ChildProcess& child : children)
      all = child.poll_exit() && all;
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

int stop_children(std::vector<ChildProcess>& children, std::chrono::duration<double> grace) {
  int running = 0;
  for (ChildProcess& child : children) {
    if (child.poll_exit()) continue;
    ++running;
    child.signal(SIGTERM);
  }
  if (running == 0) return 0;
  auto now = std::chrono::steady_clock::now();
  if (wait_children(children, now + std::chrono::duration_cast<std::chrono::nanoseconds>(grace))) {
    return running;
  }
  for (ChildProcess& child : children)
    child.signal(SIGKILL);
  if (!wait_children(children, std::chrono::steady_clock::now() + kKillWait)) {
    for (ChildProcess& child : children) {
      if (child.running()) {
        std::cerr << "commtool: worker process " << child.pid()
                  << " did not exit after SIGKILL (stuck in the kernel: check `dmesg` for Xid "
                     "errors); leaving it\n";
      }
    }
  }
  return running;
}

std::vector<std::string> worker_environment() {
  std::vector<std::string> env;
  bool has_order = false;
  for (char** entry = environ; *entry; ++entry) {
    env.emplace_back(*entry);
    has_order = has_order || env.back().starts_with("CUDA_DEVICE_ORDER=");
  }
  if (!has_order) env.emplace_back("CUDA_DEVICE_ORDER=PCI_BUS_ID");
  return env;
}

std::string describe_lost(ChildProcess& child, const std::string& who,
                          std::chrono::milliseconds grace) {
  const auto until = std::chrono::steady_clock::now() + grace;
  while (!child.poll_exit() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (child.running()) return who + " closed its connection before reporting";
  if (child.killed_by_signal()) return who + " died: " + child.describe_exit();
  return who + " " + child.describe_exit() + " before reporting";
}

}  // namespace commtool::workers
