// What `commtool trace` makes of a request at a given rank count, before any worker starts:
// the sizes it can run and the requests it must refuse (pure logic, no GPU).
#include <gtest/gtest.h>

#include <string>

#include "probes/base/error.hpp"
#include "tracing/trace/trace_plan.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

TraceRequest request(Collective c, DataType t, ReduceOp op, std::vector<uint64_t> sizes) {
  TraceRequest q;
  q.collective = c;
  q.dtype = t;
  q.op = op;
  q.sizes = std::move(sizes);
  return q;
}

// The usage error's words, or "" when plan_for accepted the request.
std::string refusal(const TraceRequest& q, int nranks) {
  try {
    plan_for(q, nranks);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TracePlan, SizesRoundDownToWholeElementsPerRankAndRepeatsGo) {
  // allgather at 3 ranks of float: 8 B is below 3 elements, 12 B is one per rank, 16 B rounds
  // down to 12 (dropped as a repeat), 24 B is two per rank.
  TraceRequest q =
      request(Collective::kAllGather, DataType::kFloat32, ReduceOp::kSum, {12, 16, 24});
  EXPECT_EQ(plan_for(q, 3).sizes, (std::vector<uint64_t>{12, 24}));
  q.sizes = {8};
  EXPECT_EQ(refusal(q, 3), "sizes 8: allgather of float at 3 rank(s) needs at least 12 bytes");
}

TEST(TracePlan, RootMustBeARank) {
  TraceRequest q = request(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, {1024});
  q.root = 2;
  EXPECT_EQ(refusal(q, 3), "");
  EXPECT_EQ(refusal(q, 2), "root 2: must name a rank below 2, the number of ranks");
}

TEST(TracePlan, CheckedReductionBeyondTheTypesExactRangeIsRefused) {
  // int8 sums stay exact up to 18 ranks (inputs up to 7, 18 * 7 = 126 <= 127).
  TraceRequest q = request(Collective::kAllReduce, DataType::kInt8, ReduceOp::kSum, {1024});
  EXPECT_EQ(refusal(q, 18), "");
  const std::string why = refusal(q, 19);
  EXPECT_NE(why.find("dtype int8: with sum at 19 ranks"), std::string::npos) << why;
  EXPECT_NE(why.find("above 18 ranks"), std::string::npos) << why;
  // Reduce-scatter and reduce reduce too; the same limit applies.
  q.collective = Collective::kReduceScatter;
  EXPECT_NE(refusal(q, 19), "");
  // What does not reduce is exact at any rank count, and so is max.
  q.collective = Collective::kAllGather;
  EXPECT_EQ(refusal(q, 64), "");
  q.collective = Collective::kAllReduce;
  q.op = ReduceOp::kMax;
  EXPECT_EQ(refusal(q, 64), "");
}
