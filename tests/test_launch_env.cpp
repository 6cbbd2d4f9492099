// Which MPI launcher started a process, and which rank of how many it is, from the variables
// the launcher sets: what decides, before MPI is initialised, whether a command runs as one
// rank of a job or is refused by rank 0 alone.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "probes/base/cluster/launch_env.hpp"

using namespace commtool;

namespace {

cluster::LaunchEnvironment detect(const std::map<std::string, std::string>& env) {
  return cluster::detect_launcher([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST(LaunchEnvironment, OpenMpisMpirunGivesRankAndSize) {
  auto e = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_TRUE(e.under_launcher);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);
  EXPECT_TRUE(e.several_ranks());
  EXPECT_TRUE(contains(e.evidence, "OMPI_COMM_WORLD_SIZE=4")) << e.evidence;
}

TEST(LaunchEnvironment, HydraAndPmi2GiveRankAndSize) {
  auto e = detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_TRUE(e.several_ranks());
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 2);
}

TEST(LaunchEnvironment, PmixAloneIsALauncherOfUnknownSize) {
  auto e = detect({{"PMIX_RANK", "1"}});
  EXPECT_TRUE(e.under_launcher);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, -1);
  EXPECT_TRUE(e.several_ranks());  // unknown counts as several: better refuse than print N times
}

TEST(LaunchEnvironment, SrunWithPmixTakesTheSizeFromTheStep) {
  auto e = detect({{"PMIX_RANK", "5"}, {"SLURM_STEP_NUM_TASKS", "16"}, {"SLURM_PROCID", "5"}});
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 16);
}

TEST(LaunchEnvironment, SrunWithoutAnMpiPluginIsALauncherWithSeveralTasks) {
  auto e = detect({{"SLURM_PROCID", "2"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_NTASKS", "8"}});
  EXPECT_TRUE(e.several_ranks());
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.size, 8);
}

TEST(LaunchEnvironment, ABatchScriptIsNotOneOfSeveralTasks) {
  // sbatch -n 8 gives the script SLURM_NTASKS=8 and SLURM_PROCID=0, but no step.
  auto e = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_JOB_ID", "42"}});
  EXPECT_FALSE(e.under_launcher);
  EXPECT_FALSE(e.several_ranks());
}

TEST(LaunchEnvironment, OneTaskOfSrunAndMpirunWithOneRankAreNotSeveral) {
  EXPECT_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}).several_ranks());
  auto e = detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_TRUE(e.under_launcher);
  EXPECT_FALSE(e.several_ranks());
}

TEST(LaunchEnvironment, NoLauncherAndMalformedValuesAreNotALauncher) {
  EXPECT_FALSE(detect({}).under_launcher);
  EXPECT_FALSE(detect({{"OMPI_COMM_WORLD_RANK", "x"}}).under_launcher);
  EXPECT_FALSE(detect({{"PMI_RANK", "-1"}, {"PMI_SIZE", "2"}}).under_launcher);
  EXPECT_FALSE(detect({{"PMI_RANK", "1 "}}).under_launcher);
}
