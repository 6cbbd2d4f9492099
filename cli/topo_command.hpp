// `commtool topo`: on one machine (topo_command.cpp), and under MPI, where every rank reads its
// node and rank 0 prints the cluster view (topo_cluster.cpp).
#pragma once

#include <string>

#include "cli/app.hpp"
#include "probes/base/watchdog.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::cli {

struct TopoOptions {
  std::string nccl_xml;
  std::string sysfs_root;
  bool dot = false;
};

// topo::discover_watched with the options bound: the machine or the file they name, the GPUs
// of --devices, stage times on standard error with -v.
topo::Topology discover_topology(const GlobalOptions& global, const TopoOptions& options,
                                 Watchdog& watchdog);

// topo under MPI: every rank discovers, rank 0 prints the cluster view. Returns the exit code
// of this rank: the other ranks print nothing and return 0 unless MPI itself failed there.
int run_topo_cluster(const GlobalOptions& global, TopoOptions options);

// A path option with "%r" replaced by the MPI rank and "%%" by "%", so that each rank of one
// host can read its own capture or file. Throws usage_error naming the option and value for any
// other "%" sequence.
std::string expand_rank_pattern(const std::string& value, int rank, const char* option);

}  // namespace commtool::cli
