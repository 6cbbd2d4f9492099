// `commtool record` as a user runs it (a child process, its exit code, its output, what it
// leaves on disk), with jobs that are shell commands: no GPU or NCCL needed.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.hpp"

namespace fs = std::filesystem;

namespace {

using Result = cli_test::CliResult;  // out: stdout and stderr together

Result run(const std::string& args) {
  return cli_test::run_commtool(args, true);
}

using cli_test::contains;
using cli_test::TempDir;

}  // namespace

TEST(CliRecord, TheJobsCommandLineAndExitStatusPassThrough) {
  TempDir tmp;
  const std::string dir = (tmp.path / "rec").string();
  const Result r = run("record --out " + dir + " sh -c 'echo \"$0 $1\"; exit 7' -x --out");
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_NE(r.out.find("-x --out"), std::string::npos) << r.out;  // the job's, not ours
  EXPECT_TRUE(fs::exists(dir + "/record.json"));
  EXPECT_TRUE(fs::is_directory(dir + "/procs"));

  // Every argument reaches the job, in order, and nothing else does: with "--", a "--" of
  // the job's own after it, and without.
  const std::string count_args = "sh -c 'echo \"<$#:$*>\"' zero";
  EXPECT_TRUE(contains(
      run("record --out " + (tmp.path / "a").string() + " -- " + count_args + " one -- two").out,
      "<3:one -- two>"));
  EXPECT_TRUE(
      contains(run("record --out " + (tmp.path / "b").string() + " " + count_args + " --one").out,
               "<1:--one>"));

  const std::string dir2 = (tmp.path / "rec2").string();
  EXPECT_EQ(run("record --out " + dir2 + " -- sh -c 'kill -TERM $$'").code, 128 + 15);
}

TEST(CliRecord, RecordingsOfTheSameSecondGetDirectoriesOfTheirOwn) {
  TempDir tmp;
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path);  // the default directory is made here
  const int first = run("record -- true").code;
  const int second = run("record -- true").code;
  const int third = run("record -- true").code;
  fs::current_path(cwd);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 0);
  EXPECT_EQ(third, 0);
  int recordings = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path))
    recordings += fs::exists(entry.path() / "record.json");
  EXPECT_EQ(recordings, 3);
}

TEST(CliRecord, AJobThatCannotStartIsUsageErrorAndLeavesNoDirectory) {
  TempDir tmp;
  const std::string dir = (tmp.path / "rec").string();
  const Result r = run("record --out " + dir + " commtool-no-such-program");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("commtool-no-such-program"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(run("record --out " + dir).code, 2);  // no command at all
  EXPECT_EQ(run("--json record --out " + dir + " -- true").code, 2);
  EXPECT_EQ(run("record --out " + dir + " --kill-on-hang -- true").code, 2);
  EXPECT_EQ(run("record --out " + dir + " --hang-timeout nan -- true").code, 2);
  EXPECT_FALSE(fs::exists(dir));
}

// --cupti gives the job the plugin library as CUDA's injection and first in LD_PRELOAD (after
// it, what the job preloaded), and the CUPTI the launcher found; record.json says so.
TEST(CliRecord, CuptiInjectsThePluginAndPreloadsItBeforeTheJobsOwn) {
  TempDir tmp;
  const std::string dir = (tmp.path / "rec").string();
  unsetenv("CUDA_INJECTION64_PATH");
  const Result r =
      run("record --cupti --out " + dir +
          " -- sh -c 'echo \"inject=$CUDA_INJECTION64_PATH\"; echo \"preload=$LD_PRELOAD\"; "
          "echo \"cupti=$COMMTOOL_CUPTI_LIBRARY\"'");
  EXPECT_EQ(r.code, 0) << r.out;
  // The toolkit's CUPTI is there wherever commtool builds; where it is not, --cupti is off
  // with a warning and nothing is injected.
  if (contains(r.out, "--cupti is off")) {
    EXPECT_TRUE(contains(r.out, "inject=\n")) << r.out;
    GTEST_SKIP() << "no CUPTI here: " << r.out;
  }
  EXPECT_TRUE(contains(r.out, "inject=/")) << r.out;
  EXPECT_TRUE(contains(r.out, "libcommtool_nccl_profiler.so\npreload=/")) << r.out;
  EXPECT_TRUE(contains(r.out, "cupti=/")) << r.out;
  std::ifstream meta(dir + "/record.json");
  const std::string text((std::istreambuf_iterator<char>(meta)), {});
  EXPECT_TRUE(contains(text, "\"cupti\": true")) << text;
}

// Under another tool's injection --cupti steps aside: a warning, nothing injected, the job
// runs and is recorded with the plugin alone.
TEST(CliRecord, CuptiStepsAsideForAnotherToolsInjection) {
  TempDir tmp;
  const std::string dir = (tmp.path / "rec").string();
  setenv("CUDA_INJECTION64_PATH", "/opt/other-tool/libinject.so", 1);
  const Result r = run("record --cupti --out " + dir +
                       " -- sh -c 'echo \"inject=$CUDA_INJECTION64_PATH preload=$LD_PRELOAD\"'");
  unsetenv("CUDA_INJECTION64_PATH");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "WARNING: --cupti is off for this job: "
                       "CUDA_INJECTION64_PATH=/opt/other-tool/libinject.so is set"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "inject=/opt/other-tool/libinject.so preload=\n")) << r.out;
  std::ifstream meta(dir + "/record.json");
  const std::string text((std::istreambuf_iterator<char>(meta)), {});
  EXPECT_TRUE(contains(text, "\"cupti\": false")) << text;
}
