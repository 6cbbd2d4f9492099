// The worker layer: the socket framing, the launcher's referee rules, and real worker processes
// (tests/worker/test_worker_main.cpp: the launcher's `__worker` protocol running the test tasks).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "probes/base/error.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/base/workers/rendezvous.hpp"
#include "probes/base/workers/socket_communicator.hpp"
#include "probes/base/workers/unique_fd.hpp"
#include "probes/base/workers/wire.hpp"

using namespace std::chrono_literals;
namespace wire = commtool::workers::wire;
using commtool::Error;
using commtool::ExitCode;
using commtool::workers::Collective;
using commtool::workers::GroupOutcome;
using commtool::workers::Rendezvous;
using commtool::workers::run_workers;
using commtool::workers::SocketCommunicator;
using commtool::workers::UniqueFd;
using commtool::workers::WorkerSpec;

namespace {

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

wire::Deadline in(std::chrono::milliseconds wait) {
  return wire::Clock::now() + wait;
}

void write_raw(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

wire::WireError::Kind read_failure(int fd) {
  try {
    wire::read_message(fd, in(2000ms));
  } catch (const wire::WireError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "read_message accepted a malformed message";
  return wire::WireError::Kind::kSystem;
}

// Ranks are placed on GPUs out of order, so a message that confuses rank and GPU shows.
const std::vector<WorkerSpec> kThreeWorkers = {{0, 2}, {1, 0}, {2, 1}};

GroupOutcome run_task(const nlohmann::json& task, std::chrono::duration<double> timeout = 10s) {
  return run_workers(COMMTOOL_TEST_WORKER, kThreeWorkers, task, timeout);
}

// What every run must leave: no socket directory, no worker process, no zombie.
void expect_nothing_left_behind(const GroupOutcome& outcome) {
  EXPECT_FALSE(outcome.socket_dir.empty());
  EXPECT_FALSE(std::filesystem::exists(outcome.socket_dir)) << outcome.socket_dir;
  ASSERT_EQ(outcome.worker_pids.size(), kThreeWorkers.size());
  for (pid_t pid : outcome.worker_pids) {
    errno = 0;
    EXPECT_EQ(::kill(pid, 0), -1) << "worker " << pid << " still exists";
    EXPECT_EQ(errno, ESRCH);
  }
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD) << "a child process is left to reap";
}

// A group whose step bound (--timeout of each worker) is short and whose group timeout is long:
// what stops it early is the progress board, not the launcher's stall timeout.
constexpr std::chrono::duration<double> kShortStep = 0.3s;
constexpr std::chrono::duration<double> kLongGroupTimeout = 30s;

GroupOutcome run_with_short_step(const nlohmann::json& task) {
  return run_workers(COMMTOOL_TEST_WORKER, kThreeWorkers, task, kLongGroupTimeout, kShortStep);
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Sets (or unsets, for nullopt) one environment variable for the test's lifetime, then puts
// back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Two ranks on GPU 0, and two ranks on GPUs of their own.
const std::vector<WorkerSpec> kSharedGpu = {{0, 0}, {1, 0}};
const std::vector<WorkerSpec> kOwnGpus = {{0, 0}, {1, 1}};

// What each rank's environment held, by rank, from the test-env task.
std::vector<nlohmann::json> worker_env(const std::vector<WorkerSpec>& specs) {
  GroupOutcome outcome = run_workers(COMMTOOL_TEST_WORKER, specs, {{"name", "test-env"}}, 10s);
  EXPECT_FALSE(outcome.failure) << outcome.failure->what;
  return outcome.results;
}

}  // namespace

// --- Framing ---

TEST(Wire, MessageRoundTripsOverASocketpairEvenWithItsPayloadSplitAcrossWrites) {
  SocketPair pair;
  wire::Message sent{wire::MessageType::kAllgather, 3, 7, std::string(1000, 'x') + "end"};
  std::string bytes = wire::encode(sent);
  std::thread writer([&] {
    write_raw(pair.a.get(), bytes.substr(0, 30));  // the header and a few payload bytes
    std::this_thread::sleep_for(50ms);
    write_raw(pair.a.get(), bytes.substr(30));
  });
  wire::Message got = wire::read_message(pair.b.get(), in(5000ms));
  writer.join();
  EXPECT_EQ(got.type, sent.type);
  EXPECT_EQ(got.rank, 3);
  EXPECT_EQ(got.sequence, 7u);
  EXPECT_EQ(got.payload, sent.payload);
}

TEST(Wire, DecoderReassemblesMessagesFedOneByteAtATime) {
  std::string bytes = wire::encode({wire::MessageType::kResult, 1, 0, R"({"ok":true})"}) +
                      wire::encode({wire::MessageType::kBarrier, 1, 2, ""});
  wire::FrameDecoder decoder;
  std::vector<wire::Message> got;
  for (char c : bytes) {
    decoder.append(&c, 1);
    while (auto message = decoder.next())
      got.push_back(*message);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload, R"({"ok":true})");
  EXPECT_EQ(got[1].type, wire::MessageType::kBarrier);
  EXPECT_EQ(got[1].sequence, 2u);
  EXPECT_EQ(decoder.pending_bytes(), 0u);
}

TEST(Wire, BadMagicIsRejectedAsAProtocolError) {
  SocketPair pair;
  std::string bytes = wire::encode({wire::MessageType::kHello, 0, 0, "{}"});
  bytes[0] ^= 0x5a;
  write_raw(pair.a.get(), bytes);
  EXPECT_EQ(read_failure(pair.b.get()), wire::WireError::Kind::kProtocol);

  wire::FrameDecoder decoder;
  decoder.append(bytes.data(), bytes.size());
  EXPECT_THROW(decoder.next(), wire::WireError);
}

TEST(Wire, LengthOver64MiBIsRejectedBeforeAnyPayloadIsAwaited) {
  SocketPair pair;
  std::string header = wire::encode({wire::MessageType::kTask, 0, 0, ""});
  std::uint64_t absurd = wire::kMaxPayloadBytes + 1;
  std::memcpy(header.data() + 16, &absurd, sizeof absurd);  // the length field
  write_raw(pair.a.get(), header);
  auto started = wire::Clock::now();
  EXPECT_EQ(read_failure(pair.b.get()), wire::WireError::Kind::kProtocol);
  EXPECT_LT(wire::Clock::now() - started, 1s);
}

// The launcher's reading of a worker's ERROR payload (found by tests/fuzz/fuzz_wire.cpp): a
// code that is not a whole number from 1 to 5 is a protocol error, never truncated into one
// (2.5 read as 2, 2^32 + 2 as 2) nor converted with undefined behaviour (1e300).
TEST(Wire, ErrorReportWhoseCodeIsNotAWholeExitCodeIsAProtocolError) {
  for (const char* payload :
       {R"({"code": 2.5, "message": "m"})", R"({"code": 4294967298, "message": "m"})",
        R"({"code": 1e300, "message": "m"})", R"({"code": -1, "message": "m"})",
        R"({"code": "2", "message": "m"})", R"({"code": 2})", R"([2, "m"])", "{"}) {
    EXPECT_THROW(wire::decode_error(payload), wire::WireError) << payload;
  }
  const wire::ErrorReport report = wire::decode_error(
      R"({"code": 2, "message": "tokens 0: no", "field": "tokens", "value": "0", "why": "no"})");
  EXPECT_EQ(report.code, 2);
  EXPECT_EQ(report.message, "tokens 0: no");
  EXPECT_EQ(report.field + report.value + report.why, "tokens0no");
}

// A RESULT nested far deeper than any result is refused as it is parsed: the launcher hands
// results out by copy, and copying a document a million levels deep overflows the stack.
TEST(Wire, ResultNestedDeeperThanAnyDocumentIsAProtocolError) {
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_THROW(wire::decode_result(deep), wire::WireError);
  EXPECT_THROW(wire::decode_result("{\"rank\": "), wire::WireError);
  EXPECT_EQ(wire::decode_result(R"({"rank": [[1]]})").at("rank").at(0).at(0), 1);
}

// HELLO's pid is -1 for anything but {"pid": N}.
TEST(Wire, HelloWithoutAPidClaimsNone) {
  EXPECT_EQ(wire::decode_hello_pid(R"({"pid": 42})"), 42);
  for (const char* payload : {"", "[1]", R"({"pid": "42"})", R"({"pid": 1e300})", "{"})
    EXPECT_EQ(wire::decode_hello_pid(payload), -1) << payload;
}

TEST(Wire, ReadFromASilentPeerTimesOutAtTheDeadline) {
  SocketPair pair;
  auto started = wire::Clock::now();
  try {
    wire::read_message(pair.b.get(), in(200ms));
    FAIL() << "read returned without a message";
  } catch (const wire::WireError& e) {
    EXPECT_EQ(e.kind(), wire::WireError::Kind::kTimedOut);
  }
  EXPECT_GE(wire::Clock::now() - started, 200ms);
}

// --- The launcher's referee rules ---

TEST(WorkerRendezvous, BarrierSequenceNumbersKeepConsecutiveBarriersApart) {
  Rendezvous group(2);
  EXPECT_FALSE(group.arrive(0, {Collective::Kind::kBarrier, 1}));
  auto first = group.arrive(1, {Collective::Kind::kBarrier, 1});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->collective.sequence, 1u);
  // Rank 0 racing ahead into barrier #2 is not released by rank 1's earlier arrival.
  EXPECT_FALSE(group.arrive(0, {Collective::Kind::kBarrier, 2}));
  EXPECT_EQ(group.stall().ranks, std::vector<int>{1});
  EXPECT_EQ(group.stall().missed, "reach barrier #2");
  // A repeated or skipped number is a rank out of step, not an arrival.
  EXPECT_THROW(group.arrive(1, {Collective::Kind::kBarrier, 3}), Error);
  auto second = group.arrive(1, {Collective::Kind::kBarrier, 2});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->collective.sequence, 2u);
}

TEST(WorkerRendezvous, AllgatherReleasesEveryBlobInRankOrder) {
  Rendezvous group(3);
  EXPECT_FALSE(group.arrive(2, {Collective::Kind::kAllgather, 1}, "c"));
  EXPECT_FALSE(group.arrive(0, {Collective::Kind::kAllgather, 1}, "a"));
  auto release = group.arrive(1, {Collective::Kind::kAllgather, 1}, "b");
  ASSERT_TRUE(release);
  EXPECT_EQ(release->blobs, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(WorkerRendezvous, RanksInDifferentCollectivesAreADisagreementNotAWait) {
  Rendezvous group(2);
  group.arrive(0, {Collective::Kind::kBarrier, 1});
  try {
    group.arrive(1, {Collective::Kind::kAllgather, 1});
    FAIL() << "a rank in another collective was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("rank 1 entered allgather #1 while rank 0 waits in "
                                         "barrier #1"),
              std::string::npos)
        << e.what();
  }
}

// --- The worker's side of a collective ---

TEST(WorkerCommunicator, BarrierTimesOutNamingRankBarrierAndSeconds) {
  SocketPair pair;  // a launcher that never answers
  SocketCommunicator comm(pair.a.get(), 1, 2, 0.2s);
  try {
    comm.barrier();
    FAIL() << "barrier returned without an answer";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimeout);
    EXPECT_STREQ(e.what(), "rank 1: barrier #1 timed out after 0.2 s");
  }
}

TEST(WorkerCommunicator, AnswerToAnEarlierBarrierDoesNotReleaseTheNextOne) {
  SocketPair pair;
  std::thread launcher([&] {
    for (int i = 0; i < 2; ++i) {
      wire::read_message(pair.b.get(), in(5000ms));
      // Always answers barrier #1: right the first time, stale the second.
      wire::write_message(pair.b.get(), {wire::MessageType::kBarrierDone, 0, 1, ""}, in(5000ms));
    }
  });
  SocketCommunicator comm(pair.a.get(), 0, 2, 5s);
  comm.barrier();
  EXPECT_THROW(comm.barrier(), Error);
  launcher.join();
}

TEST(WorkerCommunicator, LauncherGoingAwayIsReportedNotWaitedOn) {
  SocketPair pair;
  SocketCommunicator comm(pair.a.get(), 0, 2, 30s);
  pair.b.reset();
  auto started = wire::Clock::now();
  try {
    comm.allgather("blob");
    FAIL() << "allgather returned without a launcher";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kTimeout);
    EXPECT_STREQ(e.what(), "rank 0: the launcher went away during allgather #1");
  }
  EXPECT_LT(wire::Clock::now() - started, 5s);
}

// --- Real worker processes ---

TEST(Workers, ThreeWorkersExchangeBlobsAndEveryRankSeesAllInRankOrder) {
  GroupOutcome outcome = run_task({{"name", "test-exchange"}});
  ASSERT_FALSE(outcome.failure) << outcome.failure->what;
  ASSERT_EQ(outcome.results.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outcome.results[r]["rank"], r);
    EXPECT_EQ(outcome.results[r]["gathered"],
              nlohmann::json::array({"rank-0", "rank-1", "rank-2"}));
  }
  expect_nothing_left_behind(outcome);
}

TEST(Workers, KilledWorkerIsReportedWithRankGpuAndSignalAndTheOthersAreStopped) {
  auto started = wire::Clock::now();
  GroupOutcome outcome = run_task({{"name", "test-die"}, {"victim", 2}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->rank, 2);
  EXPECT_EQ(outcome.failure->device, 1);
  EXPECT_EQ(outcome.failure->code, ExitCode::kTimeout);
  EXPECT_EQ(outcome.failure->what, "worker for rank 2 (GPU 1) died: killed by signal 9 (SIGKILL)");
  EXPECT_LT(wire::Clock::now() - started, 5s);  // noticed at once, not at the timeout
  expect_nothing_left_behind(outcome);
}

TEST(Workers, HangingWorkerIsReportedWithTheBarrierItDidNotReachWithinTheTimeout) {
  auto started = wire::Clock::now();
  GroupOutcome outcome = run_task({{"name", "test-hang"}, {"victim", 1}}, 1s);
  auto took = wire::Clock::now() - started;
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->rank, 1);
  EXPECT_EQ(outcome.failure->device, 0);
  EXPECT_EQ(outcome.failure->code, ExitCode::kTimeout);
  EXPECT_EQ(outcome.failure->what, "rank 1 (GPU 0) did not reach barrier #1 within 1.0 s");
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 3s);
  expect_nothing_left_behind(outcome);
}

TEST(Workers, WorkerErrorComesBackWithItsExitCodeAndMessage) {
  GroupOutcome outcome = run_task({{"name", "test-error"}, {"victim", 0}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->rank, 0);
  EXPECT_EQ(outcome.failure->device, 2);
  EXPECT_EQ(outcome.failure->code, ExitCode::kVerification);
  EXPECT_EQ(outcome.failure->what, "rank 0: wrong data");
  expect_nothing_left_behind(outcome);
}

TEST(Workers, UnknownTaskIsAUsageErrorFromTheWorkers) {
  GroupOutcome outcome = run_task({{"name", "no-such-task"}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->code, ExitCode::kUsage);
  EXPECT_NE(outcome.failure->what.find("unknown worker task 'no-such-task'"), std::string::npos);
  expect_nothing_left_behind(outcome);
}

TEST(Workers, WorkerThatCannotStartIsReportedWithItsExitStatus) {
  GroupOutcome outcome = run_workers("/nonexistent/commtool", {{0, 0}}, {{"name", "x"}}, 10s);
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->code, ExitCode::kTimeout);
  EXPECT_EQ(outcome.failure->what,
            "worker for rank 0 (GPU 0) exited with status 127 before "
            "reporting");
  EXPECT_FALSE(std::filesystem::exists(outcome.socket_dir));
}

TEST(WorkersDeathTest, InterruptStopsEveryWorkerAndExitsWith130) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::thread ctrl_c([] {
          std::this_thread::sleep_for(300ms);
          ::kill(::getpid(), SIGINT);
        });
        ctrl_c.detach();
        run_task({{"name", "test-hang"}, {"victim", 0}});
      },
      ::testing::ExitedWithCode(130), "commtool: interrupted; stopped 3 workers");
}

// --- The progress board: a rank stuck in one step, ranks that disagree ---

TEST(WorkersBoard, RankBusyInOneStepPastTheStepBoundFailsTheGroupWithExitCode5) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-busy-hang"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->code, ExitCode::kTimeout) << outcome.failure->what;
}

TEST(WorkersBoard, RankStoppedForBeingBusyTooLongLeavesNoProcessOrSocketBehind) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-busy-hang"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  expect_nothing_left_behind(outcome);
}

TEST(WorkersBoard, RankBusyInOneStepPastTheStepBoundIsNamedAsStuckInsideOneStep) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-busy-hang"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->rank, 1);
  EXPECT_EQ(outcome.failure->what.rfind("rank 1 (GPU 0) stayed inside one step for more than "
                                        "1.3 s although a step may take 0.3 s (the timeout)",
                                        0),
            0u)
      << outcome.failure->what;
}

TEST(WorkersBoard, RankBusyInOneStepFailureSaysWhereEachRankStood) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-busy-hang"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_TRUE(
      contains(outcome.failure->what, "\nwhere each rank stood (commtool's progress board):"))
      << outcome.failure->what;
}

TEST(WorkersBoard, RankBusyInOneStepIsStoppedLongBeforeTheGroupTimeout) {
  // A liveness bound of the mechanism (the step bound plus 1 s of grace, read every 100 ms),
  // far below the 30 s group timeout: not a performance figure.
  auto started = wire::Clock::now();
  GroupOutcome outcome = run_with_short_step({{"name", "test-busy-hang"}, {"victim", 1}});
  auto took = wire::Clock::now() - started;
  ASSERT_TRUE(outcome.failure);
  EXPECT_LT(took, 5s);
}

TEST(WorkersBoard, AStoppedWorkerIsNamedRatherThanTheFirstRankPastItsBound) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-frozen"}, {"victim", 2}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->code, ExitCode::kTimeout);
  EXPECT_EQ(outcome.failure->rank, 2) << outcome.failure->what;
  EXPECT_EQ(outcome.failure->what.rfind("rank 2 (GPU ", 0), 0u) << outcome.failure->what;
  EXPECT_TRUE(contains(outcome.failure->what.substr(0, outcome.failure->what.find('\n')),
                       "'s process is stopped by a signal (SIGSTOP, SIGTSTP): it cannot take "
                       "part in the operation the other ranks wait in with it"))
      << outcome.failure->what;
  EXPECT_TRUE(contains(outcome.failure->what, "; its process is stopped by a signal"))
      << outcome.failure->what;
  expect_nothing_left_behind(outcome);
}

TEST(WorkersBoard, RanksThatEnqueuedDifferentOperationsFailTheGroupWithExitCode5) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-diverge"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->code, ExitCode::kTimeout) << outcome.failure->what;
}

TEST(WorkersBoard, RanksThatEnqueuedDifferentOperationsAreNamedWithTheSeqAndTheOddRanksCount) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-diverge"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_TRUE(contains(outcome.failure->what,
                       "the ranks enqueued different operations at #0 (a collective mismatch: "
                       "NCCL waits forever or mixes data): rank 1 enqueued allreduce float sum "
                       "of 4 elements where rank(s) 0, 2 enqueued allreduce float sum of 8 "
                       "elements"))
      << outcome.failure->what;
}

TEST(WorkersBoard, MismatchIsBlamedOnTheRankThatDisagreesWithTheMajority) {
  GroupOutcome outcome = run_with_short_step({{"name", "test-diverge"}, {"victim", 1}});
  ASSERT_TRUE(outcome.failure);
  EXPECT_EQ(outcome.failure->rank, 1) << outcome.failure->what;
}

TEST(WorkersBoard, MismatchIsFoundBeforeTheGroupTimeout) {
  auto started = wire::Clock::now();
  GroupOutcome outcome = run_with_short_step({{"name", "test-diverge"}, {"victim", 1}});
  auto took = wire::Clock::now() - started;
  ASSERT_TRUE(outcome.failure);
  EXPECT_LT(took, 5s);
}

TEST(WorkersBoard, GroupThatNeverUsedTheBoardGetsNoAccountOfWhereRanksStood) {
  GroupOutcome outcome = run_task({{"name", "test-hang"}, {"victim", 1}}, 1s);
  ASSERT_TRUE(outcome.failure);
  EXPECT_FALSE(contains(outcome.failure->what, "where each rank stood")) << outcome.failure->what;
}

// --- The environment of ranks that share a GPU ---

TEST(WorkersEnv, RanksSharingAGpuEachGetADistinctNcclHostid) {
  ScopedEnv hostid("NCCL_HOSTID", std::nullopt);
  std::vector<nlohmann::json> env = worker_env(kSharedGpu);
  ASSERT_EQ(env.size(), 2u);
  ASSERT_TRUE(env[0]["NCCL_HOSTID"].is_string()) << env[0];
  ASSERT_TRUE(env[1]["NCCL_HOSTID"].is_string()) << env[1];
  EXPECT_FALSE(env[0]["NCCL_HOSTID"].get<std::string>().empty());
  EXPECT_NE(env[0]["NCCL_HOSTID"], env[1]["NCCL_HOSTID"]);
}

TEST(WorkersEnv, RanksSharingAGpuUseTheLoopbackInterfaceWhenTheUserNamedNone) {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", std::nullopt);
  std::vector<nlohmann::json> env = worker_env(kSharedGpu);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0]["NCCL_SOCKET_IFNAME"], "lo");
  EXPECT_EQ(env[1]["NCCL_SOCKET_IFNAME"], "lo");
}

TEST(WorkersEnv, RanksSharingAGpuKeepTheSocketInterfaceTheUserSet) {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "eth7");
  std::vector<nlohmann::json> env = worker_env(kSharedGpu);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0]["NCCL_SOCKET_IFNAME"], "eth7");
  EXPECT_EQ(env[1]["NCCL_SOCKET_IFNAME"], "eth7");
}

TEST(WorkersEnv, RanksSharingAGpuHaveInfinibandDisabledWhenTheUserSaidNothing) {
  ScopedEnv ib("NCCL_IB_DISABLE", std::nullopt);
  std::vector<nlohmann::json> env = worker_env(kSharedGpu);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0]["NCCL_IB_DISABLE"], "1");
  EXPECT_EQ(env[1]["NCCL_IB_DISABLE"], "1");
}

TEST(WorkersEnv, OneRankPerGpuGetsNoNcclHostidFromCommtool) {
  ScopedEnv hostid("NCCL_HOSTID", std::nullopt);
  std::vector<nlohmann::json> env = worker_env(kOwnGpus);
  ASSERT_EQ(env.size(), 2u);
  EXPECT_TRUE(env[0]["NCCL_HOSTID"].is_null()) << env[0];
  EXPECT_TRUE(env[1]["NCCL_HOSTID"].is_null()) << env[1];
}
