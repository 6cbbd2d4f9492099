#include "tracing/record/ras_client.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "probes/base/workers/unique_fd.hpp"

namespace commtool::record {

namespace {

using Clock = std::chrono::steady_clock;
using workers::UniqueFd;

// Rounded up, so that a wait never ends before the deadline.
int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on fd until the deadline; false when it passed (errno ETIMEDOUT) or poll
// failed.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) {
      errno = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR) return false;
  }
}

struct Conversation {
  int fd;
  Clock::time_point deadline;
  std::string timeout_text;
  std::string pending;  // read, not yet taken as a line

  std::string fail_why(const char* what) const {
    return errno == ETIMEDOUT ? fmt::format("no {} within {}", what, timeout_text)
                              : fmt::format("{}: {}", what, std::strerror(errno));
  }

  bool send(const std::string& line, std::string& why) {
    const std::string out = line + "\n";
    size_t sent = 0;
    while (sent < out.size()) {
      if (!wait_for(fd, POLLOUT, deadline)) {
        why = fail_why("room to send");
        return false;
      }
      const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = fmt::format("sending \"{}\": {}", line, std::strerror(errno));
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads more; 0 at the end of the connection, -1 on an error or the deadline.
  ssize_t more(std::string& why) {
    if (!wait_for(fd, POLLIN, deadline)) {
      why = fail_why("answer");
      return -1;
    }
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) why = fmt::format("reading: {}", std::strerror(errno));
      if (n > 0) pending.append(buf, static_cast<size_t>(n));
      return n;
    }
  }

  bool line(std::string& out, std::string& why) {
    for (;;) {
      if (const size_t nl = pending.find('\n'); nl != std::string::npos) {
        out = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        return true;
      }
      if (pending.size() > 4096) {
        why = "a reply line longer than 4 KiB: not NCCL's RAS";
        return false;
      }
      const ssize_t n = more(why);
      if (n == 0) why = "the server closed the connection";
      if (n <= 0) return false;
    }
  }

  // One command and its one-line reply, which must begin with `expect`.
  bool ask(const std::string& command, const std::string& expect, std::string& why) {
    std::string reply;
    if (!send(command, why) || !line(reply, why)) return false;
    if (reply.rfind(expect, 0) != 0) {
      why = fmt::format("\"{}\" was answered \"{}\"", command, reply.substr(0, 200));
      return false;
    }
    return true;
  }
};

// "host:port" or "[v6]:port" into its two parts.
bool split_address(const std::string& address, std::string& host, std::string& port) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find("]:");
    if (close == std::string::npos) return false;
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return false;
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  return !host.empty() && !port.empty();
}

UniqueFd connect_to(const std::string& address, Clock::time_point deadline, std::string& why) {
  std::string host, port;
  if (!split_address(address, host, port)) {
    why = fmt::format("address \"{}\" is not host:port", address);
    return UniqueFd();
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    why = fmt::format("{}: {}", address, ::gai_strerror(rc));
    return UniqueFd();
  }
  UniqueFd fd;
  for (addrinfo* a = found; a != nullptr && !fd; a = a->ai_next) {
    UniqueFd s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s) continue;
    if (::connect(s.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = fmt::format("{}: {}", address, std::strerror(errno));
      continue;
    }
    if (!wait_for(s.get(), POLLOUT, deadline)) {
      why = fmt::format("{}: no connection within the timeout", address);
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      why = fmt::format("{}: {}", address, std::strerror(err));
      continue;
    }
    fd = std::move(s);
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

std::string ras_address() {
  const char* env = std::getenv("NCCL_RAS_ADDR");
  return env != nullptr && *env != '\0' ? env : kDefaultRasAddress;
}

RasAnswer query_ras(const std::string& address, std::chrono::milliseconds timeout, bool json) {
  RasAnswer out;
  const Clock::time_point deadline = Clock::now() + timeout;
  UniqueFd fd = connect_to(address, deadline, out.why);
  if (!fd) return out;
  const double seconds = static_cast<double>(timeout.count()) / 1000.0;
  Conversation c{fd.get(), deadline, fmt::format("{:.1f} s", seconds), {}};
  // RAS's own gathering gets most of the time, so that its answer arrives within ours.
  const int ras_timeout = std::max(1, static_cast<int>(std::floor(seconds * 0.8)));
  if (!c.ask("CLIENT PROTOCOL 2", "SERVER PROTOCOL", out.why) ||
      !c.ask(fmt::format("TIMEOUT {}", ras_timeout), "OK", out.why) ||
      (json && !c.ask("SET FORMAT json", "OK", out.why)) || !c.send("VERBOSE STATUS", out.why)) {
    return out;
  }
  out.text = std::move(c.pending);
  c.pending.clear();
  for (;;) {
    const ssize_t n = c.more(out.why);
    out.text += c.pending;
    c.pending.clear();
    if (n == 0) break;
    if (n < 0) return out;
    if (out.text.size() > kMaxRasAnswerBytes) {
      out.why = fmt::format("an answer over {} MiB", kMaxRasAnswerBytes >> 20);
      return out;
    }
  }
  out.ok = true;
  out.why.clear();
  return out;
}

}  // namespace commtool::record
