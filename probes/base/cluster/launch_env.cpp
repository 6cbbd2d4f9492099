#include "probes/base/cluster/launch_env.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <string_view>

#include "probes/base/parse_number.hpp"

namespace commtool::cluster {

namespace {

// A launcher's variable as a non-negative whole number; nullopt when unset or anything else.
std::optional<int> whole_number(const EnvironmentLookup& lookup, const char* name) {
  const char* text = lookup(name);
  if (text == nullptr) return std::nullopt;
  const std::optional<int> value = parse_number<int>(text);
  if (!value || *value < 0) return std::nullopt;
  return value;
}

struct Pair {
  const char* rank;
  const char* size;
};

}  // namespace

LaunchEnvironment detect_launcher(const EnvironmentLookup& lookup) {
  LaunchEnvironment env;
  for (const Pair p : {Pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                       Pair{"PMI_RANK", "PMI_SIZE"}, Pair{"PMIX_RANK", "SLURM_STEP_NUM_TASKS"}}) {
    const std::optional<int> rank = whole_number(lookup, p.rank);
    if (!rank) continue;
    const std::optional<int> size = whole_number(lookup, p.size);
    env.under_launcher = true;
    env.rank = *rank;
    env.size = size.value_or(-1);
    env.evidence = size ? fmt::format("{}={}, {}={}", p.rank, *rank, p.size, *size)
                        : fmt::format("{}={}", p.rank, *rank);
    return env;
  }
  const std::optional<int> procid = whole_number(lookup, "SLURM_PROCID");
  const std::optional<int> tasks = whole_number(lookup, "SLURM_STEP_NUM_TASKS");
  if (procid && tasks && *tasks > 1) {
    env.under_launcher = true;
    env.rank = *procid;
    env.size = *tasks;
    env.evidence = fmt::format("SLURM_PROCID={}, SLURM_STEP_NUM_TASKS={}", *procid, *tasks);
  }
  return env;
}

LaunchEnvironment detect_launcher() {
  return detect_launcher([](const char* name) { return std::getenv(name); });
}

}  // namespace commtool::cluster
