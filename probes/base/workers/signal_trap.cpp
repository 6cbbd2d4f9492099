#include "probes/base/workers/signal_trap.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "probes/base/error.hpp"

namespace commtool::workers {

namespace {

std::atomic<int> g_signal_pipe{-1};  // the write end, for the handler

// One byte a signal: its number (below 65), and kFromProcess when a process sent it (si_code
// SI_USER, SI_QUEUE, SI_TKILL are not positive; the kernel's own, a terminal's included, are).
constexpr unsigned char kFromProcess = 0x80;

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  int saved_errno = errno;
  int fd = g_signal_pipe.load();
  if (fd >= 0) {
    const bool from_process = info != nullptr && info->si_code <= 0;
    unsigned char byte = static_cast<unsigned char>(sig) | (from_process ? kFromProcess : 0);
    ssize_t ignored = ::write(fd, &byte, 1);  // a full pipe already holds a signal: fine
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace

SignalTrap::SignalTrap(std::initializer_list<int> signals) {
  for (int sig : signals)
    trapped_.push_back({sig});
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(ExitCode::kEnvironment, fmt::format("pipe: {}", std::strerror(errno)));
  }
  read_.reset(fds[0]);
  write_.reset(fds[1]);
  int expected = -1;
  if (!g_signal_pipe.compare_exchange_strong(expected, write_.get())) {
    throw std::logic_error("a SignalTrap is already installed in this process");
  }
  for (Trapped& t : trapped_) {
    struct sigaction action {};
    action.sa_sigaction = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_SIGINFO;
    ::sigaction(t.sig, nullptr, &t.previous);
    t.installed = t.previous.sa_handler != SIG_IGN && ::sigaction(t.sig, &action, nullptr) == 0;
  }
}

SignalTrap::~SignalTrap() {
  for (Trapped& t : trapped_) {
    if (t.installed) ::sigaction(t.sig, &t.previous, nullptr);
  }
  g_signal_pipe.store(-1);
}

SignalTrap::Caught SignalTrap::take_caught() {
  unsigned char byte = 0;
  if (::read(read_.get(), &byte, 1) != 1) return {};
  return {byte & ~kFromProcess, (byte & kFromProcess) != 0};
}

}  // namespace commtool::workers
