// The commtool command line: global options, subcommand registration, exit codes.
#pragma once

#include <string>
#include <vector>

namespace commtool::cli {

// Options every subcommand understands. Bound by CLI11, read by the subcommands' run().
struct GlobalOptions {
  bool json = false;
  std::string output;  // empty: standard output
  std::string devices = "all";
  std::vector<int> device_indices;  // parsed from devices; empty means all
  double timeout_s = 60.0;
  int verbose = 0;
};

// Parses argv, runs the chosen subcommand, prints errors, and returns the exit code of
// DESIGN.md section 4. Never throws.
int run(int argc, char** argv);

// The text that closes --help: the exit codes.
extern const char* const kExitCodeHelp;

}  // namespace commtool::cli
