// What the CLI test files that run commands other than record share: commtool run with its
// standard error after its output, diagnose ep's fixtures, and the check for exit 3.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "cli_run.hpp"

namespace cli_test {

using Result = CliResult;  // out: stdout and stderr together

inline Result run(const std::string& args) {
  return run_commtool(args, true);
}

inline std::string ep_fixture(const std::string& name) {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/ep/" + name;
}

// A measuring command on a machine without a GPU: exit 3 and the reason. CI has none; on the
// GPU machine the command runs instead, and the test is skipped there.
inline void expect_no_gpu_exit_3(const std::string& args) {
  Result r = run(args);
  if (r.code == 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(r.code, 3) << args << "\n" << r.out;
  EXPECT_TRUE(contains(r.out, "no NVIDIA GPU found")) << r.out;
}

}  // namespace cli_test
