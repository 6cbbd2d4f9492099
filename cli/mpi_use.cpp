#include <fmt/format.h>

#include <iostream>

#include "cli/app.hpp"
#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/error.hpp"

namespace commtool::cli {

namespace {

bool is_root(const GlobalOptions& global) {
  return global.launch.rank <= 0;
}

// Rank 0 says it (exit 2); the others end quietly.
int refuse(const GlobalOptions& global, const std::string& message) {
  if (!is_root(global)) return 0;
  std::cerr << "commtool: " << printable_message(message) << "\n";
  return static_cast<int>(ExitCode::kUsage);
}

// Why MPI is in play, for messages: the launcher's variables, or --mpi.
std::string launcher_words(const GlobalOptions& global) {
  return global.launch.under_launcher
             ? fmt::format("this is one of several ranks started by an MPI launcher: {}",
                           global.launch.evidence)
             : "--mpi was given";
}

}  // namespace

bool runs_under_mpi(const std::string& subcommand) {
  return subcommand == "topo" || subcommand == "probe" || subcommand == "trace" ||
         subcommand == "diagnose" || subcommand == "doctor";
}

std::optional<int> check_mpi_use(const GlobalOptions& global, const std::string& subcommand) {
  if (!global.mpi && !global.launch.several_ranks()) return std::nullopt;
  if (!runs_under_mpi(subcommand)) {
    std::string message =
        global.mpi
            ? fmt::format(
                  "--mpi: topo, probe, trace, diagnose and doctor run under MPI; {} does not",
                  subcommand)
            : fmt::format(
                  "{} does not run under MPI, only topo, probe, trace, diagnose and doctor do: run "
                  "{} "
                  "once per node, without the launcher ({})",
                  subcommand, subcommand, launcher_words(global));
    if (subcommand == "record") {
      message +=
          "; to record an MPI job, put the launcher after record (commtool record -- mpirun "
          "-np 8 python train.py). As root, Open MPI's mpirun refuses to start: give it "
          "--allow-run-as-root, or set OMPI_ALLOW_RUN_AS_ROOT=1 and "
          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    return refuse(global, message);
  }
  if (!cluster::MpiSession::built_with_mpi()) {
    return refuse(global,
                  fmt::format("{} under MPI: this commtool was built without MPI (CMake "
                              "found no MPI library), so its ranks cannot reach each other ({}); "
                              "build it where Open MPI is installed (scripts/setup.sh installs "
                              "libopenmpi-dev), or run {} once per node without the launcher",
                              subcommand, launcher_words(global), subcommand));
  }
  return std::nullopt;
}

int report_error(const GlobalOptions& global, ExitCode code, const std::string& message) {
  const bool several = global.mpi || global.launch.several_ranks();
  if (several && code == ExitCode::kUsage && !is_root(global)) return 0;
  std::string prefix;
  if (several && code != ExitCode::kUsage && global.launch.rank >= 0 &&
      message.rfind("rank ", 0) != 0) {
    prefix = fmt::format("rank {} on {}: ", global.launch.rank, cluster::this_hostname());
  }
  std::cerr << "commtool: " << prefix << printable_message(message) << "\n";
  return static_cast<int>(code);
}

}  // namespace commtool::cli
