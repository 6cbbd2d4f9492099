// The worker executable of the worker-layer tests: the launcher starts it as it starts
// `commtool __worker`, with the test tasks (tests/worker/test_tasks.hpp) registered instead of
// commtool's own. Keeping them here keeps them out of the binary users run.
//
// Under mpirun it is also each rank's commtool process (`test_worker __cluster ...`), so that
// the groups that span an MPI job (cluster_group.hpp) run the same test tasks: rank 0 runs one
// group and prints its outcome as JSON, the other ranks serve.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/error.hpp"
#include "probes/base/workers/cluster_group.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/base/workers/worker.hpp"
#include "tests/worker/test_tasks.hpp"

namespace {

using commtool::workers::ClusterGroups;
using nlohmann::json;

// test_worker __cluster TASK_JSON TIMEOUT_S [NAME=VALUE]: one group of the job's size on GPU 0
// of each host, bounded as the entry points bound theirs (a step a third of the timeout); rank 0
// sets NAME=VALUE in its own environment first, as an entry point that drives NCCL's settings does.
int cluster_main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "test_worker __cluster TASK_JSON TIMEOUT_S [NAME=VALUE]\n");
    return 2;
  }
  const json task = json::parse(argv[2]);
  const std::chrono::duration<double> timeout(std::atof(argv[3]));
  try {
    commtool::cluster::MpiSession session = commtool::cluster::MpiSession::start();
    int code = 0;
    {
      ClusterGroups groups(session, "/proc/self/exe", {}, timeout * 4);
      if (!groups.is_root()) {
        code = groups.serve();
      } else {
        if (argc > 4) putenv(argv[4]);
        commtool::workers::ClusterScope scope(groups);
        std::vector<commtool::workers::WorkerSpec> specs;
        for (int r = 0; r < groups.self().size; ++r)
          specs.push_back({r, 0});
        const commtool::workers::GroupOutcome outcome =
            commtool::workers::run_workers("/proc/self/exe", specs, task, timeout, timeout / 3);
        json out = {{"results", outcome.results}, {"failure", nullptr}};
        if (outcome.failure) {
          out["failure"] = {{"rank", outcome.failure->rank},
                            {"what", outcome.failure->what},
                            {"code", static_cast<int>(outcome.failure->code)}};
          code = static_cast<int>(outcome.failure->code);
        }
        std::cout << out.dump() << std::endl;
        groups.finish();
      }
    }
    session.finalize();
    return code;
  } catch (const commtool::Error& e) {
    std::fprintf(stderr, "test_worker: %s\n", e.what());
    return static_cast<int>(e.code());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "__cluster") == 0) return cluster_main(argc, argv);
  if (argc < 2 || std::strcmp(argv[1], commtool::workers::kWorkerCommand) != 0) {
    std::fprintf(stderr, "test_worker: started by the worker tests only, as: test_worker %s ...\n",
                 commtool::workers::kWorkerCommand);
    return 2;
  }
  commtool::workers::register_test_tasks();
  return commtool::workers::worker_main(argc, argv);
}
