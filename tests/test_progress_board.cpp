// The progress board through a real file: what a worker writes to its slot is what the launcher
// reads back, and a worker without a board runs on unharmed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "probes/base/workers/progress_board.hpp"

using namespace commtool::workers;

namespace {

class ProgressBoardFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/commtool-progress-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/board";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::string path_;
};

}  // namespace

TEST_F(ProgressBoardFile, UntouchedSlotIsStartingWithNothingEnqueued) {
  ProgressBoard board(path_, 3);
  const RankProgress p = board.read(2);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.phase, Phase::kStarting);
  EXPECT_EQ(p.enqueued, -1);
  EXPECT_TRUE(p.recent.empty());
}

TEST_F(ProgressBoardFile, PhaseWrittenByAWorkerIsRead) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 1, 3);
  worker.phase(Phase::kJoining);
  EXPECT_EQ(board.read(1).phase, Phase::kJoining);
}

TEST_F(ProgressBoardFile, EnqueuedStartedAndCompletedAreRead) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 1, 3);
  worker.enqueued(0, "allreduce", 8);
  worker.enqueued(1, "allreduce", 8);
  worker.enqueued(2, "allreduce", 8);
  worker.started(1);
  worker.completed(0);
  const RankProgress p = board.read(1);
  EXPECT_EQ(p.enqueued, 2);
  EXPECT_EQ(p.started, 1);
  EXPECT_EQ(p.completed, 0);
}

TEST_F(ProgressBoardFile, WorkerWritesOnlyItsOwnSlot) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 1, 3);
  worker.phase(Phase::kRunning);
  worker.enqueued(0, "allreduce", 8);
  EXPECT_EQ(board.read(0).phase, Phase::kStarting);
  EXPECT_EQ(board.read(2).enqueued, -1);
}

TEST_F(ProgressBoardFile, BusySetsWhenTheStepBegan) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 0, 3);
  const int64_t before = monotonic_now_ns();
  worker.busy();
  EXPECT_GE(board.read(0).busy_since_ns, before);
}

TEST_F(ProgressBoardFile, IdleClearsTheBusyTime) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 0, 3);
  worker.busy();
  worker.idle();
  EXPECT_EQ(board.read(0).busy_since_ns, 0);
}

TEST_F(ProgressBoardFile, RecentOperationsCarryNameAndCountOldestFirst) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 2, 3);
  worker.enqueued(0, "allreduce float sum", 1024);
  worker.enqueued(1, "alltoall", 0);
  const RankProgress p = board.read(2);
  ASSERT_EQ(p.recent.size(), 2u);
  EXPECT_EQ(p.recent[0].seq, 0);
  EXPECT_EQ(p.recent[0].name, "allreduce float sum");
  EXPECT_EQ(p.recent[0].count, 1024u);
  EXPECT_EQ(p.recent[1].seq, 1);
  EXPECT_EQ(p.recent[1].name, "alltoall");
  EXPECT_EQ(p.recent[1].count, 0u);
}

TEST_F(ProgressBoardFile, OnlyTheLastRecentOperationsAreKeptInOrder) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 0, 3);
  const int total = kRecentOperations + 5;
  for (int seq = 0; seq < total; ++seq)
    worker.enqueued(seq, "op" + std::to_string(seq), static_cast<uint64_t>(seq));
  const RankProgress p = board.read(0);
  ASSERT_EQ(p.recent.size(), static_cast<size_t>(kRecentOperations));
  for (int i = 0; i < kRecentOperations; ++i) {
    const int seq = total - kRecentOperations + i;
    EXPECT_EQ(p.recent[static_cast<size_t>(i)].seq, seq);
    EXPECT_EQ(p.recent[static_cast<size_t>(i)].name, "op" + std::to_string(seq));
  }
}

TEST_F(ProgressBoardFile, NameLongerThan31CharactersIsCutTo31) {
  ProgressBoard board(path_, 3);
  Progress worker(path_, 0, 3);
  const std::string name = "allreduce bfloat16 sum in place, out of order";
  worker.enqueued(0, name, 1);
  const RankProgress p = board.read(0);
  ASSERT_EQ(p.recent.size(), 1u);
  EXPECT_EQ(p.recent[0].name, name.substr(0, 31));
}

TEST_F(ProgressBoardFile, ReadAllGivesEverySlotByRank) {
  ProgressBoard board(path_, 3);
  const std::vector<RankProgress> all = board.read_all();
  ASSERT_EQ(all.size(), 3u);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(all[static_cast<size_t>(r)].rank, r);
}

TEST_F(ProgressBoardFile, FileIsRemovedWhenTheBoardIsDestroyed) {
  {
    ProgressBoard board(path_, 3);
    ASSERT_TRUE(std::filesystem::exists(path_));
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ProgressBoardFile, WorkerOnAMissingFileIsANoOpThatCreatesNothing) {
  Progress worker(path_, 0, 3);
  worker.phase(Phase::kRunning);
  worker.busy();
  worker.enqueued(0, "allreduce", 8);
  worker.started(0);
  worker.completed(0);
  worker.idle();
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST(Progress, WorkerWithoutABoardIsANoOp) {
  EXPECT_NO_THROW({
    Progress worker("", 0, 3);
    worker.phase(Phase::kRunning);
    worker.busy();
    worker.enqueued(0, "allreduce", 8);
    worker.started(0);
    worker.completed(0);
    worker.idle();
  });
}
