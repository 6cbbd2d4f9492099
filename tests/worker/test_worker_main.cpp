// The worker executable of the worker-layer tests: the launcher starts it as it starts
// `commtool __worker`, with the test tasks (tests/worker/test_tasks.hpp) registered instead of
// commtool's own. Keeping them here keeps them out of the binary users run.
#include <cstdio>
#include <cstring>

#include "probes/base/workers/worker.hpp"
#include "tests/worker/test_tasks.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], commtool::workers::kWorkerCommand) != 0) {
    std::fprintf(stderr, "test_worker: started by the worker tests only, as: test_worker %s ...\n",
                 commtool::workers::kWorkerCommand);
    return 2;
  }
  commtool::workers::register_test_tasks();
  return commtool::workers::worker_main(argc, argv);
}
