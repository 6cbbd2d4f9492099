// The commtool command line: global options, subcommand registration, exit codes.
#pragma once

#include <string>
#include <vector>

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
};

// Parses argv, runs the chosen subcommand, prints errors, and returns the exit code
// (probes/base/error.hpp: 0 ran, 2 usage, 3 environment, 4 verification, 5 timeout). Never throws.
int run(int argc, char** argv);

// The text that closes --help: the exit codes.
extern const char* const kExitCodeHelp;

}  // namespace commtool::cli
