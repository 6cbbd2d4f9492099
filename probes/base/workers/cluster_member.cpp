#include "probes/base/workers/cluster_member.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <thread>

#include "probes/base/workers/progress_report.hpp"
#include "probes/base/workers/worker.hpp"

namespace commtool::workers {

namespace {

using namespace std::chrono_literals;
using wire::Clock;

constexpr auto kStopGrace = 1s;  // as the local launcher's
constexpr int kTickMs = 100;

int64_t realtime_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Clock::duration ticks(std::chrono::duration<double> d) {
  return std::chrono::duration_cast<Clock::duration>(d);
}

}  // namespace

ClusterMember::ClusterMember(const std::string& executable, int rank, int size, int device,
                             const std::vector<std::string>& env, std::string name,
                             std::chrono::duration<double> timeout,
                             std::chrono::duration<double> step, const std::string& task)
    : rank_(rank),
      name_(std::move(name)),
      timeout_(timeout),
      step_(step.count() > 0 ? step : timeout),
      task_(task),
      board_(dir_.path() + "/progress", size),
      listener_(listen_at(dir_.socket_path(), 8)),
      last_progress_(Clock::now()) {
  child_.push_back(ChildProcess::spawn(
      {executable, kWorkerCommand, "--socket", dir_.socket_path(), "--rank", std::to_string(rank),
       "--size", std::to_string(size), "--device", std::to_string(device), "--timeout",
       fmt::format("{}", step_.count()), "--progress", board_.path()},
      env));
}

ClusterMember::~ClusterMember() {
  stop();
}

MemberStep ClusterMember::failed(std::string what, ExitCode code) const {
  MemberStep s;
  s.kind = MemberStep::Kind::kFailed;
  s.failure.what = std::move(what);
  s.failure.code = code;
  s.failure.when_ns = realtime_now_ns();
  return s;
}

// The connection that says HELLO for our rank from the process we started; any other is
// closed (a stranger on the socket cannot take the rank's place).
bool ClusterMember::accept_worker() {
  UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return false;
  try {
    const wire::Message hello = wire::read_message(fd.get(), Clock::now() + 2s);
    ucred peer{};
    socklen_t peer_size = sizeof peer;
    const bool ours = hello.type == wire::MessageType::kHello && hello.rank == rank_ &&
                      ::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) == 0 &&
                      peer.pid == child_.front().pid() &&
                      wire::decode_hello_pid(hello.payload) == peer.pid;
    if (!ours) return false;
    wire::write_message(fd.get(), wire::Message{wire::MessageType::kTask, rank_, 0, task_},
                        Clock::now() + ticks(timeout_));
  } catch (const wire::WireError&) {
    return false;
  }
  connection_ = std::move(fd);
  listener_.reset();
  last_progress_ = Clock::now();
  return true;
}

MemberStep ClusterMember::next() {
  for (;;) {
    if (connection_) {
      try {
        if (std::optional<wire::Message> message = decoder_.next()) {
          last_progress_ = Clock::now();
          if (std::optional<MemberStep> s = step_from(std::move(*message))) return *s;
          continue;
        }
      } catch (const wire::WireError& e) {
        return failed(fmt::format("worker for {} sent a malformed message: {}", name_, e.what()));
      }
    }
    if (!reported_ && child_.front().poll_exit()) {
      // Its last words may still be in the socket.
      if (connection_) {
        try {
          wire::receive_available(connection_.get(), decoder_);
        } catch (const wire::WireError&) {
        }
        if (std::optional<wire::Message> message = decoder_.next()) {
          if (std::optional<MemberStep> s = step_from(std::move(*message))) return *s;
          continue;
        }
      }
      return lost();
    }
    if (std::optional<MemberStep> stuck = check_board()) return *stuck;
    if (Clock::now() - last_progress_ >= ticks(timeout_)) {
      return failed(connection_ ? fmt::format("{} made no progress for {:.1f} s after {}", name_,
                                              timeout_.count(), last_collective_)
                                : fmt::format("{} did not connect to its launcher within {:.1f} s",
                                              name_, timeout_.count()));
    }
    pollfd fd{connection_ ? connection_.get() : listener_.get(), POLLIN, 0};
    if (::poll(&fd, 1, kTickMs) <= 0) continue;
    if (!connection_) {
      accept_worker();
      continue;
    }
    bool open = true;
    try {
      open = wire::receive_available(connection_.get(), decoder_);
    } catch (const wire::WireError&) {
      open = false;
    }
    if (!open) {
      while (std::optional<wire::Message> message = decoder_.next()) {
        if (std::optional<MemberStep> s = step_from(std::move(*message))) return *s;
      }
      connection_.reset();
      return lost();
    }
  }
}

std::optional<MemberStep> ClusterMember::step_from(wire::Message message) {
  if (message.rank != rank_) {
    return failed(
        fmt::format("worker for {} broke the protocol: it claims rank {}", name_, message.rank));
  }
  MemberStep s;
  s.sequence = message.sequence;
  try {
    switch (message.type) {
      case wire::MessageType::kBarrier:
        s.kind = MemberStep::Kind::kBarrier;
        last_collective_ = fmt::format("barrier #{}", message.sequence);
        return s;
      case wire::MessageType::kAllgather:
        s.kind = MemberStep::Kind::kAllgather;
        s.payload = std::move(message.payload);
        last_collective_ = fmt::format("allgather #{}", message.sequence);
        return s;
      case wire::MessageType::kResult:
        s.kind = MemberStep::Kind::kResult;
        s.payload = wire::decode_result(message.payload).dump();  // checked before it travels
        reported_ = true;
        return s;
      case wire::MessageType::kError: {
        wire::ErrorReport error = wire::decode_error(message.payload);
        reported_ = true;
        MemberStep f = failed(std::move(error.message), static_cast<ExitCode>(error.code));
        f.failure.field = std::move(error.field);
        f.failure.value = std::move(error.value);
        f.failure.why = std::move(error.why);
        return f;
      }
      default:
        return failed(fmt::format("worker for {} broke the protocol: unexpected {}", name_,
                                  wire::type_name(message.type)));
    }
  } catch (const wire::WireError& e) {
    return failed(fmt::format("worker for {} broke the protocol: {}", name_, e.what()));
  }
}

MemberStep ClusterMember::lost() {
  return failed(describe_lost(child_.front(), "worker for " + name_, kStopGrace));
}

std::optional<MemberStep> ClusterMember::check_board() const {
  if (!stuck_in_step(board_.read(rank_), step_, monotonic_now_ns())) return std::nullopt;
  return failed(stuck_in_step_text(name_, step_));
}

void ClusterMember::release(const MemberStep& at, const std::string& blobs) {
  const bool barrier = at.kind == MemberStep::Kind::kBarrier;
  if (!connection_) return;
  try {
    wire::write_message(
        connection_.get(),
        wire::Message{barrier ? wire::MessageType::kBarrierDone : wire::MessageType::kAllgatherDone,
                      rank_, at.sequence, barrier ? std::string() : blobs},
        Clock::now() + ticks(timeout_));
  } catch (const wire::WireError&) {
    // A worker that stopped reading is reported at its next step (its exit, or no progress).
  }
  last_progress_ = Clock::now();
}

void ClusterMember::finish() {
  if (connection_) {
    try {
      wire::write_message(connection_.get(),
                          wire::Message{wire::MessageType::kShutdown, rank_, 0, {}},
                          Clock::now() + kStopGrace);
    } catch (const wire::WireError&) {
    }
    connection_.reset();
  }
  wait_children(child_, Clock::now() + kStopGrace);
  stop();
}

void ClusterMember::stop() {
  // Signals first, socket after, as the local launcher does.
  stop_children(child_, kStopGrace);
  connection_.reset();
  listener_.reset();
}

}  // namespace commtool::workers
