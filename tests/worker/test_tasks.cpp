#include "tests/worker/test_tasks.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "probes/base/error.hpp"
#include "probes/base/workers/worker.hpp"

namespace commtool::workers {

namespace {

bool is_victim(const WorkerContext& context, const nlohmann::json& task) {
  return task.value("victim", -1) == context.rank;
}

// Each rank allgathers "rank-<r>", then passes two barriers.
nlohmann::json exchange(WorkerContext& context, const nlohmann::json&) {
  std::vector<std::string> gathered = context.comm.allgather(fmt::format("rank-{}", context.rank));
  context.comm.barrier();
  context.comm.barrier();
  return {{"rank", context.rank}, {"gathered", gathered}};
}

// The victim dies by SIGKILL after the first barrier; the others wait in the second.
nlohmann::json die(WorkerContext& context, const nlohmann::json& task) {
  context.comm.barrier();
  if (is_victim(context, task)) ::raise(SIGKILL);
  context.comm.barrier();
  return {{"rank", context.rank}};
}

// The victim never reaches the first barrier, like a rank stuck in a GPU call.
nlohmann::json hang(WorkerContext& context, const nlohmann::json& task) {
  if (is_victim(context, task)) {
    for (;;)
      ::pause();
  }
  context.comm.barrier();
  return {{"rank", context.rank}};
}

// The victim finds wrong data; the others wait in a barrier it never reaches.
nlohmann::json error(WorkerContext& context, const nlohmann::json& task) {
  if (is_victim(context, task)) {
    throw Error(ExitCode::kVerification, fmt::format("rank {}: wrong data", context.rank));
  }
  context.comm.barrier();
  return {{"rank", context.rank}};
}

// Every rank marks seq 0 enqueued on the progress board; the victim then marks itself busy and
// never returns, like a blocking NCCL call waiting for a peer, while the others mark it started
// and wait in a barrier.
nlohmann::json busy_hang(WorkerContext& context, const nlohmann::json& task) {
  context.progress.phase(Phase::kRunning);
  context.progress.enqueued(0, "allreduce float sum", 8);
  if (is_victim(context, task)) {
    context.progress.busy();
    for (;;)
      ::pause();
  }
  context.progress.started(0);
  context.comm.barrier();
  return {{"rank", context.rank}};
}

// Every rank enqueues and starts seq 0 and waits in it, inside a bounded step; the victim stops
// itself there (SIGSTOP, as a debugger or a `kill -STOP` would): the others wait for it past
// the bound, and the one to name is the victim, not the first rank past its bound.
nlohmann::json frozen(WorkerContext& context, const nlohmann::json& task) {
  context.progress.phase(Phase::kRunning);
  context.progress.enqueued(0, "allreduce float sum", 8);
  context.progress.started(0);
  context.progress.busy();
  if (is_victim(context, task)) ::raise(SIGSTOP);
  context.comm.barrier();
  return {{"rank", context.rank}};
}

// Every rank enqueues seq 0 as an 8-element allreduce, except the victim, which enqueues 4
// elements and never reaches the barrier the others wait in: a collective mismatch.
nlohmann::json diverge(WorkerContext& context, const nlohmann::json& task) {
  const bool victim = is_victim(context, task);
  context.progress.phase(Phase::kRunning);
  context.progress.enqueued(0, "allreduce float sum", victim ? 4 : 8);
  if (victim) {
    for (;;)
      ::pause();
  }
  context.comm.barrier();
  return {{"rank", context.rank}};
}

// The NCCL variables the launcher may set for a worker, as the worker sees them (null: unset).
nlohmann::json env(WorkerContext& context, const nlohmann::json&) {
  auto value = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"rank", context.rank},
          {"NCCL_HOSTID", value("NCCL_HOSTID")},
          {"NCCL_SOCKET_IFNAME", value("NCCL_SOCKET_IFNAME")},
          {"NCCL_IB_DISABLE", value("NCCL_IB_DISABLE")},
          {"NCCL_ALGO", value("NCCL_ALGO")}};
}

}  // namespace

void register_test_tasks() {
  register_task("test-exchange", exchange);
  register_task("test-die", die);
  register_task("test-hang", hang);
  register_task("test-error", error);
  register_task("test-busy-hang", busy_hang);
  register_task("test-diverge", diverge);
  register_task("test-frozen", frozen);
  register_task("test-env", env);
}

}  // namespace commtool::workers
