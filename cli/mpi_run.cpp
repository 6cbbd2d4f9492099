#include "cli/mpi_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/workers/cluster_group.hpp"
#include "probes/topo/rank_placement.hpp"

namespace commtool::cli {

namespace {

constexpr const char* kWaitAdvice =
    "a rank did not reach MPI's start: check that every rank runs the same commtool, or is "
    "stuck before it; mpirun or srun names the ranks that exited";

}  // namespace

int run_as_mpi_rank(const GlobalOptions& global, const std::string& subcommand,
                    const Runner& command) {
  cluster::MpiSession session =
      cluster::MpiSession::start_within(subcommand, global.timeout_s, kWaitAdvice);
  // Between two groups rank 0 reads its machine, plans and, after the last, analyses and
  // renders: the other ranks wait that long for its next word, and no longer.
  const std::chrono::duration<double> between_groups(std::max(120.0, global.timeout_s * 10));
  int code = 0;
  {
    workers::ClusterGroups groups(session, "/proc/self/exe",
                                  {{topo::kPlacementQuestion, topo::answer_placement}},
                                  between_groups);
    if (global.verbose) {
      std::cerr << fmt::format("{}: rank {} of {} on {} (local rank {} of {}), {}\n", subcommand,
                               groups.self().rank, groups.self().size, groups.self().host,
                               groups.self().local_rank, groups.self().local_size,
                               session.library_version());
    }
    if (!groups.is_root()) {
      code = groups.serve();
    } else {
      workers::ClusterScope scope(groups);
      code = command();
      groups.finish();
    }
  }
  session.finalize();
  return code;
}

}  // namespace commtool::cli
