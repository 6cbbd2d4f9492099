#include "probes/workers/test_tasks.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include "probes/error.hpp"
#include "probes/workers/worker.hpp"

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

}  // namespace

void register_test_tasks() {
  register_task("test-exchange", exchange);
  register_task("test-die", die);
  register_task("test-hang", hang);
  register_task("test-error", error);
}

}  // namespace commtool::workers
