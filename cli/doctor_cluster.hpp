// `doctor` under MPI (mpirun or srun start one commtool per rank): the lowest rank of each host
// examines its node as `commtool doctor` does on one machine, the node's other ranks wait
// without spinning, and rank 0 prints one page for the job: the nodes that differ from the
// state most share first (reports/doctor/doctor_cluster.hpp).
#pragma once

#include <string>

#include "cli/app.hpp"
#include "tracing/doctor/doctor_run.hpp"

namespace commtool::cli {

// The files each node reads for itself (empty: none): a file that a node cannot read, or that
// does not parse, is that node's failure on the job's page.
struct DoctorFiles {
  std::string thresholds;
  std::string baseline;
};

// Returns this process's exit status: at rank 0 the job's (cluster_exit_code: 2 when every node
// was refused the same bad file), 0 elsewhere.
int run_doctor_cluster(const GlobalOptions& global, const doctor::Request& request,
                       const DoctorFiles& files);

}  // namespace commtool::cli
