// The size sweep of trace and diagnose allreduce (-b, -e, -f), as nccl-tests users give it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cli/size_sweep.hpp"
#include "probes/base/error.hpp"

using commtool::cli::size_sweep;

TEST(SizeSweep, MultipliesFromMinToMaxInclusive) {
  EXPECT_EQ(size_sweep("8", "64", 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep("1K", "1K", 2), (std::vector<uint64_t>{1024}));
  EXPECT_EQ(size_sweep("1", "100", 10), (std::vector<uint64_t>{1, 10, 100}));
}

TEST(SizeSweep, NoSizeWrapsAroundAtTheTopOfTheRange) {
  // The largest maximum: past 2^63 the next product used to wrap to 0 and fill the sweep with
  // 0 B sizes.
  const std::vector<uint64_t> sizes = size_sweep("1", "9999999999999999999", 2);
  ASSERT_EQ(sizes.size(), 64u);
  for (size_t i = 1; i < sizes.size(); ++i)
    EXPECT_EQ(sizes[i], 2 * sizes[i - 1]) << i;
  EXPECT_EQ(sizes.back(), uint64_t{1} << 63);
  const std::vector<uint64_t> big_step = size_sweep("3", "9999999999999999999", 1024);
  for (uint64_t b : big_step)
    EXPECT_GT(b, 0u);
  EXPECT_EQ(big_step.size(), 7u);  // 3 * 1024^6 <= max < 3 * 1024^7
}

TEST(SizeSweep, MinAboveMaxAndZeroAreRefused) {
  EXPECT_THROW(size_sweep("64", "8", 2), commtool::Error);
  EXPECT_THROW(size_sweep("0", "8", 2), commtool::Error);
}
