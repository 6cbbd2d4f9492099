#include "probes/base/workers/cluster_group.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/watchdog.hpp"
#include "probes/base/workers/cluster_member.hpp"
#include "probes/base/workers/placement.hpp"
#include "probes/base/workers/progress_report.hpp"
#include "probes/base/workers/wire.hpp"

namespace commtool::workers {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

ClusterGroups* g_active = nullptr;

// What a rank sends rank 0 in one round may be its result: as large as a worker's message.
constexpr uint64_t kMaxContribution = wire::kMaxPayloadBytes + 64 * 1024;
// Beyond a rank's own bounds, how long an MPI call may wait for the slowest rank: its stop
// (SIGTERM, then SIGKILL a second later) and the MPI traffic itself.
constexpr auto kRoundMargin = 10s;

constexpr const char* kRankGoneAdvice =
    "another rank's commtool did not take part in time: it is gone or its node is unreachable; "
    "mpirun or srun names the ranks that exited";

// The variables entry points set per group in rank 0's own environment (run_allreduce_sweep's
// NCCL_ALGO and NCCL_PROTO): every rank's worker gets rank 0's values, set or unset.
constexpr const char* kVariablesFromRankZero[] = {"NCCL_ALGO", "NCCL_PROTO"};

// A round's message: a one-line JSON header, then raw bytes (a blob may be any bytes, which a
// JSON string cannot carry).
std::string frame(const json& header, std::string_view payload = {}) {
  std::string out = header.dump();
  out += '\n';
  out.append(payload);
  return out;
}

std::pair<json, std::string> unframe(const std::string& bytes, int rank) {
  const size_t end = bytes.find('\n');
  json header =
      end == std::string::npos ? json() : json::parse(bytes.substr(0, end), nullptr, false);
  if (!header.is_object()) {
    throw Error(ExitCode::kTimeout,
                fmt::format("rank {} sent rank 0 a malformed message: is every rank running the "
                            "same commtool?",
                            rank));
  }
  return {std::move(header), bytes.substr(end + 1)};
}

// Runs an MPI call of this rank under a watchdog: a rank that never joins it ends this process
// with exit 5, naming the stage, instead of a hang.
template <typename F>
auto bounded(const ClusterRank& self, std::chrono::duration<double> limit, const char* stage, F f) {
  Watchdog watchdog(fmt::format("rank {} on {}", self.rank, self.host), limit);
  watchdog.stage(stage, false, kRankGoneAdvice);
  return f();
}

json progress_to_json(const RankProgress& p) {
  json recent = json::array();
  for (const OperationRecord& op : p.recent)
    recent.push_back({op.seq, op.name, op.count});
  const int64_t now = monotonic_now_ns();
  return {{"phase", static_cast<uint32_t>(p.phase)},
          {"enqueued", p.enqueued},
          {"started", p.started},
          {"completed", p.completed},
          // Clocks of different hosts do not compare: the time spent inside the step does.
          {"busy_for_ns", p.busy_since_ns == 0 ? 0 : std::max<int64_t>(1, now - p.busy_since_ns)},
          {"recent", recent}};
}

RankProgress progress_from_json(const json& j, int rank, int64_t now_ns) {
  RankProgress p;
  p.rank = rank;
  const auto phase = j.value("phase", 0u);
  p.phase = phase <= static_cast<uint32_t>(Phase::kLeaving) ? static_cast<Phase>(phase)
                                                            : Phase::kStarting;
  p.enqueued = j.value("enqueued", int64_t{-1});
  p.started = j.value("started", int64_t{-1});
  p.completed = j.value("completed", int64_t{-1});
  const int64_t busy_for = j.value("busy_for_ns", int64_t{0});
  p.busy_since_ns = busy_for > 0 ? now_ns - busy_for : 0;
  for (const json& op : j.value("recent", json::array())) {
    if (op.is_array() && op.size() == 3 && op[1].is_string()) {
      p.recent.push_back({op[0].get<int64_t>(), op[1].get<std::string>(), op[2].get<uint64_t>()});
    }
  }
  return p;
}

const char* kind_name(MemberStep::Kind kind) {
  switch (kind) {
    case MemberStep::Kind::kBarrier:
      return "barrier";
    case MemberStep::Kind::kAllgather:
      return "allgather";
    case MemberStep::Kind::kResult:
      return "result";
    case MemberStep::Kind::kFailed:
      return "failed";
  }
  return "?";
}

std::string describe_step(const std::string& at, uint32_t sequence) {
  return at == "result" ? "its result" : fmt::format("{} #{}", at, sequence);
}

// Rank 0's word after a round.
struct Decision {
  std::string what;   // "release", "done" or "stop"
  std::string blobs;  // an allgather's, for "release"
};

// The worker's environment on this rank: this process's, with the variables rank 0 decides
// (kVariablesFromRankZero) as rank 0 has them, and a shared GPU's confinement.
std::vector<std::string> member_environment(const json& instruction, int rank) {
  std::vector<std::string> env;
  for (std::string& e : worker_environment()) {
    const bool from_root =
        std::any_of(std::begin(kVariablesFromRankZero), std::end(kVariablesFromRankZero),
                    [&](const char* v) { return e.starts_with(std::string(v) + "="); });
    if (!from_root) env.push_back(std::move(e));
  }
  const json from_root = instruction.value("env", json::object());
  for (const auto& [variable, value] : from_root.items()) {
    if (value.is_string()) env.push_back(variable + "=" + value.get<std::string>());
  }
  if (instruction.value("shared_gpu", false)) {
    for (std::string& e : shared_gpu_environment(rank, instruction.value("run_id", ""), env))
      env.push_back(std::move(e));
  }
  return env;
}

// Rank 0, after a round: every rank's step (header, payload) in rank order. The earliest failure
// is the cause and the others its echoes; without one, a rank at another step than rank 0's
// means the ranks disagree on their collectives; else all are at one step, which is released,
// or the result, which ends the group.
Decision decide_round(std::vector<std::pair<json, std::string>>& steps,
                      const std::vector<int>& devices, const std::function<std::string(int)>& name,
                      GroupOutcome& outcome) {
  std::optional<size_t> cause;
  for (size_t r = 0; r < steps.size(); ++r) {
    if (steps[r].first.value("at", "") != "failed") continue;
    const auto when = steps[r].first["failure"].value("when_ns", int64_t{0});
    if (!cause || when < steps[*cause].first["failure"].value("when_ns", int64_t{0})) cause = r;
  }
  const std::string at0 = steps[0].first.value("at", "");
  const auto seq0 = steps[0].first.value("seq", 0u);
  std::optional<size_t> odd;
  for (size_t r = 1; r < steps.size() && !cause; ++r) {
    if (steps[r].first.value("at", "") != at0 || steps[r].first.value("seq", 0u) != seq0) {
      odd = r;
      break;
    }
  }
  Decision decision;
  if (cause) {
    const json& f = steps[*cause].first["failure"];
    outcome.failure =
        WorkerFailure{static_cast<int>(*cause), devices[*cause],
                      f.value("what", ""),      static_cast<ExitCode>(f.value("code", 5)),
                      f.value("field", ""),     f.value("value", ""),
                      f.value("why", "")};
    decision.what = "stop";
  } else if (odd) {
    outcome.failure = WorkerFailure{
        static_cast<int>(*odd),
        devices[*odd],
        fmt::format(
            "the ranks disagree on their collectives: {} is at {} while {} is at {}",
            name(static_cast<int>(*odd)),
            describe_step(steps[*odd].first.value("at", ""), steps[*odd].first.value("seq", 0u)),
            name(0), describe_step(at0, seq0)),
        ExitCode::kTimeout,
        {},
        {},
        {}};
    decision.what = "stop";
  } else if (at0 == "result") {
    for (auto& [header, payload] : steps)
      outcome.results.push_back(json::parse(payload));
    decision.what = "done";
  } else {
    decision.what = "release";
    if (at0 == "allgather") {
      std::vector<std::string> blobs;
      for (auto& [header, payload] : steps)
        blobs.push_back(std::move(payload));
      decision.blobs = wire::encode_blobs(blobs);
    }
  }
  return decision;
}

// Rank 0, once every rank has stopped: the failure's words grown by where each rank stood
// (`gathered`: every rank's progress as JSON), a divergence first when the boards show one.
void explain_failure(WorkerFailure& f, const std::vector<std::string>& gathered,
                     const std::function<std::string(int)>& name, bool shared) {
  const int64_t now = monotonic_now_ns();
  std::vector<RankProgress> ranks;
  std::vector<std::string> names;
  for (size_t r = 0; r < gathered.size(); ++r) {
    json j = json::parse(gathered[r], nullptr, false);
    ranks.push_back(
        progress_from_json(j.is_object() ? j : json::object(), static_cast<int>(r), now));
    names.push_back(name(static_cast<int>(r)));
  }
  const bool used = std::any_of(ranks.begin(), ranks.end(),
                                [](const RankProgress& p) { return p.phase != Phase::kStarting; });
  if (!used) return;
  if (std::optional<Divergence> d = first_divergence(ranks);
      d && f.what.find(describe(*d)) == std::string::npos) {
    f.what = describe(*d) + "; first symptom: " + f.what;
    f.code = ExitCode::kTimeout;
  }
  f.what += "\n" + explain_progress(ranks, names, now, shared);
}

}  // namespace

ClusterGroups* active_cluster() {
  return g_active;
}

ClusterScope::ClusterScope(ClusterGroups& groups) {
  g_active = &groups;
}

ClusterScope::~ClusterScope() {
  g_active = nullptr;
}

ClusterGroups::ClusterGroups(cluster::MpiSession& session, std::string executable,
                             std::map<std::string, ClusterQuestion> questions,
                             std::chrono::duration<double> control_timeout)
    : session_(session),
      executable_(std::move(executable)),
      questions_(std::move(questions)),
      control_timeout_(control_timeout) {
  self_.rank = session.rank();
  self_.size = session.size();
  self_.host = session.hostname();
  const std::string hosts = bounded(self_, control_timeout_, "mpi-hosts", [&] {
    const std::vector<std::string> gathered = session_.gather_to_root(self_.host, 4096);
    return session_.broadcast_from_root(is_root() ? wire::encode_blobs(gathered) : "");
  });
  try {
    hosts_ = wire::decode_blobs(hosts);
  } catch (const wire::WireError& e) {
    throw Error(ExitCode::kEnvironment, fmt::format("the hosts of the MPI job: {}", e.what()));
  }
  if (static_cast<int>(hosts_.size()) != self_.size) {
    throw Error(ExitCode::kEnvironment, "the hosts of the MPI job: one per rank expected");
  }
  self_.local_rank = 0;
  self_.local_size = 0;
  for (int r = 0; r < self_.size; ++r) {
    if (hosts_[static_cast<size_t>(r)] != self_.host) continue;
    if (r < self_.rank) ++self_.local_rank;
    ++self_.local_size;
  }
}

int ClusterGroups::local_rank_of(int rank) const {
  const auto end = hosts_.begin() + std::clamp(rank, 0, self_.size);
  return static_cast<int>(std::count(hosts_.begin(), end, hosts_.at(static_cast<size_t>(rank))));
}

ClusterGroups::~ClusterGroups() {
  if (!is_root() || finished_) return;
  try {
    finish();
  } catch (const std::exception&) {
    // The other ranks' watchdogs end them: rank 0 is already on its way out with its own error.
  }
}

void ClusterGroups::send_instruction(const json& instruction) {
  bounded(self_, control_timeout_, "mpi-instruction",
          [&] { return session_.broadcast_from_root(instruction.dump()); });
}

json ClusterGroups::receive_instruction() {
  const std::string text = bounded(self_, control_timeout_, "mpi-instruction",
                                   [&] { return session_.broadcast_from_root(""); });
  json instruction = json::parse(text, nullptr, false);
  if (!instruction.is_object() || !instruction.contains("kind")) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("rank {} on {}: rank 0 sent an instruction this commtool does not "
                            "read: is every rank running the same commtool?",
                            self_.rank, self_.host));
  }
  return instruction;
}

void ClusterGroups::finish() {
  if (!is_root() || finished_) return;
  finished_ = true;
  send_instruction({{"kind", "end"}});
}

json ClusterGroups::answer(const json& instruction) const {
  const std::string name = instruction.value("question", "");
  auto it = questions_.find(name);
  try {
    if (it == questions_.end()) {
      throw Error(ExitCode::kEnvironment,
                  fmt::format("rank 0 asked '{}', which this commtool does not answer", name));
    }
    return {{"ok", true}, {"answer", it->second(self_, instruction.value("args", json()))}};
  } catch (const BadValue& e) {
    return {{"ok", false},         {"code", static_cast<int>(e.code())},
            {"message", e.what()}, {"field", e.field()},
            {"value", e.value()},  {"why", e.why()}};
  } catch (const Error& e) {
    return {{"ok", false}, {"code", static_cast<int>(e.code())}, {"message", e.what()}};
  }
}

std::vector<json> ClusterGroups::ask_all(const std::string& question, const json& args) {
  if (!is_root()) throw std::logic_error("ClusterGroups::ask_all: rank 0 asks");
  send_instruction({{"kind", "ask"}, {"question", question}, {"args", args}});
  const std::string mine = answer({{"question", question}, {"args", args}}).dump();
  const std::vector<std::string> gathered = bounded(self_, control_timeout_, "mpi-answers", [&] {
    return session_.gather_to_root(mine, kMaxContribution);
  });
  std::vector<json> answers;
  for (size_t r = 0; r < gathered.size(); ++r) {
    json a = json::parse(gathered[r], nullptr, false);
    const std::string where = fmt::format("rank {} on {}", r, hosts_[r]);
    if (!a.is_object()) throw Error(ExitCode::kEnvironment, where + ": an unreadable answer");
    if (!a.value("ok", false)) {
      const auto code = static_cast<ExitCode>(a.value("code", 3));
      if (a.contains("field")) {
        throw BadValue(a.value("field", ""), a.value("value", ""),
                       fmt::format("{} ({})", a.value("why", ""), where));
      }
      throw Error(code, fmt::format("{}: {}", where, a.value("message", "")));
    }
    answers.push_back(a.value("answer", json()));
  }
  return answers;
}

int ClusterGroups::serve() {
  for (;;) {
    const json instruction = receive_instruction();
    const std::string kind = instruction.value("kind", "");
    if (kind == "end") return 0;
    if (kind == "ask") {
      const std::string mine = answer(instruction).dump();
      bounded(self_, control_timeout_, "mpi-answers",
              [&] { return session_.gather_to_root(mine, kMaxContribution); });
    } else if (kind == "group") {
      take_part(instruction);
    } else {
      throw Error(ExitCode::kEnvironment,
                  fmt::format("rank {} on {}: rank 0 sent '{}', which this commtool does not "
                              "read: is every rank running the same commtool?",
                              self_.rank, self_.host, kind));
    }
  }
}

GroupOutcome ClusterGroups::run(const std::vector<WorkerSpec>& specs, const json& task,
                                std::chrono::duration<double> timeout,
                                std::chrono::duration<double> step) {
  if (!is_root()) throw std::logic_error("ClusterGroups::run: rank 0 runs groups");
  std::vector<int> devices(static_cast<size_t>(self_.size), -1);
  for (const WorkerSpec& s : specs) {
    if (s.rank >= 0 && s.rank < self_.size) devices[static_cast<size_t>(s.rank)] = s.device;
  }
  if (static_cast<int>(specs.size()) != self_.size ||
      std::count(devices.begin(), devices.end(), -1) > 0) {
    throw Error(ExitCode::kUsage,
                fmt::format("a group of {} rank(s) cannot run in an MPI job of {}: every rank of "
                            "the job runs one worker",
                            specs.size(), self_.size));
  }
  std::vector<std::string> gpus;  // host and GPU: the same index on two hosts is two GPUs
  for (int r = 0; r < self_.size; ++r)
    gpus.push_back(
        fmt::format("{}/{}", hosts_[static_cast<size_t>(r)], devices[static_cast<size_t>(r)]));
  const bool shared = summarize_placement(gpus).shared_gpu();
  const std::set<std::string> distinct_hosts(hosts_.begin(), hosts_.end());
  if (shared && distinct_hosts.size() > 1) {
    throw Error(ExitCode::kUsage,
                fmt::format("ranks share a GPU while the MPI job spans {} hosts: ranks sharing a "
                            "GPU need NCCL confined to loopback, which cannot reach the other "
                            "hosts; give each rank a GPU of its own, or run the shared-GPU check "
                            "on one host",
                            distinct_hosts.size()));
  }
  json env = json::object();
  for (const char* name : kVariablesFromRankZero) {
    const char* value = std::getenv(name);
    env[name] = value != nullptr ? json(value) : json(nullptr);
  }
  const json instruction = {{"kind", "group"},
                            {"task", task},
                            {"devices", devices},
                            {"timeout_s", timeout.count()},
                            {"step_s", step.count()},
                            {"shared_gpu", shared},
                            {"run_id", fmt::format("{}-{}", ::getpid(), ++groups_run_)},
                            {"env", env}};
  send_instruction(instruction);
  return take_part(instruction);
}

GroupOutcome ClusterGroups::take_part(const json& instruction) {
  const int device = instruction.at("devices").at(static_cast<size_t>(self_.rank)).get<int>();
  const std::chrono::duration<double> timeout(instruction.at("timeout_s").get<double>());
  const std::chrono::duration<double> step(instruction.at("step_s").get<double>());
  const bool shared = instruction.value("shared_gpu", false);
  const std::vector<int> devices = instruction.at("devices").get<std::vector<int>>();
  const std::function<std::string(int)> name = [&](int r) {
    return fmt::format("rank {} ({} GPU {})", r, hosts_[static_cast<size_t>(r)],
                       devices[static_cast<size_t>(r)]);
  };

  const auto round_limit = timeout + step + kRoundMargin;
  GroupOutcome outcome;
  // A rank that cannot even start its worker says so in the first round, like any failure.
  std::optional<ClusterMember> member;
  std::optional<MemberStep> cannot_start;
  try {
    member.emplace(executable_, self_.rank, self_.size, device,
                   member_environment(instruction, self_.rank), name(self_.rank), timeout, step,
                   instruction.at("task").dump());
  } catch (const Error& e) {
    MemberStep s;
    s.failure.what = fmt::format("{}: {}", name(self_.rank), e.what());
    s.failure.code = e.code();
    s.failure.when_ns = 0;  // before anything else happened
    cannot_start = s;
  }
  // One round per step of the worker: every rank's step to rank 0, rank 0's decision to all.
  for (;;) {
    const MemberStep mine = cannot_start ? *cannot_start : member->next();
    json header = {{"at", kind_name(mine.kind)}, {"seq", mine.sequence}};
    if (mine.kind == MemberStep::Kind::kFailed) {
      const MemberFailure& f = mine.failure;
      header["failure"] = {{"what", f.what},       {"code", static_cast<int>(f.code)},
                           {"when_ns", f.when_ns}, {"field", f.field},
                           {"value", f.value},     {"why", f.why}};
    }
    const std::vector<std::string> gathered = bounded(self_, round_limit, "mpi-round", [&] {
      return session_.gather_to_root(frame(header, mine.payload), kMaxContribution);
    });
    Decision decision;
    if (is_root()) {
      std::vector<std::pair<json, std::string>> steps;
      for (size_t r = 0; r < gathered.size(); ++r)
        steps.push_back(unframe(gathered[r], static_cast<int>(r)));
      decision = decide_round(steps, devices, name, outcome);
    }
    const std::string reply = bounded(self_, round_limit, "mpi-round", [&] {
      return session_.broadcast_from_root(is_root() ? frame({{"do", decision.what}}, decision.blobs)
                                                    : "");
    });
    auto [word, blobs] = unframe(reply, 0);
    const std::string what = word.value("do", "");
    if (what == "release") {
      member->release(mine, blobs);
      continue;
    }
    if (what == "done") {
      member->finish();
      return outcome;
    }
    break;  // "stop"
  }

  // Stopped: every rank stops its worker, then rank 0 learns where each stood.
  RankProgress progress;
  if (member) {
    member->stop();
    progress = member->progress();
  }
  const std::string where = progress_to_json(progress).dump();
  const std::vector<std::string> gathered = bounded(self_, round_limit, "mpi-progress", [&] {
    return session_.gather_to_root(where, kMaxContribution);
  });
  if (is_root() && outcome.failure) explain_failure(*outcome.failure, gathered, name, shared);
  return outcome;
}

}  // namespace commtool::workers
