#include "tracing/record/job.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "probes/base/error.hpp"
#include "probes/base/workers/child_process.hpp"

extern char** environ;

namespace commtool::record {

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::vector<std::string> environment_with(const EnvVars& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [n, v] : extra)
      replaced = replaced || n == name;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : extra)
    env.push_back(name + "=" + value);
  return env;
}

// A process that has exited but not been reaped by its parent is gone for our purposes.
bool alive(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "unknown";
}

}  // namespace

std::optional<std::string> find_executable(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    return is_executable_file(name) ? std::optional<std::string>(name) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

Job Job::start(const std::vector<std::string>& argv, const EnvVars& extra) {
  if (argv.empty()) throw usage_error("record: no command given after --");
  const std::optional<std::string> program = find_executable(argv[0]);
  if (!program) {
    throw usage_error(
        fmt::format("record: command {}: not found in PATH or not executable", excerpt(argv[0])));
  }
  // Built before fork: the child may only make async-signal-safe calls until it execs.
  std::vector<std::string> args = argv;
  std::vector<std::string> env = environment_with(extra);
  std::vector<char*> arg_ptrs = pointers(args);
  std::vector<char*> env_ptrs = pointers(env);
  std::string path = *program;

  // exec's errno comes back through a close-on-exec pipe: EOF means the exec succeeded.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    throw Error(ExitCode::kEnvironment, fmt::format("pipe: {}", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(report[0]);
    ::close(report[1]);
    throw Error(ExitCode::kEnvironment,
                fmt::format("cannot start the job: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(report[0]);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(path.c_str(), arg_ptrs.data(), env_ptrs.data());
    const int err = errno;
    ssize_t ignored = ::write(report[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::close(report[1]);
  int err = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &err, sizeof err);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  Job job(pid);
  if (got == static_cast<ssize_t>(sizeof err)) {
    while (!job.poll_exit())
      std::this_thread::sleep_for(1ms);
    throw usage_error(fmt::format("record: cannot run {}: {}", excerpt(path), std::strerror(err)));
  }
  return job;
}

Job::~Job() {
  // The job is never killed for commtool's sake; an exception on the way out only stops
  // commtool from waiting for it.
}

Job::Job(Job&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), reaped_(other.reaped_), status_(other.status_) {}

Job& Job::operator=(Job&& other) noexcept {
  pid_ = std::exchange(other.pid_, -1);
  reaped_ = other.reaped_;
  status_ = other.status_;
  return *this;
}

bool Job::poll_exit() {
  if (pid_ <= 0 || reaped_) return reaped_;
  const workers::ChildExit e = workers::poll_child(pid_);
  if (e.ended) {
    reaped_ = true;
    status_ = e.wait_status.value_or(-1);  // -1: collected elsewhere, how it ended is lost
  }
  return reaped_;
}

std::optional<int> Job::exit_code() const {
  if (!reaped_ || status_ < 0 || !WIFEXITED(status_)) return std::nullopt;
  return WEXITSTATUS(status_);
}

std::optional<int> Job::signal_number() const {
  if (!reaped_ || status_ < 0 || !WIFSIGNALED(status_)) return std::nullopt;
  return WTERMSIG(status_);
}

int Job::shell_status() const {
  if (auto code = exit_code()) return *code;
  if (auto sig = signal_number()) return 128 + *sig;
  return 1;
}

std::string Job::describe_exit() const {
  if (auto code = exit_code()) return fmt::format("exited with status {}", *code);
  if (auto sig = signal_number()) {
    return fmt::format("was killed by signal {} ({})", *sig, signal_name(*sig));
  }
  return "ended (its exit status was collected elsewhere)";
}

void Job::signal(int sig) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

std::vector<pid_t> descendants(pid_t pid) {
  std::vector<pid_t> out;
  std::set<pid_t> seen{pid};
  std::vector<pid_t> todo{pid};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    // Every thread's children file: a child is listed under the thread that forked it.
    std::error_code ec;
    for (const auto& task : fs::directory_iterator(fmt::format("/proc/{}/task", p), ec)) {
      std::ifstream children(task.path() / "children");
      for (pid_t child; children >> child;) {
        if (seen.insert(child).second) {
          out.push_back(child);
          todo.push_back(child);
        }
      }
    }
  }
  return out;
}

int Job::terminate_tree(std::chrono::duration<double> grace, int first) {
  if (pid_ <= 0 || poll_exit()) return 0;
  // Below this process rather than below the job: what the job orphaned is ours (AdoptOrphans).
  std::vector<pid_t> victims = descendants(::getpid());
  if (std::find(victims.begin(), victims.end(), pid_) == victims.end()) victims.push_back(pid_);
  for (pid_t p : victims)
    ::kill(p, first);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(grace);
  auto any_alive = [&] {
    poll_exit();
    for (pid_t p : victims) {
      if (p == pid_ ? !reaped_ : alive(p)) return true;
    }
    return false;
  };
  while (any_alive() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  for (pid_t p : victims) {
    if (p == pid_ ? !reaped_ : alive(p)) ::kill(p, SIGKILL);
  }
  return static_cast<int>(victims.size());
}

AdoptOrphans::AdoptOrphans() {
  ::prctl(PR_GET_CHILD_SUBREAPER, &previous_, 0, 0, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

AdoptOrphans::~AdoptOrphans() {
  ::prctl(PR_SET_CHILD_SUBREAPER, previous_, 0, 0, 0);
}

void AdoptOrphans::reap(pid_t job) const {
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream children(task.path() / "children");
    for (pid_t child; children >> child;) {
      if (child != job) ::waitpid(child, nullptr, WNOHANG);
    }
  }
}

}  // namespace commtool::record
