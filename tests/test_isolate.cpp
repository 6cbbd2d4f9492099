// Isolation by halves (tracing/doctor/isolate.hpp) on simulated all-reduces over 8 GPUs: a GPU
// that hangs every set it is in, a slow link that slows every set holding both its ends, two
// faults at once; each found in O(log n) runs where all pairs would take 28.
#include "tracing/doctor/isolate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace {

using commtool::doctor::isolate;
using commtool::doctor::RunOutcome;

const std::vector<int> kEight{0, 1, 2, 3, 4, 5, 6, 7};

bool has(const std::vector<int>& s, int g) {
  return std::find(s.begin(), s.end(), g) != s.end();
}

TEST(Isolate, AGpuThatHangsIsNamedAlone) {
  int calls = 0;
  const auto run = [&](const std::vector<int>& s) {
    ++calls;
    return has(s, 5) ? RunOutcome{false, 0, "did not complete within 10.0 s"}
                     : RunOutcome{true, 400, ""};
  };
  const auto r = isolate(kEight, run);
  ASSERT_EQ(r.suspects.size(), 1u);
  EXPECT_EQ(r.suspects[0].gpus, std::vector<int>{5});
  EXPECT_FALSE(r.suspects[0].between);
  EXPECT_EQ(r.runs, calls);
  EXPECT_LE(r.runs, 8);
}

TEST(Isolate, ASlowLinkIsNamedByItsTwoEnds) {
  const auto run = [](const std::vector<int>& s) {
    return RunOutcome{true, has(s, 3) && has(s, 6) ? 90.0 : 400.0, ""};
  };
  const auto r = isolate(kEight, run);
  ASSERT_EQ(r.suspects.size(), 1u) << r.log.size();
  EXPECT_EQ(r.suspects[0].gpus, (std::vector<int>{3, 6}));
  EXPECT_TRUE(r.suspects[0].between);
  EXPECT_NE(r.suspects[0].evidence.find("each is fine beside GPU"), std::string::npos);
  EXPECT_LE(r.runs, 16);
}

TEST(Isolate, OneFaultInEachHalf) {
  const auto run = [](const std::vector<int>& s) {
    if (has(s, 6)) return RunOutcome{false, 0, "wrong data"};
    if (has(s, 1)) return RunOutcome{false, 0, "did not complete within 10.0 s"};
    return RunOutcome{true, 400, ""};
  };
  const auto r = isolate(kEight, run);
  std::set<std::vector<int>> found;
  for (const auto& s : r.suspects)
    found.insert(s.gpus);
  EXPECT_EQ(found, (std::set<std::vector<int>>{{1}, {6}}));
}

// A set that ran is judged slow only beside one of its size that ran too: beside a half that
// failed, a slow half is not named (the doctor's own check of the whole set says LOW).
TEST(Isolate, ASlowHalfBesideAFailedOneIsNotGuessed) {
  const auto run = [](const std::vector<int>& s) {
    if (has(s, 6)) return RunOutcome{false, 0, "wrong data"};
    return RunOutcome{true, has(s, 0) && has(s, 1) ? 100.0 : 400.0, ""};
  };
  const auto r = isolate(kEight, run);
  ASSERT_EQ(r.suspects.size(), 1u);
  EXPECT_EQ(r.suspects[0].gpus, std::vector<int>{6});
}

TEST(Isolate, TheRunsAreBounded) {
  int calls = 0;
  const auto run = [&](const std::vector<int>&) {
    ++calls;
    return RunOutcome{false, 0, "fails everywhere"};
  };
  const auto r = isolate(kEight, run, 6);
  EXPECT_LE(calls, 6);
  EXPECT_FALSE(r.suspects.empty());
}

TEST(Isolate, FasterThanAllPairsAt64Gpus) {
  std::vector<int> all(64);
  for (int i = 0; i < 64; ++i)
    all[static_cast<size_t>(i)] = i;
  const auto run = [](const std::vector<int>& s) {
    return RunOutcome{true, has(s, 17) && has(s, 42) ? 50.0 : 400.0, ""};
  };
  const auto r = isolate(all, run);
  ASSERT_EQ(r.suspects.size(), 1u);
  EXPECT_EQ(r.suspects[0].gpus, (std::vector<int>{17, 42}));
  EXPECT_LE(r.runs, 30);  // all pairs: 2,016
}

}  // namespace
