// The pure part of diagnose ep's exchange: the byte pattern a receiver checks (it must tell
// sender, receiver, operation and offset apart, or a misrouted segment would pass).
#include <gtest/gtest.h>

#include <set>

#include "tracing/ep/ep_exchange.hpp"

using namespace commtool::tracing;

namespace {

// How many of the first `n` offsets give the same byte under two (src, dst, seed) triples.
int same_bytes(uint32_t s1, uint32_t d1, uint32_t e1, uint32_t s2, uint32_t d2, uint32_t e2,
               int n) {
  int same = 0;
  for (int i = 0; i < n; ++i)
    same += exchange_byte(s1, d1, e1, i) == exchange_byte(s2, d2, e2, i);
  return same;
}

}  // namespace

TEST(EpExchange, PatternUsesEveryByteValue) {
  std::set<uint8_t> seen;
  for (uint64_t i = 0; i < 4096; ++i)
    seen.insert(exchange_byte(3, 5, 7, i));
  EXPECT_EQ(seen.size(), 256u);
}

TEST(EpExchange, MisroutedOrStaleSegmentsDifferAlmostEverywhere) {
  // A random match is 1 in 256; a segment of 4096 bytes shares about 16 by chance.
  const int n = 4096, chance = 64;
  EXPECT_LT(same_bytes(1, 2, 9, 2, 1, 9, n), chance);  // sender and receiver swapped
  EXPECT_LT(same_bytes(1, 2, 9, 1, 3, 9, n), chance);  // another receiver's segment
  EXPECT_LT(same_bytes(1, 2, 9, 0, 2, 9, n), chance);  // another sender's segment
  EXPECT_LT(same_bytes(1, 2, 9, 1, 2, 8, n), chance);  // the previous operation's data
  EXPECT_EQ(same_bytes(1, 2, 9, 1, 2, 9, n), n);
}

TEST(EpExchange, OffsetsBeyondFourGiBAreNotAliasedToLowOnes) {
  int same = 0;
  for (uint64_t i = 0; i < 4096; ++i)
    same += exchange_byte(0, 1, 2, i) == exchange_byte(0, 1, 2, i + (uint64_t{1} << 32));
  EXPECT_LT(same, 64);
}
