// `doctor` under MPI (mpirun or srun start one commtool per rank): the lowest rank of each host
// examines its node as `commtool doctor` does on one machine, the node's other ranks wait
// without spinning, and rank 0 prints one page for the job: the nodes that differ from the
// state most share first (reports/doctor/doctor_cluster.hpp).
#pragma once

#include <optional>

#include "cli/app.hpp"
#include "reports/doctor/baseline.hpp"
#include "tracing/doctor/doctor_run.hpp"

namespace commtool::cli {

// Returns this process's exit status: at rank 0 the job's (cluster_exit_code), 0 elsewhere.
int run_doctor_cluster(const GlobalOptions& global, const doctor::Request& request,
                       const std::optional<reports::doctor::Baseline>& baseline);

}  // namespace commtool::cli
