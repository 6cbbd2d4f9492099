#include "probes/base/process_look.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <system_error>
#include <thread>

namespace commtool::proc {

namespace fs = std::filesystem;

const char* to_string(RunState s) {
  switch (s) {
    case RunState::kRunning:
      return "running";
    case RunState::kStopped:
      return "stopped";
    case RunState::kTraced:
      return "traced";
    case RunState::kUninterruptible:
      return "uninterruptible";
    case RunState::kZombie:
      return "zombie";
    case RunState::kGone:
      return "gone";
  }
  return "?";
}

std::optional<char> stat_state(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size() || stat[close + 1] != ' ') {
    return std::nullopt;
  }
  const char c = stat[close + 2];
  if (c < 'A' || c > 'z') return std::nullopt;
  return c;
}

namespace {

// A small /proc file, whole (they are a few hundred bytes; the bound keeps a fake tree honest).
std::optional<std::string> read_small(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

int64_t tracer_of(const fs::path& dir) {
  const std::optional<std::string> status = read_small(dir / "status");
  if (!status) return 0;
  const size_t at = status->find("\nTracerPid:");
  if (at == std::string::npos) return 0;
  try {
    return std::stoll(status->substr(at + 11, 24));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string wchan_of(const fs::path& dir) {
  std::string w = read_small(dir / "wchan").value_or("");
  while (!w.empty() && (w.back() == '\n' || w.back() == '\0'))
    w.pop_back();
  if (w == "0" || w.size() > 64) return "";
  for (char c : w)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return "";
  return w;
}

}  // namespace

ProcessLook look_at(int64_t pid, const fs::path& proc_root) {
  ProcessLook look;
  if (pid <= 0) return look;
  const fs::path dir = proc_root / std::to_string(pid);
  const std::optional<std::string> stat = read_small(dir / "stat");
  const std::optional<char> main_state = stat ? stat_state(*stat) : std::nullopt;
  if (!main_state || *main_state == 'X' || *main_state == 'x') return look;  // kGone
  look.tracer_pid = tracer_of(dir);
  int stopped = 0, traced = 0;
  std::string d_wchan;
  bool d = false;
  const auto count = [&](char c, const fs::path& task) {
    ++look.threads;
    if (c == 'D') {
      if (!d) d_wchan = wchan_of(task);
      d = true;
    } else if (c == 'T') {
      ++stopped;
    } else if (c == 't') {
      ++traced;
    }
  };
  std::error_code ec;
  for (fs::directory_iterator it(dir / "task", ec), end; !ec && it != end; it.increment(ec)) {
    if (look.threads >= kMaxThreadsLooked) break;
    const std::optional<std::string> t = read_small(it->path() / "stat");
    if (const std::optional<char> c = t ? stat_state(*t) : std::nullopt) count(*c, it->path());
  }
  if (look.threads == 0) count(*main_state, dir);  // no task/ to read: the process's own line
  if (*main_state == 'Z') {
    look.state = RunState::kZombie;
  } else if (d) {
    look.state = RunState::kUninterruptible;
    look.wait_channel = d_wchan;
  } else if (traced + stopped == look.threads) {
    look.state = traced > 0 || look.tracer_pid != 0 ? RunState::kTraced : RunState::kStopped;
  } else {
    look.state = RunState::kRunning;
  }
  return look;
}

std::vector<ProcessLook> look_steadily(const std::vector<int64_t>& pids,
                                       std::chrono::milliseconds window,
                                       const fs::path& proc_root) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + window;
  std::vector<ProcessLook> looks;
  for (int64_t pid : pids)
    looks.push_back(look_at(pid, proc_root));
  const auto in_d = [](const ProcessLook& l) { return l.state == RunState::kUninterruptible; };
  while (std::any_of(looks.begin(), looks.end(), in_d) && Clock::now() < until) {
    std::this_thread::sleep_for(std::min<Clock::duration>(kSteadyPoll, until - Clock::now()));
    for (size_t i = 0; i < pids.size(); ++i) {
      if (in_d(looks[i])) looks[i] = look_at(pids[i], proc_root);
    }
  }
  return looks;
}

std::string describe(const ProcessLook& look) {
  switch (look.state) {
    case RunState::kRunning:
      return look.tracer_pid != 0 ? fmt::format("running, traced by pid {}", look.tracer_pid)
                                  : "running";
    case RunState::kStopped:
      return "stopped by a signal (SIGSTOP, SIGTSTP)";
    case RunState::kTraced:
      return look.tracer_pid != 0
                 ? fmt::format("held by a tracer (pid {}: a debugger)", look.tracer_pid)
                 : "held by a tracer (a debugger)";
    case RunState::kUninterruptible:
      return look.wait_channel.empty()
                 ? "in uninterruptible sleep (a driver or a file system)"
                 : fmt::format("in uninterruptible sleep in {}", look.wait_channel);
    case RunState::kZombie:
      return "exited, not reaped by its parent (zombie)";
    case RunState::kGone:
      return "gone";
  }
  return "?";
}

}  // namespace commtool::proc
