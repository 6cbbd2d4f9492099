#include "probes/base/workers/launcher.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "probes/base/progress_line.hpp"
#include "probes/base/workers/child_process.hpp"
#include "probes/base/workers/cluster_group.hpp"
#include "probes/base/workers/placement.hpp"
#include "probes/base/workers/private_socket.hpp"
#include "probes/base/workers/progress_board.hpp"
#include "probes/base/workers/progress_report.hpp"
#include "probes/base/workers/rendezvous.hpp"
#include "probes/base/workers/signal_trap.hpp"
#include "probes/base/workers/unique_fd.hpp"
#include "probes/base/workers/wire.hpp"
#include "probes/base/workers/worker.hpp"

namespace commtool::workers {

namespace {

using namespace std::chrono_literals;
using wire::Clock;

// How long workers get to leave on their own (after SHUTDOWN) or after SIGTERM before SIGKILL.
constexpr auto kStopGrace = 1s;
// The poll loop's longest sleep: also how soon a worker that dies before it connects (no
// socket to hang up) is noticed through waitpid, and how often the progress board is read.
constexpr int kTickMs = 100;

std::vector<WorkerSpec> by_rank(const std::vector<WorkerSpec>& specs) {
  std::vector<WorkerSpec> ordered(specs.size(), WorkerSpec{-1, -1});
  for (const WorkerSpec& spec : specs) {
    if (spec.rank < 0 || spec.rank >= static_cast<int>(specs.size()) ||
        ordered[static_cast<std::size_t>(spec.rank)].rank >= 0) {
      throw std::invalid_argument(
          fmt::format("run_workers: ranks must be 0..{} once each", specs.size() - 1));
    }
    ordered[static_cast<std::size_t>(spec.rank)] = spec;
  }
  return ordered;
}

// A connection that has not said HELLO yet, so its rank is unknown.
struct Pending {
  UniqueFd fd;
  wire::FrameDecoder decoder;
};

struct Connection {
  UniqueFd fd;
  wire::FrameDecoder decoder;
  bool reported = false;  // its RESULT or ERROR arrived
};

// One run: the directory, the listening socket, the processes and their connections. The
// destructor stops what is left, so nothing outlives it, whatever threw.
class Group {
 public:
  Group(const std::string& executable, std::vector<WorkerSpec> specs,
        std::chrono::duration<double> timeout, std::chrono::duration<double> step);
  ~Group() { stop(); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // Serves the workers until all reported, one failed, the group stalled or a signal came.
  void run(const nlohmann::json& task, SignalTrap& trap);
  // Ends the run (see launcher.hpp) and returns how many workers were still running.
  int stop();
  int interrupted_by() const { return interrupted_by_; }
  GroupOutcome outcome() const;

 private:
  int size() const { return static_cast<int>(specs_.size()); }
  void serve(SignalTrap& trap, Clock::time_point deadline);
  void accept_connections();
  void serve_pending(Pending& pending);
  void accept_hello(Pending& pending, const wire::Message& hello);
  void serve_rank(int rank);
  void drain(int rank);
  void handle(int rank, wire::Message message);
  void release(const std::optional<Rendezvous::Release>& release);
  void send(int rank, wire::MessageType type, std::uint32_t sequence, const std::string& payload);
  void check_exits();
  void lost(int rank);
  void report_stall();
  void check_board();
  void show_progress(const std::vector<RankProgress>& ranks);
  void explain_failure();
  // What each worker's process is doing now (none for one that has ended), by rank.
  std::vector<std::optional<proc::ProcessLook>> look_at_workers() const;
  void fail(int rank, std::string what, ExitCode code);
  std::string name(int rank) const;

  std::vector<WorkerSpec> specs_;  // by rank
  std::chrono::duration<double> timeout_;
  std::chrono::duration<double> step_;
  bool shared_gpu_ = false;  // some GPU carries several ranks
  PrivateDir dir_;
  ProgressBoard board_;
  UniqueFd listener_;
  std::vector<ChildProcess> children_;                   // by rank
  std::vector<std::optional<proc::ProcessLook>> looks_;  // at the failure, when looked at
  std::vector<Connection> connections_;                  // by rank
  std::vector<Pending> pending_;
  Rendezvous rendezvous_;
  std::string task_;
  bool task_sent_ = false;
  int connected_ = 0;
  std::vector<nlohmann::json> results_;
  std::optional<WorkerFailure> failure_;
  Clock::time_point last_progress_;
  Clock::time_point last_board_check_;
  int interrupted_by_ = 0;
  progress::Line line_;  // the line a user at a terminal watches, erased with the group
};

Group::Group(const std::string& executable, std::vector<WorkerSpec> specs,
             std::chrono::duration<double> timeout, std::chrono::duration<double> step)
    : specs_(std::move(specs)),
      timeout_(timeout),
      step_(step.count() > 0 ? step : timeout),
      board_(dir_.path() + "/progress", size()),
      listener_(listen_at(dir_.socket_path(), size() + 8)),
      connections_(specs_.size()),
      rendezvous_(size()),
      results_(specs_.size(), nullptr) {
  const std::vector<std::string> env = worker_environment();
  std::vector<int> devices;
  for (const WorkerSpec& spec : specs_)
    devices.push_back(spec.device);
  shared_gpu_ = summarize_placement(devices).shared_gpu();
  for (const WorkerSpec& spec : specs_) {
    std::vector<std::string> rank_env = env;
    if (shared_gpu_) {
      for (std::string& e : shared_gpu_environment(spec.rank, std::to_string(::getpid()), env))
        rank_env.push_back(std::move(e));
    }
    children_.push_back(
        ChildProcess::spawn({executable, kWorkerCommand, "--socket", dir_.socket_path(), "--rank",
                             std::to_string(spec.rank), "--size", std::to_string(size()),
                             "--device", std::to_string(spec.device), "--timeout",
                             fmt::format("{}", step_.count()), "--progress", board_.path()},
                            rank_env));
  }
}

void Group::run(const nlohmann::json& task, SignalTrap& trap) {
  task_ = task.dump();
  last_progress_ = Clock::now();
  for (;;) {
    if (int sig = trap.take()) {
      interrupted_by_ = sig;
      return;
    }
    check_exits();
    if (!failure_ && Clock::now() - last_board_check_ >= std::chrono::milliseconds(kTickMs)) {
      last_board_check_ = Clock::now();
      check_board();
    }
    if (failure_) return explain_failure();
    if (task_sent_ && rendezvous_.all_finished()) return;
    auto deadline = last_progress_ + std::chrono::duration_cast<Clock::duration>(timeout_);
    if (Clock::now() >= deadline) {
      report_stall();
      return explain_failure();
    }
    serve(trap, deadline);
  }
}

void Group::serve(SignalTrap& trap, Clock::time_point deadline) {
  enum class Source { kTrap, kListener, kPending, kRank };
  std::vector<pollfd> fds;
  std::vector<std::pair<Source, std::size_t>> sources;
  auto watch = [&](int fd, Source source, std::size_t index) {
    fds.push_back(pollfd{fd, POLLIN, 0});
    sources.emplace_back(source, index);
  };
  watch(trap.fd(), Source::kTrap, 0);
  if (!task_sent_) watch(listener_.get(), Source::kListener, 0);
  for (std::size_t i = 0; i < pending_.size(); ++i)
    watch(pending_[i].fd.get(), Source::kPending, i);
  for (std::size_t r = 0; r < connections_.size(); ++r) {
    if (connections_[r].fd) watch(connections_[r].fd.get(), Source::kRank, r);
  }

  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  int wait_ms = static_cast<int>(std::clamp<long long>(left, 0, kTickMs));
  if (::poll(fds.data(), fds.size(), wait_ms) <= 0) return;  // EINTR or nothing: loop re-checks
  if (fds[0].revents != 0) return;  // a signal goes first, before any worker's news

  for (std::size_t i = 1; i < fds.size() && !failure_; ++i) {
    if (fds[i].revents == 0) continue;
    auto [source, index] = sources[i];
    if (source == Source::kListener) accept_connections();
    if (source == Source::kPending) serve_pending(pending_[index]);
    if (source == Source::kRank) serve_rank(static_cast<int>(index));
  }
  std::erase_if(pending_, [](const Pending& p) { return !p.fd; });
}

void Group::accept_connections() {
  for (;;) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      pending_.push_back(Pending{UniqueFd(fd), {}});
    } else if (errno != EINTR && errno != ECONNABORTED) {
      return;  // EAGAIN: all taken. Anything else: the workers' start-up timeout will tell.
    }
  }
}

void Group::serve_pending(Pending& pending) {
  try {
    bool open = wire::receive_available(pending.fd.get(), pending.decoder);
    if (std::optional<wire::Message> hello = pending.decoder.next()) {
      accept_hello(pending, *hello);
    } else if (!open) {
      pending.fd.reset();
    }
  } catch (const wire::WireError&) {
    pending.fd.reset();  // not one of ours, or broken: its worker will be missed by rank
  }
}

void Group::accept_hello(Pending& pending, const wire::Message& hello) {
  int rank = hello.rank;
  const long claimed_pid = wire::decode_hello_pid(hello.payload);
  ucred peer{};
  socklen_t peer_size = sizeof peer;
  bool known = hello.type == wire::MessageType::kHello && rank >= 0 && rank < size() &&
               !connections_[static_cast<std::size_t>(rank)].fd &&
               ::getsockopt(pending.fd.get(), SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) == 0 &&
               peer.pid == children_[static_cast<std::size_t>(rank)].pid() &&
               claimed_pid == peer.pid;
  if (!known) {
    // A duplicate or unknown rank, or a process we did not start: refuse it. The real worker
    // for that rank is still expected and is reported if it never comes.
    pending.fd.reset();
    return;
  }
  Connection& connection = connections_[static_cast<std::size_t>(rank)];
  connection.fd = std::move(pending.fd);
  connection.decoder = std::move(pending.decoder);
  last_progress_ = Clock::now();
  if (++connected_ < size()) return;

  for (int r = 0; r < size(); ++r)
    send(r, wire::MessageType::kTask, 0, task_);
  task_sent_ = true;
  for (Pending& stray : pending_)
    stray.fd.reset();
}

void Group::serve_rank(int rank) {
  Connection& connection = connections_[static_cast<std::size_t>(rank)];
  bool open = false;
  try {
    open = wire::receive_available(connection.fd.get(), connection.decoder);
  } catch (const wire::WireError&) {
  }
  drain(rank);
  if (open || failure_) return;
  connection.fd.reset();
  if (!connection.reported) lost(rank);
}

void Group::drain(int rank) {
  try {
    while (!failure_) {
      std::optional<wire::Message> message =
          connections_[static_cast<std::size_t>(rank)].decoder.next();
      if (!message) return;
      handle(rank, std::move(*message));
    }
  } catch (const wire::WireError& e) {
    fail(rank, fmt::format("worker for {} sent a malformed message: {}", name(rank), e.what()),
         ExitCode::kTimeout);
  }
}

void Group::handle(int rank, wire::Message message) {
  last_progress_ = Clock::now();
  Connection& connection = connections_[static_cast<std::size_t>(rank)];
  auto protocol_error = [&](const std::string& what) {
    fail(rank, fmt::format("worker for {} broke the protocol: {}", name(rank), what),
         ExitCode::kTimeout);
  };
  if (message.rank != rank) return protocol_error(fmt::format("it claims rank {}", message.rank));
  if (!task_sent_) return protocol_error("it spoke before receiving its task");
  try {
    switch (message.type) {
      case wire::MessageType::kBarrier:
        return release(
            rendezvous_.arrive(rank, Collective{Collective::Kind::kBarrier, message.sequence}));
      case wire::MessageType::kAllgather:
        return release(
            rendezvous_.arrive(rank, Collective{Collective::Kind::kAllgather, message.sequence},
                               std::move(message.payload)));
      case wire::MessageType::kResult:
        results_[static_cast<std::size_t>(rank)] = wire::decode_result(message.payload);
        connection.reported = true;
        return rendezvous_.finish(rank);
      case wire::MessageType::kError: {
        wire::ErrorReport error = wire::decode_error(message.payload);
        connection.reported = true;
        fail(rank, std::move(error.message), static_cast<ExitCode>(error.code));
        if (!error.field.empty() && failure_ && failure_->rank == rank) {
          failure_->bad_field = std::move(error.field);
          failure_->bad_value = std::move(error.value);
          failure_->bad_why = std::move(error.why);
        }
        return;
      }
      default:
        return protocol_error(fmt::format("unexpected {}", wire::type_name(message.type)));
    }
  } catch (const Error& e) {  // the ranks disagree on their collectives
    fail(rank, e.what(), e.code());
  } catch (const wire::WireError& e) {  // a payload that is not what its type carries
    protocol_error(e.what());
  }
}

void Group::release(const std::optional<Rendezvous::Release>& release) {
  if (!release) return;
  bool barrier = release->collective.kind == Collective::Kind::kBarrier;
  std::string payload = barrier ? std::string() : wire::encode_blobs(release->blobs);
  for (int r = 0; r < size(); ++r) {
    send(r, barrier ? wire::MessageType::kBarrierDone : wire::MessageType::kAllgatherDone,
         release->collective.sequence, payload);
  }
}

void Group::send(int rank, wire::MessageType type, std::uint32_t sequence,
                 const std::string& payload) {
  Connection& connection = connections_[static_cast<std::size_t>(rank)];
  if (!connection.fd) return;
  try {
    wire::write_message(connection.fd.get(), wire::Message{type, rank, sequence, payload},
                        Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout_));
  } catch (const wire::WireError& e) {
    // A closed connection is reported when its end-of-stream is read; a full one is not.
    if (e.kind() != wire::WireError::Kind::kClosed) {
      fail(rank, fmt::format("worker for {} stopped reading its socket: {}", name(rank), e.what()),
           ExitCode::kTimeout);
    }
  }
}

void Group::check_exits() {
  for (int r = 0; r < size() && !failure_; ++r) {
    Connection& connection = connections_[static_cast<std::size_t>(r)];
    if (connection.reported || !children_[static_cast<std::size_t>(r)].poll_exit()) continue;
    // It may have said its last words (an ERROR, even its RESULT) just before exiting.
    if (connection.fd) serve_rank(r);
    if (!connection.reported && !failure_) lost(r);
  }
}

void Group::lost(int rank) {
  fail(rank,
       describe_lost(children_[static_cast<std::size_t>(rank)], "worker for " + name(rank),
                     kStopGrace),
       ExitCode::kTimeout);
}

void Group::report_stall() {
  std::vector<int> ranks;
  std::string missed;
  if (!task_sent_) {
    for (int r = 0; r < size(); ++r) {
      if (!connections_[static_cast<std::size_t>(r)].fd) ranks.push_back(r);
    }
    missed = "connect to the launcher";
  } else {
    Rendezvous::Stall stall = rendezvous_.stall();
    ranks = stall.ranks;
    missed = stall.missed;
  }
  std::string names;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) names += i + 1 == ranks.size() ? " and " : ", ";
    names += name(ranks[i]);
  }
  fail(ranks.empty() ? 0 : ranks.front(),
       fmt::format("{} did not {} within {:.1f} s", names.empty() ? "the workers" : names, missed,
                   timeout_.count()),
       ExitCode::kTimeout);
}

std::vector<std::optional<proc::ProcessLook>> Group::look_at_workers() const {
  std::vector<int64_t> pids;
  std::vector<bool> reported;
  for (size_t r = 0; r < children_.size(); ++r) {
    pids.push_back(children_[r].running() ? children_[r].pid() : 0);
    reported.push_back(connections_[r].reported);
  }
  const std::vector<proc::ProcessLook> seen = proc::look_steadily(pids);
  std::vector<std::optional<proc::ProcessLook>> looks;
  for (size_t r = 0; r < pids.size(); ++r)
    looks.push_back(pids[r] != 0 ? std::optional(seen[r]) : std::nullopt);
  forget_reported_exits(looks, reported);
  return looks;
}

void Group::check_board() {
  const std::vector<RankProgress> ranks = board_.read_all();
  if (std::optional<Divergence> d = first_divergence(ranks)) {
    return fail(d->others.front().first, describe(*d), ExitCode::kTimeout);
  }
  const int64_t now = monotonic_now_ns();
  for (const RankProgress& p : ranks) {
    if (stuck_in_step(p, step_, now)) {
      // The first rank past its bound is a symptom when another's process cannot run at all
      // (stopped, in a debugger, in uninterruptible sleep): that one holds the others.
      looks_ = look_at_workers();
      if (const std::vector<int> held = ranks_that_cannot_run(looks_); !held.empty()) {
        return fail(
            held.front(),
            cannot_run_text(name(held.front()), *looks_[static_cast<std::size_t>(held.front())]),
            ExitCode::kTimeout);
      }
      return fail(p.rank, stuck_in_step_text(name(p.rank), step_), ExitCode::kTimeout);
    }
  }
  show_progress(ranks);
}

// Rank 0's own steps (every rank runs the same task); before it has any, the phase of the
// rank furthest behind (a slow communicator set-up shows as such).
void Group::show_progress(const std::vector<RankProgress>& ranks) {
  if (ranks.empty()) return;
  const RankProgress& first = ranks.front();
  if (first.step_total > 0) return line_.update(first.step_done, first.step_total, first.step_what);
  Phase behind = Phase::kLeaving;
  for (const RankProgress& p : ranks)
    behind = std::min(behind, p.phase);
  line_.update(0, 0,
               fmt::format("{} worker{} {}", size(), size() == 1 ? "" : "s", to_string(behind)));
}

// Says where every rank stood when the group failed, from the board; a collective mismatch
// found there is the cause, whatever symptom was seen first.
void Group::explain_failure() {
  if (!failure_) return;
  const std::vector<RankProgress> ranks = board_.read_all();
  const bool used = std::any_of(ranks.begin(), ranks.end(),
                                [](const RankProgress& p) { return p.phase != Phase::kStarting; });
  if (!used) return;
  if (std::optional<Divergence> d = first_divergence(ranks);
      d && failure_->what.find(describe(*d)) == std::string::npos) {
    failure_->what = describe(*d) + "; first symptom: " + failure_->what;
    failure_->code = ExitCode::kTimeout;
  }
  std::vector<std::string> names;
  for (int r = 0; r < size(); ++r)
    names.push_back(name(r));
  if (looks_.empty()) looks_ = look_at_workers();
  failure_->what += "\n" + explain_progress(ranks, names, monotonic_now_ns(), shared_gpu_, looks_);
}

void Group::fail(int rank, std::string what, ExitCode code) {
  if (failure_) return;  // the first failure is the cause; later ones are its echoes
  failure_ = WorkerFailure{
      rank, specs_[static_cast<std::size_t>(rank)].device, std::move(what), code, {}, {}, {}};
}

std::string Group::name(int rank) const {
  return fmt::format("rank {} (GPU {})", rank, specs_[static_cast<std::size_t>(rank)].device);
}

int Group::stop() {
  bool finished = task_sent_ && !failure_ && !interrupted_by_ && rendezvous_.all_finished();
  if (finished) {
    // Every worker reported and waits for the word to exit: let them leave on their own.
    for (int r = 0; r < size(); ++r)
      send(r, wire::MessageType::kShutdown, 0, {});
    for (Connection& connection : connections_)
      connection.fd.reset();
    wait_children(children_, Clock::now() + kStopGrace);
  }
  // Signals first, sockets after: a worker that sees its socket close before SIGTERM arrives
  // would complain on stderr about a launcher that went away.
  int running = stop_children(children_, kStopGrace);
  for (Connection& connection : connections_)
    connection.fd.reset();
  pending_.clear();
  listener_.reset();
  return running;
}

GroupOutcome Group::outcome() const {
  GroupOutcome outcome;
  outcome.results = results_;
  outcome.failure = failure_;
  outcome.socket_dir = dir_.path();
  for (const ChildProcess& child : children_)
    outcome.worker_pids.push_back(child.pid());
  return outcome;
}

}  // namespace

GroupOutcome run_workers(const std::string& executable, const std::vector<WorkerSpec>& specs,
                         const nlohmann::json& task, std::chrono::duration<double> timeout,
                         std::chrono::duration<double> step) {
  if (!(timeout.count() > 0)) throw std::invalid_argument("run_workers: timeout must be > 0");
  std::vector<WorkerSpec> ordered = by_rank(specs);
  if (ordered.empty()) return GroupOutcome{};
  if (ClusterGroups* cluster = active_cluster()) return cluster->run(ordered, task, timeout, step);

  GroupOutcome outcome;
  int interrupted_by = 0;
  int stopped = 0;
  {
    SignalTrap trap;
    Group group(executable, std::move(ordered), timeout, step);
    group.run(task, trap);
    stopped = group.stop();
    interrupted_by = group.interrupted_by();
    if (interrupted_by == 0) interrupted_by = trap.take();  // one that came while stopping
    outcome = group.outcome();
  }  // the socket and its directory are removed; the previous signal handlers are back

  if (interrupted_by != 0) {
    std::fprintf(stderr, "commtool: interrupted; stopped %d workers\n", stopped);
    std::fflush(stderr);
    std::exit(128 + interrupted_by);
  }
  return outcome;
}

std::vector<nlohmann::json> run_workers_or_throw(const std::string& executable,
                                                 const std::vector<WorkerSpec>& specs,
                                                 const nlohmann::json& task,
                                                 std::chrono::duration<double> timeout,
                                                 std::chrono::duration<double> step) {
  GroupOutcome outcome = run_workers(executable, specs, task, timeout, step);
  if (const std::optional<WorkerFailure>& f = outcome.failure) {
    if (!f->bad_field.empty()) throw BadValue(f->bad_field, f->bad_value, f->bad_why);
    throw Error(f->code, f->what);
  }
  return std::move(outcome.results);
}

}  // namespace commtool::workers
