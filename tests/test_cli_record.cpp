// `commtool record` as a user runs it (a child process, its exit code, its output, what it
// leaves on disk), with jobs that are shell commands: no GPU or NCCL needed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli_run.hpp"
#include "recording_builder.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using Result = cli_test::CliResult;  // out: stdout and stderr together

Result run(const std::string& args) {
  return cli_test::run_commtool(args, true);
}

// With variables set in the command's environment only.
Result run_env(const std::string& env, const std::string& args) {
  return cli_test::run_shell("env " + env + " " + std::string(COMMTOOL_BINARY) + " " + args +
                             " 2>&1");
}

using cli_test::contains;
using cli_test::TempDir;

}  // namespace

TEST(CliRecord, TheJobsCommandLineAndExitStatusPassThrough) {
  TempDir tmp;
  const std::string dir = (tmp.path / "rec").string();
  const Result r = run("record --save " + dir + " sh -c 'echo \"$0 $1\"; exit 7' -x --save");
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_NE(r.out.find("-x --save"), std::string::npos) << r.out;  // the job's, not ours
  EXPECT_TRUE(fs::exists(dir + "/record.json"));
  EXPECT_TRUE(fs::is_directory(dir + "/procs"));

  // Every argument reaches the job, in order, and nothing else does: with "--", a "--" of
  // the job's own after it, and without.
  const std::string count_args = "sh -c 'echo \"<$#:$*>\"' zero";
  EXPECT_TRUE(contains(
      run("record --save " + (tmp.path / "a").string() + " -- " + count_args + " one -- two").out,
      "<3:one -- two>"));
  EXPECT_TRUE(
      contains(run("record --save " + (tmp.path / "b").string() + " " + count_args + " --one").out,
               "<1:--one>"));

  const std::string dir2 = (tmp.path / "rec2").string();
  EXPECT_EQ(run("record --save " + dir2 + " -- sh -c 'kill -TERM $$'").code, 128 + 15);
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
  const Result r = run("record --save " + dir + " commtool-no-such-program");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("commtool-no-such-program"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(run("record --save " + dir).code, 2);  // no command at all
  EXPECT_EQ(run("--json record --save " + dir + " -- true").code, 2);
  EXPECT_EQ(run("record --save " + dir + " --kill-on-hang -- true").code, 2);
  EXPECT_EQ(run("record --save " + dir + " --hang-timeout nan -- true").code, 2);
  EXPECT_FALSE(fs::exists(dir));
}

// --cupti gives the job the plugin library as CUDA's injection and first in LD_PRELOAD (after
// it, what the job preloaded), and the CUPTI the launcher found; record.json says so.
TEST(CliRecord, CuptiInjectsThePluginAndPreloadsItBeforeTheJobsOwn) {
  TempDir tmp;
  const std::string dir = (tmp.path / "rec").string();
  unsetenv("CUDA_INJECTION64_PATH");
  const Result r =
      run("record --cupti --save " + dir +
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
  const Result r = run("record --cupti --save " + dir +
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

namespace {

// commtool started directly (not through a shell's `&`, which would ignore SIGINT for it), its
// output in a file, so that the test can signal it while it runs.
struct Running {
  pid_t pid = -1;
  int wait_status() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
};

Running start_commtool(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv{COMMTOOL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> ptrs;
    for (std::string& a : argv)
      ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    ::execv(ptrs[0], ptrs.data());
    ::_exit(127);
  }
  return {pid};
}

// The processes whose command line holds `marker` (from /proc), zombies left out.
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), {});
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    const bool zombie =
        paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'Z';
    if (!zombie && text.find(marker) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

// A kill or a scheduler's cancel of commtool must not leave the job's processes running with
// no parent, holding their GPUs: the one the job's shell orphaned at once (`(cmd &)`) included.
TEST(CliRecord, SigtermToCommtoolEndsTheJobsWholeTreeOrphansIncluded) {
  TempDir tmp;
  const std::string marker = "31.4159" + std::to_string(::getpid());
  Running r = start_commtool({"record", "--save", (tmp.path / "rec").string(), "--", "sh", "-c",
                              "(sleep " + marker + " &); sleep " + marker + " & wait"},
                             tmp.path / "log");
  ASSERT_TRUE(wait_until([&] { return processes_with("sleep " + marker).size() == 2; }, 10s));
  ::kill(r.pid, SIGTERM);
  const int status = r.wait_status();
  const std::vector<pid_t> left = processes_with("sleep " + marker);
  for (pid_t p : left)
    ::kill(p, SIGKILL);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of the job outlived commtool";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);  // the job's status: its shell was terminated
  std::ifstream log(tmp.path / "log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_TRUE(contains(text, "SIGTERM: ending the job and every process it started")) << text;
  std::ifstream meta(tmp.path / "rec" / "record.json");
  const std::string m((std::istreambuf_iterator<char>(meta)), {});
  EXPECT_TRUE(contains(m, "\"killed_by_commtool\": true")) << m;
}

// Ctrl-C at a terminal reaches the job itself (same process group); `kill -INT` reaches only
// commtool, which must pass it on rather than swallow it.
TEST(CliRecord, SigintSentByAnotherProcessIsPassedToTheJob) {
  TempDir tmp;
  const fs::path got = tmp.path / "got-int";
  Running r = start_commtool({"record", "--save", (tmp.path / "rec").string(), "--", "sh", "-c",
                              "trap 'echo int > " + got.string() + "; exit 0' INT; touch " +
                                  (tmp.path / "ready").string() + "; while :; do sleep 0.05; done"},
                             tmp.path / "log");
  ASSERT_TRUE(wait_until([&] { return fs::exists(tmp.path / "ready"); }, 10s));
  ::kill(r.pid, SIGINT);
  const bool passed = wait_until([&] { return fs::exists(got); }, 10s);
  if (!passed) ::kill(r.pid, SIGTERM);
  const int status = r.wait_status();
  EXPECT_TRUE(passed) << "the job never got the SIGINT";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Recordings started together in one directory: every run gets a directory of its own, and
// every one holds its record.json. With one --save, one run gets it and the rest exit 2.
TEST(CliRecord, RunsStartedTogetherNeverShareADirectory) {
  TempDir tmp;
  const std::string bin = COMMTOOL_BINARY;
  const Result together = cli_test::run_shell(
      "cd " + tmp.path.string() + " && for i in 0 1 2 3 4 5 6 7 8 9; do " + bin +
      " record -- sh -c 'echo \"dir=$COMMTOOL_RECORD_DIR\"' 2>/dev/null & done; wait");
  std::set<std::string> told;
  for (size_t at = together.out.find("dir="); at != std::string::npos;
       at = together.out.find("dir=", at + 1)) {
    told.insert(together.out.substr(at + 4, together.out.find('\n', at) - at - 4));
  }
  EXPECT_EQ(told.size(), 10u) << together.out;
  size_t made = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path)) {
    ++made;
    EXPECT_TRUE(fs::exists(entry.path() / "record.json")) << entry.path();
  }
  EXPECT_EQ(made, 10u);

  const std::string same = (tmp.path / "same").string();
  const Result named =
      cli_test::run_shell("for i in 0 1 2 3 4; do (" + bin + " record --save " + same +
                          " -- sleep 0.5 >/dev/null 2>&1; echo \"rc=$?\") & done; wait");
  size_t ok = 0, refused = 0;
  for (size_t at = named.out.find("rc="); at != std::string::npos;
       at = named.out.find("rc=", at + 1)) {
    const std::string rc = named.out.substr(at + 3, named.out.find('\n', at) - at - 3);
    ok += rc == "0";
    refused += rc == "2";
  }
  EXPECT_EQ(ok, 1u) << named.out;
  EXPECT_EQ(refused, 4u) << named.out;
}

// mkdir does not follow a final symlink but making procs/ inside does: another user's link
// planted in a sticky world-writable directory would have root record into its target.
TEST(CliRecord, AnOutLinkPlantedByAnotherUserInAStickyDirectoryIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the link another owner (CI is root)";
  TempDir tmp;
  const fs::path shared = tmp.path / "tmp";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  const fs::path victim = tmp.path / "victim";
  fs::create_directory(victim);
  const fs::path link = shared / "rec";
  fs::create_symlink(victim, link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);  // nobody's
  const Result r = run("record --save " + link.string() + " -- true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "refusing to follow the symlink")) << r.out;
  EXPECT_TRUE(fs::is_empty(victim));
}

// The directory is the user's word and is quoted in record's last lines: escaped, never raw.
TEST(CliRecord, AnOutNameWithControlCharactersIsPrintedEscaped) {
  TempDir tmp;
  const std::string dir = (tmp.path / "a\x1b[31mb").string();
  const Result r = run("record --save '" + dir + "' -- true");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "record.json"));
  EXPECT_FALSE(contains(r.out, "\x1b")) << r.out;
  EXPECT_TRUE(contains(r.out, "a\\x1b[31mb")) << r.out;
}

// A job whose processes leave operations in flight that never end (the lines are written as the
// plugin writes them): its exit status was 0, commtool's is 5, with the verdict said last.
TEST(CliRecord, AFaultTheRanksShowIsExitFiveWhateverTheJobsStatus) {
  using namespace commtool::testing;
  TempDir tmp;
  const fs::path lines = tmp.path / "lines";
  fs::create_directory(lines);
  for (int rank = 0; rank < 2; ++rank) {
    std::ofstream(lines / fmt::format("node-a-{}.jsonl", 10 + rank))
        << lines_of({proc_line(10 + rank), comm_line(0xc0ffee, rank, 2),
                     start_line(0xc0ffee, rank, 0, kMono0, rank == 0 ? "AllReduce" : "Broadcast")});
  }
  const std::string dir = (tmp.path / "rec").string();
  const Result r = run("record --save " + dir + " -- sh -c 'cp " + lines.string() +
                       "/*.jsonl \"$COMMTOOL_RECORD_DIR/procs/\"; exit 0'");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "DISAGREE on communicator 0000000000c0ffee (2 ranks) at op 0: "
                       "rank 0 called AllReduce op 0"))
      << r.out;
  // Nothing recorded, nothing wrong: the job's status stays.
  EXPECT_EQ(run("record --save " + (tmp.path / "quiet").string() + " -- true").code, 0);
}

// After a hang, on a terminal, one line says for how long the job has been stuck and what
// happens next (the job is quiet then, so the line does not mix with its output). The job
// here writes what the plugin would for an all-reduce that never ends, then exits by itself.
TEST(CliRecord, AHungJobGetsAProgressLineOnATerminal) {
  TempDir tmp;
  const fs::path job = tmp.path / "job.sh";
  std::ofstream(job)
      << "f=\"$COMMTOOL_RECORD_DIR/procs/h-$$.jsonl\"\n"
         "printf '%s\\n' '{\"k\":\"proc\",\"v\":1,\"pid\":'$$',\"host\":\"h\",\"realtime\":"
         "1796385600000000000,\"mono\":500000000000,\"nccl\":\"2.28.9\"}' "
         "'{\"k\":\"comm\",\"comm\":\"00000000000c0ffe\",\"rank\":0,\"nranks\":1,\"nodes\":1,"
         "\"name\":\"\",\"t\":500100000000}' "
         "'{\"k\":\"start\",\"comm\":\"00000000000c0ffe\",\"rank\":0,\"index\":0,\"kind\":"
         "\"coll\",\"seq\":0,\"func\":\"AllReduce\",\"count\":1048576,\"dtype\":\"ncclFloat32\","
         "\"peer\":-1,\"t\":501000000000}' > \"$f\"\n"
         "sleep 3.5\n";
  const std::string record = std::string(COMMTOOL_BINARY) + " record --save " +
                             (tmp.path / "rec").string() + " --hang-timeout 1 -- sh " +
                             job.string();
  const Result r = cli_test::run_shell("script -qfec '" + record + "' /dev/null");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_TRUE(contains(r.out, "\rcommtool record: hung for ")) << r.out;
  EXPECT_TRUE(contains(r.out, "the job is left running (Ctrl-C ends it)\x1b[K")) << r.out;
  EXPECT_TRUE(contains(r.out, "\r\x1b[K")) << r.out;  // erased when the job ended
}

// A job that never loads NCCL leaves a recording with nothing in it; its report says that, not
// that all is well, and exits 0 (the report ran; nothing in it is a hang or a fault).
TEST(CliRecord, TheReportOfARecordingOfNothingSaysNothingWasRecorded) {
  TempDir tmp;
  // The default directory, commtool-record-<date-time> in the working directory.
  const Result rec = cli_test::run_shell("cd " + tmp.path.string() + " && " +
                                         std::string(COMMTOOL_BINARY) + " record -- echo hi 2>&1");
  EXPECT_EQ(rec.code, 0) << rec.out;
  std::string dir;
  for (const fs::directory_entry& e : fs::directory_iterator(tmp.path))
    if (e.path().filename().string().starts_with("commtool-record-")) dir = e.path().string();
  ASSERT_FALSE(dir.empty()) << rec.out;
  const Result r = run("report " + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "No NCCL operation was recorded, so there is nothing to judge"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "what to do: check that the job uses NCCL at all")) << r.out;
  EXPECT_FALSE(contains(r.out, "No hang")) << r.out;
  EXPECT_FALSE(contains(r.out, "Operations per communicator")) << r.out;
  const Result j = run("--json report " + dir);
  EXPECT_EQ(j.code, 0) << j.out;
  EXPECT_TRUE(contains(j.out, "\"verdict\": \"no-operations\"")) << j.out;
}

// Under an MPI launcher, record says to put the launcher after it, and that Open MPI's mpirun
// refuses root unless told: a sentence of its own, with both ways to tell it.
TEST(CliRecord, UnderALauncherItSaysHowToRecordAnMpiJobAndHowMpirunRunsAsRoot) {
  const Result r = run_env("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2", "record -- true");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "put the launcher after record (commtool record -- mpirun -np 8 "
                       "python train.py)."))
      << r.out;
  EXPECT_TRUE(contains(r.out,
                       ". As root, Open MPI's mpirun refuses to start: give it "
                       "--allow-run-as-root, or set OMPI_ALLOW_RUN_AS_ROOT=1 and "
                       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"))
      << r.out;
}
