// `commtool record`'s side of the job: starting the user's command unchanged, passing its exit
// status through, ending it only when asked, and the watch loop's hang rule, with real
// processes (sh, sleep) and a recording simulated through the hooks.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "probes/base/error.hpp"
#include "tracing/profiler/record_line.hpp"
#include "tracing/record/job.hpp"
#include "tracing/record/live_recording.hpp"
#include "tracing/record/record_run.hpp"

namespace fs = std::filesystem;
using namespace commtool;
using namespace commtool::record;
using namespace std::chrono_literals;

namespace {

int wait_status(Job& job) {
  for (int i = 0; i < 1000 && !job.poll_exit(); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(job.ended());
  return job.shell_status();
}

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("commtool-record-test-" + std::to_string(getpid()) +
                                           "-" + std::to_string(counter_++))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// A recording that never grows: `in_flight` operations stuck from the start.
struct FakeRecording {
  std::atomic<int> polls{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> in_flight{0};
  RecordHooks hooks() {
    return {nullptr,
            [this] { ++polls; },
            [this] { return completed.load(); },
            [this] { return in_flight.load(); },
            [](bool) { return std::string("rank 1 never started AllReduce #7\n"); },
            [] { return std::string("nothing recorded"); }};
  }
};

RecordRequest request(const TempDir& tmp, std::vector<std::string> command) {
  RecordRequest q;
  q.command = std::move(command);
  q.out_dir = (tmp.path() / "rec").string();
  q.plugin = (tmp.path() / "plugin.so").string();
  std::ofstream(q.plugin) << "not really a library";
  q.commtool_version = "test";
  return q;
}

nlohmann::json read_meta(const RecordRequest& q) {
  std::ifstream in(fs::path(q.out_dir) / "record.json");
  return nlohmann::json::parse(in);
}

ExitCode code_of(const RecordRequest& q) {
  try {
    check_request(q);
  } catch (const Error& e) {
    return e.code();
  }
  return ExitCode::kOk;
}

}  // namespace

TEST(RecordJob, FindsCommandsAsAShellDoes) {
  EXPECT_TRUE(find_executable("sh").has_value());
  EXPECT_FALSE(find_executable("commtool-no-such-command-here").has_value());
  TempDir tmp;
  const fs::path plain = tmp.path() / "plain-file";
  std::ofstream(plain) << "#!/bin/sh\n";
  fs::permissions(plain, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_FALSE(find_executable(plain.string()).has_value());  // exists, not executable
  fs::permissions(plain, fs::perms::owner_exec, fs::perm_options::add);
  EXPECT_TRUE(find_executable(plain.string()).has_value());
  EXPECT_FALSE(find_executable("").has_value());
}

TEST(RecordJob, PassesTheExitStatusThrough) {
  Job job = Job::start({"sh", "-c", "exit 3"}, {});
  EXPECT_EQ(wait_status(job), 3);
  EXPECT_EQ(job.exit_code(), 3);
  EXPECT_EQ(job.describe_exit(), "exited with status 3");
}

TEST(RecordJob, ASignalDeathReadsAsAShellReportsIt) {
  Job job = Job::start({"sh", "-c", "kill -TERM $$"}, {});
  EXPECT_EQ(wait_status(job), 128 + SIGTERM);
  EXPECT_EQ(job.signal_number(), SIGTERM);
  EXPECT_NE(job.describe_exit().find("SIGTERM"), std::string::npos);
}

TEST(RecordJob, AddsAndReplacesEnvironmentVariables) {
  setenv("COMMTOOL_TEST_REPLACED", "theirs", 1);
  Job job = Job::start(
      {"sh", "-c", "test \"$COMMTOOL_TEST_ADDED\" = a && test \"$COMMTOOL_TEST_REPLACED\" = ours"},
      {{"COMMTOOL_TEST_ADDED", "a"}, {"COMMTOOL_TEST_REPLACED", "ours"}});
  EXPECT_EQ(wait_status(job), 0);
  unsetenv("COMMTOOL_TEST_REPLACED");
}

TEST(RecordJob, AFileThatIsNoProgramIsBadUsageNamingIt) {
  TempDir tmp;
  const fs::path script = tmp.path() / "no-program";
  std::ofstream(script) << "\x7f"
                           "ELF but not really\n";
  fs::permissions(script, fs::perms::owner_all);
  try {
    Job::start({script.string()}, {});
    FAIL() << "a file exec refuses must not start";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("no-program"), std::string::npos) << e.what();
  }
}

TEST(RecordJob, TerminatesTheWholeTreeOnlyWhenAsked) {
  Job job = Job::start({"sh", "-c", "sleep 60 & sleep 60 & wait"}, {});
  std::vector<pid_t> below;
  for (int i = 0; i < 200 && below.size() < 2; ++i) {
    std::this_thread::sleep_for(10ms);
    below = descendants(job.pid());
  }
  ASSERT_EQ(below.size(), 2u);
  EXPECT_FALSE(job.poll_exit());
  EXPECT_EQ(job.terminate_tree(5s), 3);
  EXPECT_TRUE(job.ended());
  for (pid_t p : below) {
    std::this_thread::sleep_for(50ms);  // reparented to init, which reaps them
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string line;
    if (std::getline(stat, line)) {
      EXPECT_NE(line.substr(line.rfind(')') + 2, 1), "S") << "pid " << p << " survived";
    }
  }
}

TEST(RecordRequestCheck, RefusesWhatCannotWork) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sh", "-c", "true"});
  EXPECT_EQ(code_of(q), ExitCode::kOk);

  RecordRequest no_command = q;
  no_command.command.clear();
  EXPECT_EQ(code_of(no_command), ExitCode::kUsage);

  RecordRequest unknown = q;
  unknown.command = {"commtool-no-such-command-here"};
  EXPECT_EQ(code_of(unknown), ExitCode::kUsage);

  RecordRequest nan = q;
  nan.hang_timeout_s = std::nan("");
  EXPECT_EQ(code_of(nan), ExitCode::kUsage);
  RecordRequest tiny = q;
  tiny.hang_timeout_s = 0.01;
  EXPECT_EQ(code_of(tiny), ExitCode::kUsage);

  RecordRequest kill_alone = q;
  kill_alone.kill_on_hang = true;
  EXPECT_EQ(code_of(kill_alone), ExitCode::kUsage);

  RecordRequest full = q;
  full.out_dir = tmp.path().string();  // holds plugin.so
  EXPECT_EQ(code_of(full), ExitCode::kUsage);

  RecordRequest no_parent = q;
  no_parent.out_dir = (tmp.path() / "missing" / "rec").string();
  EXPECT_EQ(code_of(no_parent), ExitCode::kUsage);

  RecordRequest no_plugin = q;
  no_plugin.plugin = (tmp.path() / "absent.so").string();
  EXPECT_EQ(code_of(no_plugin), ExitCode::kEnvironment);
}

TEST(RecordRun, GivesTheJobThePluginAndTheDirectory) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sh", "-c",
                                  "test \"$NCCL_PROFILER_PLUGIN\" = \"$1\" && "
                                  "test \"$COMMTOOL_RECORD_DIR\" = \"$2\" && test -d \"$2/procs\"",
                                  "sh"});
  q.command.push_back(q.plugin);
  q.command.push_back(fs::absolute(q.out_dir).string());
  FakeRecording rec;
  const RecordOutcome o = run_recording(q, rec.hooks());
  EXPECT_EQ(o.status, 0) << o.how_ended;
  const auto meta = read_meta(q);
  EXPECT_EQ(meta.at("kind"), "commtool-record");
  EXPECT_EQ(meta.at("ended").at("exit_code"), 0);
  EXPECT_TRUE(meta.at("hang").is_null());
  EXPECT_GT(rec.polls.load(), 0);
}

TEST(RecordRun, ExitStatusIsTheJobsAndRecorded) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sh", "-c", "exit 7"});
  FakeRecording rec;
  EXPECT_EQ(run_recording(q, rec.hooks()).status, 7);
  EXPECT_EQ(read_meta(q).at("ended").at("exit_code"), 7);
}

TEST(RecordRun, AHangIsReportedAndTheJobLeftRunning) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sleep", "1.5"});
  q.hang_timeout_s = 0.3;
  FakeRecording rec;
  rec.in_flight = 1;
  const RecordOutcome o = run_recording(q, rec.hooks());
  EXPECT_TRUE(o.hang_detected);
  EXPECT_FALSE(o.killed_by_commtool);
  EXPECT_EQ(o.status, 0);  // sleep ended on its own
  EXPECT_GE(o.wall_s, 1.4);
  std::ifstream standing(fs::path(q.out_dir) / "standing-1.txt");
  std::string text((std::istreambuf_iterator<char>(standing)), {});
  EXPECT_NE(text.find("rank 1 never started AllReduce #7"), std::string::npos) << text;
  EXPECT_FALSE(read_meta(q).at("hang").is_null());
}

TEST(RecordRun, ProgressAfterAQuietSpellClearsTheHang) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sleep", "1.2"});
  q.hang_timeout_s = 0.2;
  FakeRecording rec;
  rec.in_flight = 1;
  std::thread progress([&rec] {
    std::this_thread::sleep_for(600ms);  // well past the timeout: reported as a hang
    rec.in_flight = 0;                   // then the operation completes after all
    rec.completed = 1;
  });
  const RecordOutcome o = run_recording(q, rec.hooks());
  progress.join();
  EXPECT_TRUE(fs::exists(fs::path(q.out_dir) / "standing-1.txt"));
  EXPECT_FALSE(o.hang_detected);
  EXPECT_TRUE(read_meta(q).at("hang").is_null());
}

TEST(RecordRun, NoHangWithoutOperationsInFlight) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sleep", "0.8"});
  q.hang_timeout_s = 0.2;
  FakeRecording rec;  // nothing in flight: the job is computing, not waiting
  EXPECT_FALSE(run_recording(q, rec.hooks()).hang_detected);
  EXPECT_FALSE(fs::exists(fs::path(q.out_dir) / "standing-1.txt"));
}

TEST(RecordRun, KillOnHangEndsTheJobWhenAsked) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sleep", "60"});
  q.hang_timeout_s = 0.3;
  q.kill_on_hang = true;
  FakeRecording rec;
  rec.in_flight = 2;
  const auto t0 = std::chrono::steady_clock::now();
  const RecordOutcome o = run_recording(q, rec.hooks());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_TRUE(o.hang_detected);
  EXPECT_TRUE(o.killed_by_commtool);
  EXPECT_EQ(o.status, 128 + SIGTERM);
  EXPECT_TRUE(read_meta(q).at("ended").at("killed_by_commtool").get<bool>());
}

TEST(RecordRun, SigusrOnePrintsWhereEveryRankStands) {
  TempDir tmp;
  RecordRequest q = request(tmp, {"sleep", "1"});
  FakeRecording rec;
  const fs::path meta = fs::path(q.out_dir) / "record.json";
  std::thread poke([meta] {
    // The handlers go in before record.json is written; without them SIGUSR1 would end the
    // test.
    while (!fs::exists(meta))
      std::this_thread::sleep_for(10ms);
    ::kill(::getpid(), SIGUSR1);
  });
  const RecordOutcome o = run_recording(q, rec.hooks());
  poke.join();
  EXPECT_EQ(o.status, 0);
  EXPECT_TRUE(fs::exists(fs::path(q.out_dir) / "standing-1.txt"));
}

TEST(RecordRun, AnUnrunnableCommandLeavesNoDirectory) {
  TempDir tmp;
  const fs::path fake = tmp.path() / "fake-program";
  std::ofstream(fake) << "\x7f"
                         "ELF?";
  fs::permissions(fake, fs::perms::owner_all);
  RecordRequest q = request(tmp, {fake.string()});
  FakeRecording rec;
  EXPECT_THROW(run_recording(q, rec.hooks()), Error);
  EXPECT_FALSE(fs::exists(q.out_dir));
}

// The watch loop's view of a real recording directory, as the plugin writes it.
class LiveRecordingTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(tmp_.path() / "procs"); }
  void append(const std::string& file, const nccl_profiler::RecordLine& line) {
    std::ofstream(tmp_.path() / "procs" / file, std::ios::app)
        << nccl_profiler::to_line(line) << "\n";
  }
  void append_raw(const std::string& file, const std::string& text) {
    std::ofstream(tmp_.path() / "procs" / file, std::ios::app) << text;
  }
  static nccl_profiler::StartLine start(uint64_t index) {
    nccl_profiler::StartLine s;
    s.comm = 0xabcdef0123456789;
    s.rank = 0;
    s.index = index;
    s.seq = index;
    s.func = "AllReduce";
    s.count = 256;
    s.datatype = "ncclFloat32";
    s.t_ns = 1000 + static_cast<int64_t>(index);
    return s;
  }
  TempDir tmp_;
};

TEST_F(LiveRecordingTest, CountsOperationsInFlightAndEnded) {
  nccl_profiler::ProcLine proc;
  proc.pid = 42;
  proc.host = "h";
  append("h-42.jsonl", proc);
  append("h-42.jsonl", nccl_profiler::CommLine{0xabcdef0123456789, 0, 2, 1, "", 900, "", ""});
  LiveRecording live(tmp_.path());
  RecordHooks hooks = live.hooks();
  hooks.poll();
  EXPECT_EQ(hooks.in_flight(), 0u);
  append("h-42.jsonl", start(0));
  append("h-42.jsonl", start(1));
  hooks.poll();
  EXPECT_EQ(hooks.in_flight(), 2u);
  EXPECT_EQ(hooks.completed(), 0u);
  nccl_profiler::EndLine end;
  end.op = start(0);
  end.enqueue = {1000, 1100};
  append("h-42.jsonl", end);
  end.op = start(1);
  end.complete = false;  // ended without its kernel seen: progress, not in flight
  append("h-42.jsonl", end);
  hooks.poll();
  EXPECT_EQ(hooks.in_flight(), 0u);
  EXPECT_EQ(hooks.completed(), 2u);
  EXPECT_NE(hooks.summary().find("1 process(es)"), std::string::npos) << hooks.summary();
}

TEST_F(LiveRecordingTest, ABadRecordingStopsTheWatchNotTheJob) {
  nccl_profiler::ProcLine proc;
  proc.pid = 7;
  append("h-7.jsonl", proc);
  append("h-7.jsonl", start(0));
  append_raw("h-7.jsonl", "{\"k\":\"start\",\"comm\":\"zz\"}\n");  // JSON, not a record line
  LiveRecording live(tmp_.path());
  RecordHooks hooks = live.hooks();
  EXPECT_NO_THROW(hooks.poll());
  EXPECT_NO_THROW(hooks.poll());
  EXPECT_NE(hooks.standing(true).find("stopped being readable"), std::string::npos)
      << hooks.standing(true);
}

TEST(RecordCupti, AnotherToolsInjectionOrACuptiToolAsTheJobTurnsItOff) {
  EXPECT_EQ(cupti_conflict({"python3", "train.py"}, nullptr), "");
  EXPECT_EQ(cupti_conflict({"python3", "train.py"}, ""), "");
  EXPECT_NE(cupti_conflict({"python3"}, "/opt/nsight/libToolsInjection64.so")
                .find("CUDA_INJECTION64_PATH=/opt/nsight/libToolsInjection64.so"),
            std::string::npos);
  for (const char* tool : {"nsys", "/usr/local/cuda/bin/ncu", "compute-sanitizer", "cuda-gdb"}) {
    EXPECT_NE(cupti_conflict({tool, "python3"}, nullptr).find("the job runs under"),
              std::string::npos)
        << tool;
  }
  EXPECT_EQ(cupti_conflict({"nsys-report-viewer"}, nullptr), "");
}

TEST(RecordCupti, TheJobGetsTheInjectionAndThePreloadOnlyWithCupti) {
  RecordRequest q;
  q.plugin = "/opt/commtool/lib/libcommtool_nccl_profiler.so";
  q.out_dir = "/tmp/rec";
  auto env = record_environment(q, "/usr/lib/libjemalloc.so");
  auto value = [&env](const std::string& name) -> std::optional<std::string> {
    for (const auto& [k, v] : env)
      if (k == name) return v;
    return std::nullopt;
  };
  EXPECT_EQ(value("NCCL_PROFILER_PLUGIN"), q.plugin);
  EXPECT_FALSE(value("CUDA_INJECTION64_PATH"));
  EXPECT_FALSE(value("LD_PRELOAD"));  // the job keeps its own, untouched
  q.cupti_library = "/usr/local/cuda/lib64/libcupti.so.13";
  env = record_environment(q, "/usr/lib/libjemalloc.so");
  EXPECT_EQ(value("CUDA_INJECTION64_PATH"), q.plugin);
  EXPECT_EQ(value("COMMTOOL_CUPTI_LIBRARY"), q.cupti_library);
  // commtool's stand-ins first, then what the job preloaded.
  EXPECT_EQ(value("LD_PRELOAD"), q.plugin + ":/usr/lib/libjemalloc.so");
  env = record_environment(q, nullptr);
  EXPECT_EQ(value("LD_PRELOAD"), q.plugin);
}
