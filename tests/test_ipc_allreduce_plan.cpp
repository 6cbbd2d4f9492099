// The IPC all-reduce's host arithmetic: the two-shot split must cover the buffer exactly once,
// start every segment on a line, and stay balanced, for every rank count and awkward size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "probes/base/error.hpp"
#include "tracing/allreduce/ipc_allreduce_plan.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

const size_t kCounts[] = {0,
                          1,
                          3,
                          31,
                          32,
                          33,
                          63,
                          64,
                          65,
                          100,
                          255,
                          1023,
                          1024,
                          1025,
                          4097,
                          65535,
                          65537,
                          1 << 20,
                          (1 << 20) + 3,
                          (1 << 20) - 1};

size_t round_up(size_t x, size_t to) {
  return (x + to - 1) / to * to;
}

// Every rank count, count and element size: the invariants the kernels rely on.
TEST(TwoShotSegments, CoverTheBufferOnceInOrderAlignedAndBalanced) {
  for (size_t element_bytes : {2, 4}) {
    const size_t unit = kIpcAlignBytes / element_bytes;
    for (int ranks = 1; ranks <= 8; ++ranks) {
      for (size_t count : kCounts) {
        SCOPED_TRACE(::testing::Message() << count << " elements of " << element_bytes
                                          << " bytes at " << ranks << " ranks");
        const std::vector<Segment> plan = two_shot_segments(count, element_bytes, ranks);
        ASSERT_EQ(plan.size(), static_cast<size_t>(ranks));
        size_t next = 0;
        const size_t limit = round_up((count + ranks - 1) / ranks, unit) + unit;
        for (const Segment& s : plan) {
          EXPECT_EQ(s.first_element, next);  // contiguous, in rank order
          if (s.elements > 0) {
            EXPECT_EQ(s.first_element * element_bytes % kIpcAlignBytes, 0u);
          }
          EXPECT_LE(s.elements, limit);
          next += s.elements;
        }
        EXPECT_EQ(next, count);  // exactly once
      }
    }
  }
}

TEST(TwoShotSegments, SizesDifferByAtMostOneUnitWhenEveryRankHasWork) {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    for (size_t count : kCounts) {
      const std::vector<Segment> plan = two_shot_segments(count, 4, ranks);
      if (count < static_cast<size_t>(ranks) * 32) continue;
      const auto [lo, hi] = std::minmax_element(
          plan.begin(), plan.end(),
          [](const Segment& a, const Segment& b) { return a.elements < b.elements; });
      EXPECT_LE(hi->elements - lo->elements, 32u) << count << " at " << ranks;
    }
  }
}

TEST(TwoShotSegments, ZeroElementsGivesOneEmptySegmentPerRank) {
  const std::vector<Segment> plan = two_shot_segments(0, 4, 8);
  ASSERT_EQ(plan.size(), 8u);
  for (const Segment& s : plan) {
    EXPECT_EQ(s.first_element, 0u);
    EXPECT_EQ(s.elements, 0u);
  }
}

TEST(TwoShotSegments, OneElementAtEightRanksGoesToRankZero) {
  const std::vector<Segment> plan = two_shot_segments(1, 4, 8);
  EXPECT_EQ(plan[0].elements, 1u);
  for (size_t r = 1; r < 8; ++r) {
    EXPECT_EQ(plan[r].elements, 0u);
    EXPECT_EQ(plan[r].first_element, 1u);
  }
}

TEST(TwoShotSegments, SmallBufferFillsRanksFromZeroAndTheTailFollowsTheLastWholeUnit) {
  // 100 floats: three whole units of 32 and a tail of 4.
  const std::vector<Segment> plan = two_shot_segments(100, 4, 8);
  EXPECT_EQ(plan[0].elements, 32u);
  EXPECT_EQ(plan[1].elements, 32u);
  EXPECT_EQ(plan[2].elements, 32u);
  EXPECT_EQ(plan[3].first_element, 96u);
  EXPECT_EQ(plan[3].elements, 4u);
  for (size_t r = 4; r < 8; ++r)
    EXPECT_EQ(plan[r].elements, 0u);
}

TEST(TwoShotSegments, LastSegmentTakesTheTailWhenEveryRankHasAWholeUnit) {
  // 1025 floats at 8 ranks: 32 whole units, 4 per rank, and one element left over.
  const std::vector<Segment> plan = two_shot_segments(1025, 4, 8);
  for (size_t r = 0; r < 7; ++r)
    EXPECT_EQ(plan[r].elements, 128u);
  EXPECT_EQ(plan[7].first_element, 896u);
  EXPECT_EQ(plan[7].elements, 129u);
}

TEST(TwoShotSegments, ExtraWholeUnitsGoToTheFirstRanks) {
  // 10 whole units of 64 halves at 4 ranks: 3, 3, 2, 2.
  const std::vector<Segment> plan = two_shot_segments(640, 2, 4);
  EXPECT_EQ(plan[0].elements, 192u);
  EXPECT_EQ(plan[1].elements, 192u);
  EXPECT_EQ(plan[2].elements, 128u);
  EXPECT_EQ(plan[3].elements, 128u);
}

TEST(TwoShotSegments, ElementSizeThatDoesNotDivideTheAlignmentStillStartsOnALine) {
  // 12-byte elements: a line boundary every lcm(128, 12) / 12 = 32 elements.
  const std::vector<Segment> plan = two_shot_segments(1000, 12, 3);
  for (const Segment& s : plan) {
    if (s.elements > 0) {
      EXPECT_EQ(s.first_element * 12 % 128, 0u);
    }
  }
  EXPECT_EQ(plan.back().first_element + plan.back().elements, 1000u);
}

TEST(TwoShotSegments, AcceptsUpToSixtyFourRanks) {
  const std::vector<Segment> plan = two_shot_segments(1 << 20, 2, 64);
  EXPECT_EQ(plan.size(), 64u);
  EXPECT_EQ(plan[63].first_element + plan[63].elements, size_t{1} << 20);
}

TEST(TwoShotSegments, RejectsRankCountsOutsideOneToSixtyFour) {
  EXPECT_THROW(two_shot_segments(16, 4, 0), Error);
  EXPECT_THROW(two_shot_segments(16, 4, 65), Error);
}

TEST(TwoShotSegments, RejectsZeroElementSizeZeroAlignmentAndOverflow) {
  EXPECT_THROW(two_shot_segments(16, 0, 2), Error);
  EXPECT_THROW(two_shot_segments(16, 4, 2, 0), Error);
  EXPECT_THROW(two_shot_segments(SIZE_MAX / 2, 4, 2), Error);
}

TEST(PaddedBytes, RoundsTheByteSizeUpToTheAlignment) {
  EXPECT_EQ(padded_bytes(0, 4), 0u);
  EXPECT_EQ(padded_bytes(1, 4), 128u);
  EXPECT_EQ(padded_bytes(32, 4), 128u);
  EXPECT_EQ(padded_bytes(33, 4), 256u);
  EXPECT_EQ(padded_bytes(1025, 2), 2176u);
  EXPECT_EQ(padded_bytes(100, 1, 64), 128u);
  EXPECT_THROW(padded_bytes(SIZE_MAX, 2), Error);
  EXPECT_THROW(padded_bytes(1, 4, 0), Error);
}

TEST(FlagLayout, EveryRankAndSlotHasItsOwnLineRankMajor) {
  constexpr int kRanks = 8, kSlots = 96;
  static_assert(flag_offset(0, 0, kSlots) == 0);
  static_assert(flag_offset(0, 1, kSlots) == 128);
  static_assert(flag_offset(1, 0, kSlots) == 128 * kSlots);
  static_assert(flag_region_bytes(kRanks, kSlots) == 128u * kRanks * kSlots);
  std::vector<size_t> offsets;
  for (int r = 0; r < kRanks; ++r) {
    for (int s = 0; s < kSlots; ++s)
      offsets.push_back(flag_offset(r, s, kSlots));
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i], i * kIpcAlignBytes);  // distinct, line-aligned, no gaps
    EXPECT_LT(offsets[i], flag_region_bytes(kRanks, kSlots));
  }
}

// ---- grid ----------------------------------------------------------------------------------

constexpr size_t kStepElements = size_t{kIpcThreads} * kIpcElementsPerThread;  // 8192

TEST(IpcGridBlocks, OneBlockPerStepOfTheBufferAtLeastOne) {
  EXPECT_EQ(ipc_grid_blocks(0, 264), 1);
  EXPECT_EQ(ipc_grid_blocks(1, 264), 1);  // 8 B of float: one block, one flag line per barrier
  EXPECT_EQ(ipc_grid_blocks(kStepElements, 264), 1);
  EXPECT_EQ(ipc_grid_blocks(kStepElements + 1, 264), 2);
  EXPECT_EQ(ipc_grid_blocks(16384, 264), 2);    // 64 KiB of float
  EXPECT_EQ(ipc_grid_blocks(262144, 264), 32);  // 1 MiB of float
}

TEST(IpcGridBlocks, LargeBuffersFillTheCapAndNoMore) {
  EXPECT_EQ(ipc_grid_blocks(264 * kStepElements, 264), 264);
  EXPECT_EQ(ipc_grid_blocks(264 * kStepElements + 1, 264), 264);
  EXPECT_EQ(ipc_grid_blocks(size_t{64} << 20, 264), 264);  // 256 MiB of float
  EXPECT_EQ(ipc_grid_blocks(SIZE_MAX, kMaxIpcBlocks), kMaxIpcBlocks);
}

TEST(IpcGridBlocks, RejectsACapOutsideOneToTheFlagRegion) {
  EXPECT_THROW(ipc_grid_blocks(1, 0), Error);
  EXPECT_THROW(ipc_grid_blocks(1, kMaxIpcBlocks + 1), Error);
}

TEST(IpcBlockCap, OneRankKeepsWhatItsGpuHoldsResident) {
  EXPECT_EQ(ipc_block_cap({{"0000:00:06.0", 264}}), 264);
}

TEST(IpcBlockCap, RanksSharingAGpuSplitItsResidentBlocks) {
  EXPECT_EQ(ipc_block_cap({{"a", 264}, {"a", 264}}), 132);
  EXPECT_EQ(ipc_block_cap({{"a", 264}, {"a", 264}, {"a", 264}, {"a", 264}}), 66);
  EXPECT_EQ(ipc_block_cap({{"a", 3}, {"a", 3}, {"a", 3}, {"a", 3}}), 1);  // never below one
}

TEST(IpcBlockCap, TheLeastOverRanksSoEveryRankLaunchesTheSameGrid) {
  // GPUs of different sizes, and one of them carrying two ranks.
  EXPECT_EQ(ipc_block_cap({{"a", 264}, {"b", 296}}), 264);
  EXPECT_EQ(ipc_block_cap({{"a", 264}, {"b", 296}, {"b", 296}}), 148);
}

TEST(IpcBlockCap, NeverAboveTheFlagRegion) {
  EXPECT_EQ(ipc_block_cap({{"a", 4 * kMaxIpcBlocks}}), kMaxIpcBlocks);
}

TEST(IpcBlockCap, RejectsNoRanksAndAGpuWithoutResidentBlocks) {
  EXPECT_THROW(ipc_block_cap({}), Error);
  EXPECT_THROW(ipc_block_cap({{"a", 264}, {"b", 0}}), Error);
}

// ---- kernel traffic ----------------------------------------------------------------------------

constexpr size_t kMiB = size_t{1} << 20;

TEST(IpcKernelBytes, OneRankReadsTheInputAndWritesTheOutputOnce) {
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kOneShot, 256 * kMiB, 1), 512.0 * kMiB);
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kTwoShot, 256 * kMiB, 1), 512.0 * kMiB);
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kOneShot, 8, 1), 16.0);
}

TEST(IpcKernelBytes, OneShotCopiesInThenReadsEveryRank) {
  // (n + 3) N: N read and N written into its buffer, n inputs read, the output written.
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kOneShot, kMiB, 2), 5.0 * kMiB);
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kOneShot, kMiB, 4), 7.0 * kMiB);
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kOneShot, kMiB, 8), 11.0 * kMiB);
}

TEST(IpcKernelBytes, TwoShotMovesFiveMinusTwoOverNTimesTheBuffer) {
  // n = 2: the other half in (N/2 + N/2), both halves of its segment read and it written twice
  // (N/2 + N/2 + N/2 ... = N + N), the other half gathered (N/2 + N/2): 4N.
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kTwoShot, kMiB, 2), 4.0 * kMiB);
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kTwoShot, kMiB, 4), 4.5 * kMiB);
  EXPECT_DOUBLE_EQ(ipc_kernel_bytes(IpcAlgorithm::kTwoShot, kMiB, 8), 4.75 * kMiB);
}

TEST(IpcKernelBytes, TwoShotSumsItsPhasesOverTheActualSegments) {
  // The formula is the mean over ranks of what each rank's phases move with the real split.
  for (int n = 2; n <= 8; ++n) {
    for (size_t count : {size_t{1000}, size_t{4097}, size_t{65541}}) {
      const std::vector<Segment> plan = two_shot_segments(count, 4, n);
      double total = 0;
      for (const Segment& mine : plan) {
        const double own = static_cast<double>(mine.elements) * 4,
                     rest = static_cast<double>(count) * 4 - own;
        total += 2 * rest;           // the peers' segments into its buffer
        total += n * own + 2 * own;  // its segment from n ranks, to output and buffer
        total += 2 * rest;           // the others' segments gathered
      }
      EXPECT_NEAR(ipc_kernel_bytes(IpcAlgorithm::kTwoShot, count * 4, n), total / n, 1e-6)
          << count << " floats at " << n << " ranks";
    }
  }
}

TEST(IpcKernelBytes, RejectsRankCountsOutsideOneToSixtyFour) {
  EXPECT_THROW(ipc_kernel_bytes(IpcAlgorithm::kOneShot, 8, 0), Error);
  EXPECT_THROW(ipc_kernel_bytes(IpcAlgorithm::kTwoShot, 8, 65), Error);
}

TEST(KernelGbps, BytesOverMicrosecondsInUnitsOfOneE9BytesPerSecond) {
  EXPECT_DOUBLE_EQ(*kernel_gbps(512.0 * kMiB, 160.0), 512.0 * kMiB / 160e-6 / 1e9);
  EXPECT_DOUBLE_EQ(*kernel_gbps(4000, 1), 4.0);
}

TEST(KernelGbps, NoRateFromATimeThatIsNotPositive) {
  EXPECT_FALSE(kernel_gbps(16, 0).has_value());
  EXPECT_FALSE(kernel_gbps(16, -1).has_value());
  EXPECT_FALSE(kernel_gbps(16, std::nan("")).has_value());
}

}  // namespace
