// `probe` under MPI (mpirun or srun start one commtool per rank): the lowest rank of each host
// measures its node's GPUs in turn, as `commtool probe` does on one machine, while the node's
// other ranks wait without spinning; rank 0 gathers every node's figures and prints them side
// by side, the nodes that differ first (probes/bandwidth/probe_cluster.hpp).
#pragma once

#include "cli/app.hpp"
#include "probes/bandwidth/probe_plan.hpp"

namespace commtool::cli {

enum class ProbeFormat { kText, kJson, kCsv };

// Returns this process's exit status: at rank 0 the first failed node's code (after the report
// of the nodes that measured), 3 when a probe asked for ran on no node, else 0; 0 elsewhere.
int run_probe_cluster(const GlobalOptions& global, const probe::ProbeRequest& request,
                      ProbeFormat format);

}  // namespace commtool::cli
