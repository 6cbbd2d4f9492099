// A measuring subcommand (trace, diagnose) as one rank of an MPI job: mpirun or srun starts one
// commtool per rank; rank 0 runs the subcommand as on one machine, its worker groups spanning
// the job (probes/base/workers/cluster_group.hpp), and alone prints; the other ranks each run
// their rank's worker when rank 0 asks, and print nothing of their own unless they fail.
#pragma once

#include <string>

#include "cli/app.hpp"
#include "cli/commands.hpp"

namespace commtool::cli {

// Initialises MPI (bounded by --timeout), runs `command` at rank 0 and serves it elsewhere.
// Returns this process's exit status: the command's at rank 0, 0 at the others.
int run_as_mpi_rank(const GlobalOptions& global, const std::string& subcommand,
                    const Runner& command);

}  // namespace commtool::cli
