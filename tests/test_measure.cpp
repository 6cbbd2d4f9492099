#include <gtest/gtest.h>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "probes/base/measure/memory_limit.hpp"
#include "probes/base/measure/statistics.hpp"

using namespace commtool;
using namespace commtool::measure;

TEST(Statistics, OddCountMedianIsTheMiddleSample) {
  Summary s = summarize({5, 1, 3});
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
}

TEST(Statistics, EvenCountMedianAveragesTheMiddlePair) {
  EXPECT_DOUBLE_EQ(summarize({4, 1, 3, 2}).median, 2.5);
}

TEST(Statistics, CvIsSampleStddevOverMean) {
  Summary s = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_NEAR(s.stddev, 2.138, 1e-3);  // n-1 in the denominator
  EXPECT_NEAR(s.cv, 2.138 / 5, 1e-3);
}

TEST(Statistics, P99IsNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 200; ++i)
    v.push_back(i);
  EXPECT_DOUBLE_EQ(summarize(v).p99, 198);
  EXPECT_DOUBLE_EQ(summarize({7}).p99, 7);
}

TEST(Statistics, EmptyAndSingleSamplesAreSafe) {
  EXPECT_EQ(summarize({}).n, 0);
  Summary one = summarize({3});
  EXPECT_DOUBLE_EQ(one.stddev, 0);
  EXPECT_DOUBLE_EQ(one.cv, 0);
}

namespace {

std::string size_error(const std::string& text) {
  try {
    parse_byte_size("--size", text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << text << " was accepted";
  return {};
}

}  // namespace

TEST(ByteSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_byte_size("--size", "512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("--size", "512M"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("--size", "64K"), 64ull << 10);
  EXPECT_EQ(parse_byte_size("--size", "1G"), 1ull << 30);
  EXPECT_EQ(parse_byte_size("--size", "1GB"), 1000000000ull);
  EXPECT_EQ(parse_byte_size("--size", "4096"), 4096ull);
  EXPECT_EQ(parse_byte_size("--size", "8B"), 8ull);
}

TEST(ByteSize, UnknownUnitNamesItAndTheOption) {
  std::string msg = size_error("12Q");
  EXPECT_NE(msg.find("--size 12Q"), std::string::npos);
  EXPECT_NE(msg.find("unknown unit 'Q'"), std::string::npos);
  EXPECT_NE(msg.find("512MiB"), std::string::npos);
}

TEST(ByteSize, NoNumberOrOverflowIsRejected) {
  EXPECT_NE(size_error("MiB").find("no number"), std::string::npos);
  EXPECT_NE(size_error("").find("no number"), std::string::npos);
  EXPECT_NE(size_error("-5").find("no number"), std::string::npos);
  EXPECT_NE(size_error("99999999999G").find("too large"), std::string::npos);
}

TEST(ByteSize, FormatsExactBinaryUnits) {
  EXPECT_EQ(format_byte_size(512ull << 20), "512 MiB");
  EXPECT_EQ(format_byte_size(4096), "4 KiB");
  EXPECT_EQ(format_byte_size(1000), "1000 B");
  EXPECT_EQ(format_byte_size(3ull << 30), "3 GiB");
}

#include "probes/bandwidth/pointer_chase.hpp"

TEST(PointerChase, ChainIsOneCycleThroughEverySlot) {
  constexpr size_t kEntries = 257;
  auto chain = commtool::probe::make_chase_chain(kEntries, 3);
  std::vector<bool> seen(chain.size(), false);
  uint64_t at = 0;
  for (size_t i = 0; i < kEntries; ++i) {
    ASSERT_FALSE(seen[at]) << "slot " << at << " visited twice";
    ASSERT_EQ(at % 16, 0u);  // every slot starts its own 128-byte line
    seen[at] = true;
    at = chain[at];
  }
  EXPECT_EQ(at, 0u);  // back at the start after visiting every slot once
  EXPECT_EQ(commtool::probe::follow_chain(chain, static_cast<int>(kEntries)), 0u);
}

TEST(Statistics, SlowestRankPerOperation) {
  EXPECT_EQ(slowest_per_operation({{1, 9, 3}, {4, 2, 3}, {0, 0, 5}}),
            (std::vector<double>{4, 9, 5}));
  EXPECT_TRUE(slowest_per_operation({}).empty());
}

// ---- memory limits -------------------------------------------------------------------------

TEST(MemoryLimit, ProductsSaturateInsteadOfWrapping) {
  using commtool::measure::saturating_add;
  using commtool::measure::saturating_mul;
  EXPECT_EQ(saturating_mul(1ull << 40, 1ull << 30), ~0ull);  // wraps to 0 unchecked
  EXPECT_EQ(saturating_mul(3, 5), 15u);
  EXPECT_EQ(saturating_add(~0ull, 1), ~0ull);
  EXPECT_EQ(commtool::measure::approx_byte_size(~0ull), "16 EiB or more");
  EXPECT_EQ(commtool::measure::approx_byte_size(512ull << 30), "512 GiB");
  EXPECT_EQ(commtool::measure::approx_byte_size(3ull << 39), "1.5 TiB");
  EXPECT_EQ(commtool::measure::approx_byte_size(1000), "1000 B");
}

TEST(MemoryLimit, APastTheLimitNamesTheFieldWhatNeedsItHowMuchAndTheLimit) {
  EXPECT_NO_THROW(commtool::measure::check_memory("size", "1G", 1ull << 30, 1ull << 30, "x"));
  try {
    commtool::measure::check_memory("size", "64G", 128ull << 30, 16ull << 30,
                                    "two buffers of 64 GiB");
    FAIL() << "128 GiB passed a 16 GiB limit";
  } catch (const commtool::BadValue& e) {
    EXPECT_EQ(e.field(), "size");
    EXPECT_EQ(e.value(), "64G");
    EXPECT_EQ(e.why(), "two buffers of 64 GiB would need 128 GiB; the limit is 16 GiB");
    EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
  }
}
