// The commtool command line: global options, subcommand registration, exit codes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/base/cluster/launch_env.hpp"
#include "probes/base/error.hpp"
#include "probes/base/nccl/communicator.hpp"

namespace commtool::cli {

// Options every subcommand understands. Bound by CLI11, read by the subcommands' run().
struct GlobalOptions {
  bool json = false;
  std::string output;  // empty: standard output
  std::string devices = "all";
  std::vector<int> device_indices;  // parsed from devices, each GPU once; empty means all
  // The GPU of each rank as listed (repeats and order kept: "0,0,0,0" is four ranks on GPU 0),
  // for the commands that start one worker per rank; empty means one rank per GPU.
  std::vector<int> rank_devices;
  double timeout_s = 60.0;
  std::string comm = "blocking";
  nccl::CommMode comm_mode = nccl::CommMode::kBlocking;  // parsed from comm
  int verbose = 0;
  bool quiet = false;  // -q: no progress line
  bool mpi = false;    // --mpi: initialise MPI even where no launcher is recognised
  // The MPI launcher that started this process, if any (read from its environment).
  cluster::LaunchEnvironment launch;
};

// The subcommands that run as the ranks of an MPI job: topo (the cluster view), probe (one
// measuring rank per node, cli/probe_cluster.hpp), doctor (one examining rank per node,
// cli/doctor_cluster.hpp), trace and diagnose (one worker per rank, cli/mpi_run.hpp).
bool runs_under_mpi(const std::string& subcommand);

// What MPI means for the chosen subcommand, decided before it runs (cli/mpi_use.cpp): nullopt to
// go on, or the exit code to end with at once. Under a launcher with several ranks, a subcommand
// that does not run under MPI is refused by rank 0 alone (exit 2) while the other ranks end
// silently with 0, so a job prints one message, not one per rank; so is any in a build without
// MPI. --mpi is refused likewise with those subcommands, and in a build without MPI.
std::optional<int> check_mpi_use(const GlobalOptions& global, const std::string& subcommand);

// Whether this process is one rank of an MPI job (a launcher's variables, or --mpi).
inline bool under_mpi(const GlobalOptions& global) {
  return global.mpi || global.launch.several_ranks();
}

// Says an error the way a run under MPI needs it said: a usage error (the command line, the
// same on every rank) by rank 0 alone, anything else with the rank and host named. Returns
// the exit code this rank ends with.
int report_error(const GlobalOptions& global, ExitCode code, const std::string& message);

// Parses argv, runs the chosen subcommand, prints errors, and returns the exit code
// (probes/base/error.hpp: 0 ran, 2 usage, 3 environment, 4 verification, 5 timeout). Never throws.
int run(int argc, char** argv);

// The text that closes --help: the exit codes.
extern const char* const kExitCodeHelp;

}  // namespace commtool::cli
