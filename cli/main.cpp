#include <cstdlib>
#include <cstring>

#include "cli/app.hpp"
#include "probes/bandwidth/probe_tasks.hpp"
#include "probes/base/workers/worker.hpp"
#include "tracing/allreduce/ipc_allreduce_task.hpp"
#include "tracing/ep/ep_task.hpp"
#include "tracing/trace/trace_task.hpp"

int main(int argc, char** argv) {
  // GPU indices everywhere in commtool are PCI bus order, as nvidia-smi numbers them; make
  // CUDA's ordinals agree unless the user chose otherwise.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/0);
  // A worker process started by run_workers (probes/base/workers/launcher.hpp), not a user.
  if (argc > 1 && std::strcmp(argv[1], commtool::workers::kWorkerCommand) == 0) {
    commtool::probe::register_probe_tasks();
    commtool::tracing::register_trace_tasks();
    commtool::tracing::register_ep_tasks();
    commtool::tracing::register_ipc_allreduce_tasks();
    return commtool::workers::worker_main(argc, argv);
  }
  return commtool::cli::run(argc, argv);
}
