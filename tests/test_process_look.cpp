// What /proc says a process is doing (probes/base/process_look.hpp): the stat line's state, the
// fold over threads, and real processes of this test (stopped, zombie, gone).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "probes/base/process_look.hpp"

namespace fs = std::filesystem;
using namespace commtool::proc;

namespace {

struct FakeProc {
  fs::path root = fs::temp_directory_path() / ("commtool-proc-" + std::to_string(getpid()));
  FakeProc() { fs::create_directories(root); }
  ~FakeProc() { fs::remove_all(root); }
  void thread(int64_t pid, int64_t tid, char state, const std::string& wchan = "") {
    const fs::path task = root / std::to_string(pid) / "task" / std::to_string(tid);
    fs::create_directories(task);
    std::ofstream(task / "stat") << tid << " (py (thon) x) " << state << " 1 2 3\n";
    if (!wchan.empty()) std::ofstream(task / "wchan") << wchan;
    if (tid == pid) {
      std::ofstream(root / std::to_string(pid) / "stat")
          << pid << " (py (thon) x) " << state << " 1 2 3\n";
      std::ofstream(root / std::to_string(pid) / "status") << "Name:\tpy\nTracerPid:\t0\n";
    }
  }
};

// Waits (bounded) until /proc shows the child in `state`.
bool becomes(pid_t pid, RunState state) {
  for (int i = 0; i < 200; ++i) {
    if (look_at(pid).state == state) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST(ProcessLook, TheStateIsTheFieldAfterTheLastParenthesis) {
  EXPECT_EQ(stat_state("4711 (python3) S 1 4711"), 'S');
  EXPECT_EQ(stat_state("4711 (a) b) (c) T 1"), 'T');
  EXPECT_EQ(stat_state("4711 (x) D"), 'D');
  EXPECT_EQ(stat_state("no parenthesis here"), std::nullopt);
  EXPECT_EQ(stat_state("4711 (cut)"), std::nullopt);
  EXPECT_EQ(stat_state(""), std::nullopt);
}

TEST(ProcessLook, OneThreadInUninterruptibleSleepHoldsTheProcess) {
  FakeProc p;
  p.thread(100, 100, 'S');
  p.thread(100, 101, 'D', "nvidia_ioctl");
  p.thread(100, 102, 'R');
  const ProcessLook look = look_at(100, p.root);
  EXPECT_EQ(look.state, RunState::kUninterruptible);
  EXPECT_EQ(look.wait_channel, "nvidia_ioctl");
  EXPECT_EQ(look.threads, 3);
  EXPECT_EQ(describe(look), "in uninterruptible sleep in nvidia_ioctl");
}

// An H200 showed a rank "in uninterruptible sleep in os_acquire_mutex" for one look while
// another rank's abort held the driver's lock: a passing D state is not a stuck process.
TEST(ProcessLook, OnlyAnUninterruptibleSleepThatLastsTheWindowCounts) {
  FakeProc p;
  p.thread(100, 100, 'S');
  p.thread(100, 101, 'D', "nvidia_ioctl");      // stays in D
  p.thread(200, 200, 'D', "os_acquire_mutex");  // leaves D after a moment
  p.thread(300, 300, 'T');
  std::thread leave([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    p.thread(200, 200, 'S');
  });
  const auto started = std::chrono::steady_clock::now();
  const std::vector<ProcessLook> looks =
      look_steadily({100, 200, 300, 0}, std::chrono::milliseconds(400), p.root);
  const auto took = std::chrono::steady_clock::now() - started;
  leave.join();
  ASSERT_EQ(looks.size(), 4u);
  EXPECT_EQ(looks[0].state, RunState::kUninterruptible);
  EXPECT_EQ(looks[0].wait_channel, "nvidia_ioctl");
  EXPECT_EQ(looks[1].state, RunState::kRunning);
  EXPECT_EQ(looks[2].state, RunState::kStopped);
  EXPECT_EQ(looks[3].state, RunState::kGone);
  EXPECT_GE(took, std::chrono::milliseconds(400));  // one process stayed in D: the whole window
}

TEST(ProcessLook, NoProcessInUninterruptibleSleepNoWait) {
  FakeProc p;
  p.thread(300, 300, 'T');
  const auto started = std::chrono::steady_clock::now();
  const std::vector<ProcessLook> looks = look_steadily({300}, std::chrono::seconds(5), p.root);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_EQ(looks.at(0).state, RunState::kStopped);
}

TEST(ProcessLook, StoppedOnlyWhenEveryThreadIs) {
  FakeProc p;
  p.thread(200, 200, 'T');
  p.thread(200, 201, 'T');
  EXPECT_EQ(look_at(200, p.root).state, RunState::kStopped);
  p.thread(200, 202, 'S');
  EXPECT_EQ(look_at(200, p.root).state, RunState::kRunning);
  p.thread(300, 300, 't');
  EXPECT_EQ(look_at(300, p.root).state, RunState::kTraced);
}

TEST(ProcessLook, AWaitChannelThatIsNotASymbolIsDropped) {
  FakeProc p;
  p.thread(400, 400, 'D', "\x1b[31mred");
  const ProcessLook look = look_at(400, p.root);
  EXPECT_EQ(look.state, RunState::kUninterruptible);
  EXPECT_EQ(look.wait_channel, "");
}

TEST(ProcessLook, RealProcessesStoppedZombieAndGone) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  EXPECT_TRUE(becomes(child, RunState::kRunning));
  kill(child, SIGSTOP);
  EXPECT_TRUE(becomes(child, RunState::kStopped)) << describe(look_at(child));
  kill(child, SIGKILL);
  EXPECT_TRUE(becomes(child, RunState::kZombie)) << describe(look_at(child));
  waitpid(child, nullptr, 0);
  EXPECT_EQ(look_at(child).state, RunState::kGone);
  EXPECT_EQ(look_at(0).state, RunState::kGone);
  EXPECT_EQ(look_at(-5).state, RunState::kGone);
}
