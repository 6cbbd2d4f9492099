// How the MPI tests start their ranks: `mpiexec --oversubscribe -np N` (the MPI CMake found),
// or the command in COMMTOOL_TEST_LAUNCHER with {n} standing for the rank count, so that the
// same tests run under another launcher (scripts/test-srun.sh: srun --mpi=pmix).
#pragma once

#include <cstdlib>
#include <string>

namespace mpi_test {

inline std::string launch(int ranks) {
  const char* other = std::getenv("COMMTOOL_TEST_LAUNCHER");
  if (other == nullptr || *other == '\0') {
    return std::string(COMMTOOL_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks);
  }
  std::string command = other;
  for (size_t at = command.find("{n}"); at != std::string::npos; at = command.find("{n}", at)) {
    command.replace(at, 3, std::to_string(ranks));
  }
  return command;
}

}  // namespace mpi_test
