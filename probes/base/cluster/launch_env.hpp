// Whether this process was started by an MPI launcher (Open MPI's mpirun, MPICH's Hydra, Slurm's
// srun, a PMIx launcher), and which rank of how many it is, read from the environment the
// launcher sets. Known before MPI is initialised: that is what lets a command that does not run
// under MPI refuse from rank 0 alone, without initialising MPI in every rank.
#pragma once

#include <functional>
#include <string>

namespace commtool::cluster {

struct LaunchEnvironment {
  bool under_launcher = false;
  int rank = -1;  // -1: the launcher's variables do not say
  int size = -1;  // -1: the launcher's variables do not say (a PMIx launcher sets only the rank)
  std::string evidence;  // the variables that told, "OMPI_COMM_WORLD_SIZE=4", for messages

  // A launcher that started more than one process, or one whose size is unknown.
  bool several_ranks() const { return under_launcher && size != 1; }
};

// Looks a variable up: nullptr when it is not set.
using EnvironmentLookup = std::function<const char*(const char*)>;

// Checked in this order, the first that is present wins:
//   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE   Open MPI's mpirun (and prterun)
//   PMI_RANK / PMI_SIZE                           MPICH's Hydra, srun --mpi=pmi2
//   PMIX_RANK (size from SLURM_STEP_NUM_TASKS)    PMIx launchers, srun --mpi=pmix
//   SLURM_PROCID with SLURM_STEP_NUM_TASKS > 1    srun without an MPI plugin
// Slurm's SLURM_NTASKS is not enough: a batch script has it (the allocation's task count) and
// SLURM_PROCID=0 too, without being one of several tasks; srun sets SLURM_STEP_NUM_TASKS for the
// tasks of a step only. A value that is not a whole number counts as not set.
LaunchEnvironment detect_launcher(const EnvironmentLookup& lookup);

// The same, from this process's environment.
LaunchEnvironment detect_launcher();

}  // namespace commtool::cluster
