#include "probes/base/int_runs.hpp"

#include <gtest/gtest.h>

namespace commtool {
namespace {

TEST(IntRuns, ConsecutiveValuesBecomeOneRunAsTheKernelWritesACpulist) {
  EXPECT_EQ(int_runs({0, 1, 2, 3, 8, 10, 11, 12}), "0-3,8,10-12");
  EXPECT_EQ(int_runs({4, 5}), "4-5");
  EXPECT_EQ(int_runs({7}), "7");
  EXPECT_EQ(int_runs({}), "");
}

TEST(IntRuns, SortsAndDropsDuplicatesSoTheOrderOfArrivalDoesNotShow) {
  EXPECT_EQ(int_runs({3, 1, 2, 2, 9, 1}), "1-3,9");
}

TEST(IntRuns, ASeparatorAndPairsWrittenOut) {
  const RunsStyle words{.separator = ", ", .pair_as_run = false};
  EXPECT_EQ(int_runs({0, 1, 5, 6, 7, 9}, words), "0, 1, 5-7, 9");
  EXPECT_EQ(int_runs({0, 1, 5, 6, 7, 9}, {.separator = ", "}), "0-1, 5-7, 9");
  EXPECT_EQ(int_runs({3, 4}, {.separator = ",", .pair_as_run = false}), "3,4");
}

TEST(IntRuns, AJobOfThousandsOfRanksWithOneMissingStaysShort) {
  std::vector<int> ranks;
  for (int r = 0; r < 4096; ++r)
    if (r != 17) ranks.push_back(r);
  EXPECT_EQ(int_runs(ranks), "0-16,18-4095");
}

}  // namespace
}  // namespace commtool
