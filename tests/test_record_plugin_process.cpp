// The profiler plugin's record mode in a real process: its bounds and drop lines, alive lines,
// threads, fork, death and exit, its environment, and what the library exports.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "record_plugin_test_support.hpp"

namespace fs = std::filesystem;
using namespace commtool::nccl_profiler;
using record_plugin_test::kRecordMask;
using record_plugin_test::RecordPluginTest;
using record_plugin_test::sleep_ms;

TEST_F(RecordPluginTest, OverTheOperationBoundTheOldestEndsIncomplete) {
  setenv("COMMTOOL_RECORD_MAX_OPERATIONS", "2", 1);
  void* ctx = init(7);
  void* first = coll_start(ctx, nullptr, 0, 1);
  void* first_channel = channel_start(ctx, first, 0, 5);
  coll_start(ctx, nullptr, 1, 1);
  coll_start(ctx, nullptr, 2, 1);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].op.index, 0u);
  EXPECT_FALSE(ends[0].complete);
  EXPECT_EQ(ends[0].gpu, (Interval{5, 5}));
  // NCCL still holds the evicted operation's handles: they must be harmless.
  channel_stop(first_channel, 9);
  table_->stopEvent(first);
  finalize(ctx);
  EXPECT_EQ(lines_of_kind<EndLine>().size(), 3u);
}

TEST_F(RecordPluginTest, LinesBeyondTheBufferAreCountedInADropLine) {
  setenv("COMMTOOL_RECORD_BUFFER_BYTES", "3000", 1);
  void* ctx = init(7);
  constexpr int kOperations = 200;  // about 200 bytes each: far more than one flush holds
  for (int i = 0; i < kOperations; ++i)
    coll_start(ctx, nullptr, static_cast<uint64_t>(i), 1);
  wait_for_flush();
  const size_t kept = lines_of_kind<StartLine>().size();
  auto drops = lines_of_kind<DropLine>();
  ASSERT_FALSE(drops.empty());
  uint64_t dropped = 0;
  for (const DropLine& d : drops) {
    dropped += d.lines;
    EXPECT_LE(d.since_ns, d.t_ns);
  }
  EXPECT_EQ(kept + dropped, static_cast<size_t>(kOperations));
  EXPECT_LT(kept, static_cast<size_t>(kOperations));
  finalize(ctx);
}

TEST_F(RecordPluginTest, AnAliveLineComesOnceASecond) {
  void* ctx = init(7);
  std::vector<AliveLine> alive;
  for (int waited_ms = 0; alive.empty() && waited_ms < 5000; waited_ms += 100) {
    sleep_ms(100);
    alive = lines_of_kind<AliveLine>();
  }
  ASSERT_FALSE(alive.empty());
  const ProcLine proc = lines_of_kind<ProcLine>().at(0);
  EXPECT_GE(alive[0].t_ns - proc.monotonic_ns, 1'000'000'000);  // not before a second is up
  finalize(ctx);
}

TEST_F(RecordPluginTest, ThreadsOfTheApplicationAndTheProxyMayCallAtOnce) {
  // One application thread per communicator (NCCL allows no more), each operation's channels
  // reported by a proxy thread while the application thread stops the launch.
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::vector<void*> contexts;
  for (int t = 0; t < kThreads; ++t)
    contexts.push_back(init(static_cast<uint64_t>(t)));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* ctx = contexts[static_cast<size_t>(t)];
      for (int i = 0; i < kPerThread; ++i) {
        void* api = api_start(ctx);
        table_->stopEvent(api);
        void* op = coll_start(ctx, api, static_cast<uint64_t>(i), 2);
        std::thread proxy([&, op] {
          channel_stop(channel_start(ctx, op, 0, 1), 2);
          channel_stop(channel_start(ctx, op, 1, 1), 3);
        });
        table_->stopEvent(op);
        proxy.join();
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (void* ctx : contexts)
    finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<std::pair<uint64_t, uint64_t>> operations;
  for (const EndLine& e : ends) {
    operations.emplace(e.op.comm, e.op.index);
    EXPECT_LT(e.op.index, static_cast<uint64_t>(kPerThread));
    EXPECT_TRUE(e.complete);
    EXPECT_EQ(e.gpu, (Interval{1, 3}));
    EXPECT_TRUE(e.api.has_value());
  }
  EXPECT_EQ(operations.size(), ends.size());
}

TEST_F(RecordPluginTest, AForkedChildThatUsesNcclWritesItsOwnFile) {
  void* ctx = init(7);
  run_collective(ctx, 0, 1, 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Like a dataloader worker that builds its own communicator.
    void* child_ctx = nullptr;
    int mask = 0;
    table_->init(&child_ctx, 99, &mask, "child", 1, 2, 1, nullptr);
    void* op = coll_start(child_ctx, nullptr, 0, 1);
    table_->stopEvent(op);
    finalize(child_ctx);
    _exit(mask == kRecordMask ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  finalize(ctx);

  auto child_lines = lines(child);
  ASSERT_GE(child_lines.size(), 4u) << file_of(child);
  EXPECT_EQ(std::get<ProcLine>(child_lines[0]).pid, child);
  EXPECT_EQ(std::get<CommLine>(child_lines[1]).comm, 99u);
  for (const RecordLine& l : child_lines) {
    if (auto* e = std::get_if<EndLine>(&l)) {
      EXPECT_EQ(e->op.comm, 99u);
    }
  }
  for (const EndLine& e : lines_of_kind<EndLine>()) {
    EXPECT_EQ(e.op.comm, 7u);
  }
  EXPECT_EQ(lines_of_kind<ProcLine>().size(), 1u);
}

TEST_F(RecordPluginTest, AKilledProcessKeepsWhatItStartedUpTo100msBeforeDeath) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* ctx = init(7);
    coll_start(ctx, nullptr, 0, 1);
    sleep_ms(250);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto child_lines = lines(child);
  ASSERT_EQ(child_lines.size(), 3u) << file_of(child);
  EXPECT_TRUE(std::holds_alternative<StartLine>(child_lines[2]));
}

TEST_F(RecordPluginTest, AProcessThatExitsAtOnceStillWritesWhatItQueued) {
  std::fflush(nullptr);  // the child's exit flushes stdio: nothing of ours may be in it twice
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* ctx = init(7);
    coll_start(ctx, nullptr, 0, 1);
    std::exit(0);  // well within the first flush period
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  auto child_lines = lines(child);
  ASSERT_EQ(child_lines.size(), 3u) << file_of(child);
  EXPECT_TRUE(std::holds_alternative<StartLine>(child_lines[2]));
}

TEST_F(RecordPluginTest, RecordModeWinsOverTraceMode) {
  const fs::path trace = dir_ / "trace.jsonl";
  setenv(kOutputEnv, trace.c_str(), 1);
  int mask = 0;
  void* ctx = init(7, 2, 0, &mask);
  run_collective(ctx, 0, 1, 0);
  finalize(ctx);
  unsetenv(kOutputEnv);
  EXPECT_EQ(mask, kRecordMask);
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_EQ(lines_of_kind<EndLine>().size(), 1u);
}

TEST_F(RecordPluginTest, AnUnwritableDirectoryRecordsNothingAndSaysSoOnce) {
  setenv(kRecordDirEnv, "/proc/commtool-no-such-dir", 1);
  testing::internal::CaptureStderr();
  int mask = -1;
  void* ctx = init(7, 2, 0, &mask);
  void* op = coll_start(ctx, nullptr, 0, 1);
  table_->stopEvent(op);
  int second_mask = -1;
  void* second = init(8, 2, 0, &second_mask);  // another communicator: no second message
  finalize(second);
  finalize(ctx);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(mask, 0);
  EXPECT_EQ(second_mask, 0);
  EXPECT_EQ(op, nullptr);
  EXPECT_EQ(err.rfind("commtool record: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// The profiler table, the CUDA driver's injection entry (record --cupti) and the stand-ins for
// CUPTI's subscribe calls; nothing of libstdc++ or of commtool's own code.
TEST(RecordPluginLibrary, ExportsOnlyItsEntryPoints) {
  const std::string command =
      std::string("nm -D --defined-only ") + COMMTOOL_PROFILER_PLUGIN + " 2>&1";
  FILE* nm = popen(command.c_str(), "r");
  ASSERT_NE(nm, nullptr);
  std::vector<std::string> symbols;
  char row[1024];
  while (fgets(row, sizeof(row), nm) != nullptr) {
    std::string text(row);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    symbols.push_back(text.substr(text.rfind(' ') + 1));
  }
  ASSERT_EQ(pclose(nm), 0);
  std::sort(symbols.begin(), symbols.end());
  EXPECT_EQ(symbols, (std::vector<std::string>{"InitializeInjection", "cuptiSubscribe",
                                               "cuptiSubscribe_v2", "ncclProfiler_v5"}));
}

// record --cupti's injection entry on a machine where its CUPTI layer cannot run: it says why
// in a `cupti` line and returns success, so CUDA (and the job) go on without it.
TEST_F(RecordPluginTest, TheInjectionEntryThatCannotStartCuptiSaysWhyAndLetsTheJobRun) {
  using Entry = int (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle_, "InitializeInjection"));
  ASSERT_NE(entry, nullptr);
  setenv("COMMTOOL_CUPTI_LIBRARY", "/nonexistent/commtool-test/libcupti.so.13", 1);
  EXPECT_EQ(entry(), 1);
  unsetenv("COMMTOOL_CUPTI_LIBRARY");
  wait_for_flush();
  const std::vector<CuptiLine> states = lines_of_kind<CuptiLine>();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].state, CuptiState::kOff);
  // Where no CUPTI was loaded before, the one named is tried and named; where a test before
  // this one loaded the toolkit's, CUPTI itself refuses on a machine without a GPU.
  EXPECT_FALSE(states[0].why.empty());
  if (states[0].why.starts_with("cannot load")) {
    EXPECT_NE(states[0].why.find("/nonexistent/commtool-test/libcupti.so.13"), std::string::npos);
  }
}
