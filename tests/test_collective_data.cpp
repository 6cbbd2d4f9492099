// What goes into a collective and what must come out: names, buffer layouts in nccl-tests'
// convention, the input values, the expected output of every collective, and the bounds within
// which a check can demand exact equality. The GPU kernels compute with the same header
// (tracing/collectives/collective_values.cuh), so these pin what the GPU checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <vector>

#include "tracing/collectives/collective_data.hpp"
#include "tracing/collectives/collective_values.cuh"

using namespace commtool::tracing;

namespace {

const std::vector<DataType> kTypes = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                      DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                                      DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                      DataType::kBfloat16};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};
const std::vector<Collective> kCollectives = {Collective::kAllReduce,     Collective::kAllGather,
                                              Collective::kReduceScatter, Collective::kBroadcast,
                                              Collective::kReduce,        Collective::kAllToAll,
                                              Collective::kSendRecv};
const std::vector<int> kRankCounts = {1, 2, 3, 4, 8};

// The reduction written out from input_value, apart from the implementation's own loop.
double reduce_by_hand(ReduceOp op, bool integer, int n, size_t index, uint32_t seed) {
  std::vector<double> v;
  for (int r = 0; r < n; ++r)
    v.push_back(input_value(r, index, seed, op));
  double sum = 0, prod = 1;
  for (double x : v)
    sum += x, prod *= x;
  switch (op) {
    case ReduceOp::kSum:
      return sum;
    case ReduceOp::kProd:
      return prod;
    case ReduceOp::kMin:
      return *std::min_element(v.begin(), v.end());
    case ReduceOp::kMax:
      return *std::max_element(v.begin(), v.end());
    case ReduceOp::kAvg:
      return integer ? std::trunc(sum / n) : sum / n;
  }
  return NAN;
}

// x rounded to `bits` significant bits, ties to even: what a float type with that significand
// stores (normal range only, enough for the small values here).
double round_to_bits(double x, int bits) {
  if (x == 0) return 0;
  int e = 0;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

int significand_bits(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return 11;
    case DataType::kBfloat16:
      return 8;
    case DataType::kFloat32:
      return 24;
    default:
      return 53;
  }
}

}  // namespace

TEST(CollectiveDataNames, DataTypesParseInNcclTestsNamesAndAliases) {
  EXPECT_EQ(parse_data_type("int8"), DataType::kInt8);
  EXPECT_EQ(parse_data_type("uint8"), DataType::kUint8);
  EXPECT_EQ(parse_data_type("int32"), DataType::kInt32);
  EXPECT_EQ(parse_data_type("uint32"), DataType::kUint32);
  EXPECT_EQ(parse_data_type("int64"), DataType::kInt64);
  EXPECT_EQ(parse_data_type("uint64"), DataType::kUint64);
  EXPECT_EQ(parse_data_type("half"), DataType::kFloat16);
  EXPECT_EQ(parse_data_type("float16"), DataType::kFloat16);
  EXPECT_EQ(parse_data_type("float"), DataType::kFloat32);
  EXPECT_EQ(parse_data_type("float32"), DataType::kFloat32);
  EXPECT_EQ(parse_data_type("double"), DataType::kFloat64);
  EXPECT_EQ(parse_data_type("float64"), DataType::kFloat64);
  EXPECT_EQ(parse_data_type("bfloat16"), DataType::kBfloat16);
  EXPECT_EQ(parse_data_type("bf16"), DataType::kBfloat16);
  EXPECT_EQ(parse_data_type("BF16"), DataType::kBfloat16);
}

TEST(CollectiveDataNames, UnknownDataTypesAreRejected) {
  for (const char* bad : {"", "int", "int16", "fp16", "fp8", "bfloat", "float128", "half "}) {
    EXPECT_FALSE(parse_data_type(bad).has_value()) << bad;
  }
}

TEST(CollectiveDataNames, EveryDataTypePrintsItsNcclTestsNameAndParsesBack) {
  for (DataType t : kTypes)
    EXPECT_EQ(parse_data_type(to_string(t)), t) << to_string(t);
  EXPECT_EQ(to_string(DataType::kFloat16), "half");
  EXPECT_EQ(to_string(DataType::kBfloat16), "bfloat16");
}

TEST(CollectiveDataNames, ReduceOpsParseAndPrint) {
  for (ReduceOp op : kOps)
    EXPECT_EQ(parse_reduce_op(to_string(op)), op) << to_string(op);
  EXPECT_EQ(parse_reduce_op("Avg"), ReduceOp::kAvg);
  for (const char* bad : {"", "add", "mean", "product", "minmax"}) {
    EXPECT_FALSE(parse_reduce_op(bad).has_value()) << bad;
  }
}

TEST(CollectiveDataTypes, SizesAreThoseOfTheElements) {
  EXPECT_EQ(type_size(DataType::kInt8), 1u);
  EXPECT_EQ(type_size(DataType::kUint8), 1u);
  EXPECT_EQ(type_size(DataType::kFloat16), 2u);
  EXPECT_EQ(type_size(DataType::kBfloat16), 2u);
  EXPECT_EQ(type_size(DataType::kInt32), 4u);
  EXPECT_EQ(type_size(DataType::kUint32), 4u);
  EXPECT_EQ(type_size(DataType::kFloat32), 4u);
  EXPECT_EQ(type_size(DataType::kInt64), 8u);
  EXPECT_EQ(type_size(DataType::kUint64), 8u);
  EXPECT_EQ(type_size(DataType::kFloat64), 8u);
}

TEST(CollectiveDataLayout, UnsplitCollectivesUseEveryWholeElement) {
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce,
                       Collective::kSendRecv}) {
    const BufferLayout l = buffer_layout(c, DataType::kFloat32, 1003, 3);
    EXPECT_EQ(l.send_elements, 250u) << to_string(c);
    EXPECT_EQ(l.recv_elements, 250u) << to_string(c);
    EXPECT_EQ(l.count, 250u) << to_string(c);
  }
}

TEST(CollectiveDataLayout, SplitCollectivesRoundDownToAMultipleOfTheRanks) {
  // 1000 bytes of float at 3 ranks: 250 elements, 249 after rounding to a multiple of 3.
  const BufferLayout ag = buffer_layout(Collective::kAllGather, DataType::kFloat32, 1000, 3);
  EXPECT_EQ(ag.recv_elements, 249u);
  EXPECT_EQ(ag.send_elements, 83u);
  EXPECT_EQ(ag.count, 83u);
  const BufferLayout rs = buffer_layout(Collective::kReduceScatter, DataType::kFloat32, 1000, 3);
  EXPECT_EQ(rs.send_elements, 249u);
  EXPECT_EQ(rs.recv_elements, 83u);
  EXPECT_EQ(rs.count, 83u);
  const BufferLayout a2a = buffer_layout(Collective::kAllToAll, DataType::kFloat32, 1000, 3);
  EXPECT_EQ(a2a.send_elements, 249u);
  EXPECT_EQ(a2a.recv_elements, 249u);
  EXPECT_EQ(a2a.count, 83u);
}

TEST(CollectiveDataLayout, EveryCollectiveAtOneToEightRanksKeepsNcclTestsInvariants) {
  for (int n = 1; n <= 8; ++n) {
    const auto un = static_cast<size_t>(n);
    for (DataType t : kTypes) {
      for (uint64_t bytes : {0ull, 1ull, 7ull, 64ull, 1000ull, 4099ull, 1ull << 20}) {
        const size_t elements = bytes / type_size(t);
        const size_t whole = elements / un * un;
        const BufferLayout ar = buffer_layout(Collective::kAllReduce, t, bytes, n);
        EXPECT_EQ(ar.count, elements);
        const BufferLayout ag = buffer_layout(Collective::kAllGather, t, bytes, n);
        EXPECT_EQ(ag.recv_elements, whole);
        EXPECT_EQ(ag.send_elements * un, ag.recv_elements);
        EXPECT_EQ(ag.count, ag.send_elements);
        const BufferLayout rs = buffer_layout(Collective::kReduceScatter, t, bytes, n);
        EXPECT_EQ(rs.send_elements, whole);
        EXPECT_EQ(rs.recv_elements * un, rs.send_elements);
        EXPECT_EQ(rs.count, rs.recv_elements);
        const BufferLayout a2a = buffer_layout(Collective::kAllToAll, t, bytes, n);
        EXPECT_EQ(a2a.send_elements, whole);
        EXPECT_EQ(a2a.recv_elements, whole);
        EXPECT_EQ(a2a.count * un, whole);
        // The larger buffer is what nccl-tests calls the size: never more than asked.
        for (const BufferLayout& l : {ar, ag, rs, a2a}) {
          EXPECT_LE(std::max(l.send_elements, l.recv_elements) * type_size(t), bytes);
        }
      }
    }
  }
}

TEST(CollectiveDataLayout, LessThanOneElementPerRankIsZeroElements) {
  EXPECT_EQ(buffer_layout(Collective::kAllReduce, DataType::kFloat64, 7, 2).count, 0u);
  EXPECT_EQ(buffer_layout(Collective::kAllGather, DataType::kInt8, 3, 4).recv_elements, 0u);
  EXPECT_EQ(buffer_layout(Collective::kReduceScatter, DataType::kInt32, 12, 4).send_elements, 0u);
  EXPECT_EQ(buffer_layout(Collective::kAllToAll, DataType::kFloat16, 14, 8).count, 0u);
  EXPECT_EQ(buffer_layout(Collective::kAllGather, DataType::kInt8, 4, 4).count, 1u);
  EXPECT_EQ(buffer_layout(Collective::kAllReduce, DataType::kInt8, 100, 0).count, 0u);
}

TEST(CollectiveDataValues, InputsAreSmallNonNegativeIntegersAndProdOnlyOneOrTwo) {
  std::set<double> seen, seen_prod;
  for (int rank = 0; rank < 8; ++rank) {
    for (size_t i = 0; i < 2000; ++i) {
      for (uint32_t seed : {1u, 2u, 77u}) {
        const double v = input_value(rank, i, seed, ReduceOp::kSum);
        ASSERT_EQ(v, std::floor(v));
        ASSERT_GE(v, 0);
        ASSERT_LE(v, 7);
        seen.insert(v);
        EXPECT_EQ(input_value(rank, i, seed, ReduceOp::kMin), v);  // only prod differs
        const double p = input_value(rank, i, seed, ReduceOp::kProd);
        ASSERT_TRUE(p == 1 || p == 2) << p;
        seen_prod.insert(p);
      }
    }
  }
  EXPECT_EQ(seen.size(), 8u);  // every value 0..7 occurs
  EXPECT_EQ(seen_prod.size(), 2u);
}

TEST(CollectiveDataValues, InputsVaryWithRankAndIndex) {
  int rank_differs = 0, index_differs = 0;
  constexpr int kElements = 4000;
  for (size_t i = 0; i < kElements; ++i) {
    rank_differs += input_value(0, i, 5, ReduceOp::kSum) != input_value(3, i, 5, ReduceOp::kSum);
    index_differs +=
        input_value(1, i, 5, ReduceOp::kSum) != input_value(1, i + 1, 5, ReduceOp::kSum);
  }
  // Data from the wrong rank or a shifted offset is wrong at most elements.
  EXPECT_GT(rank_differs, kElements * 6 / 10);
  EXPECT_GT(index_differs, kElements * 6 / 10);
}

TEST(CollectiveDataValues, ConsecutiveSeedsChangeEveryInput) {
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 1000u}) {
    for (int rank = 0; rank < 8; ++rank) {
      for (size_t i = 0; i < 1000; ++i) {
        ASSERT_NE(input_value(rank, i, seed, ReduceOp::kSum),
                  input_value(rank, i, seed + 1, ReduceOp::kSum))
            << "rank " << rank << " index " << i << " seed " << seed;
      }
    }
    for (size_t i = 0; i < 1000; ++i) {  // prod: rank 0 alternates, so every product moves
      ASSERT_NE(input_value(0, i, seed, ReduceOp::kProd),
                input_value(0, i, seed + 1, ReduceOp::kProd));
    }
  }
}

TEST(CollectiveDataValues, ConsecutiveSeedsChangeEveryReducedOutput) {
  // A stale output, left from the previous operation, must fail the check everywhere.
  for (int n : kRankCounts) {
    for (ReduceOp op : kOps) {
      for (DataType t : {DataType::kInt32, DataType::kFloat32}) {
        const double tol = values::check_tolerance(Collective::kAllReduce, op, t, n);
        for (size_t i = 0; i < 500; ++i) {
          const auto now = expected_value(Collective::kAllReduce, op, t, 0, n, 0, i, 500, 8);
          const auto stale = expected_value(Collective::kAllReduce, op, t, 0, n, 0, i, 500, 7);
          ASSERT_TRUE(now && stale);
          ASSERT_FALSE(values::output_matches(*stale, *now, tol))
              << to_string(op) << " n=" << n << " index " << i;
        }
      }
    }
  }
}

TEST(CollectiveDataExpected, ReductionsAreTheOpOverAllRanks) {
  for (int n : kRankCounts) {
    for (ReduceOp op : kOps) {
      for (DataType t : {DataType::kInt32, DataType::kFloat64}) {
        const bool integer = t == DataType::kInt32;
        constexpr size_t kCount = 40;
        for (int rank = 0; rank < n; ++rank) {
          for (size_t i = 0; i < kCount; ++i) {
            const double all = reduce_by_hand(op, integer, n, i, 3);
            EXPECT_EQ(expected_value(Collective::kAllReduce, op, t, rank, n, 0, i, kCount, 3), all);
            // reducescatter: this rank's block of the reduced send buffers.
            const size_t mine = static_cast<size_t>(rank) * kCount + i;
            EXPECT_EQ(expected_value(Collective::kReduceScatter, op, t, rank, n, 0, i, kCount, 3),
                      reduce_by_hand(op, integer, n, mine, 3));
          }
        }
      }
    }
  }
}

TEST(CollectiveDataExpected, ReduceDefinesOnlyTheRootsBuffer) {
  for (int n : kRankCounts) {
    const int root = n - 1;
    for (int rank = 0; rank < n; ++rank) {
      for (size_t i = 0; i < 20; ++i) {
        const auto v = expected_value(Collective::kReduce, ReduceOp::kMax, DataType::kUint8, rank,
                                      n, root, i, 20, 9);
        if (rank == root) {
          EXPECT_EQ(v, reduce_by_hand(ReduceOp::kMax, true, n, i, 9));
        } else {
          EXPECT_FALSE(v.has_value()) << "rank " << rank << " of " << n;
        }
      }
    }
  }
}

TEST(CollectiveDataExpected, AvgOfIntegersTruncatesTheSumLikeNccl) {
  // Three ranks at element i: the sum is rarely a multiple of 3, and NCCL's integer avg is the
  // sum divided with truncation (FuncSumPostDiv), not rounded.
  int inexact = 0;
  for (size_t i = 0; i < 200; ++i) {
    double sum = 0;
    for (int r = 0; r < 3; ++r)
      sum += input_value(r, i, 4, ReduceOp::kAvg);
    const auto v =
        expected_value(Collective::kAllReduce, ReduceOp::kAvg, DataType::kInt8, 0, 3, 0, i, 200, 4);
    EXPECT_EQ(v, static_cast<double>(static_cast<int>(sum) / 3));
    const auto f = expected_value(Collective::kAllReduce, ReduceOp::kAvg, DataType::kFloat32, 0, 3,
                                  0, i, 200, 4);
    EXPECT_DOUBLE_EQ(*f, sum / 3);
    inexact += static_cast<int>(sum) % 3 != 0;
  }
  EXPECT_GT(inexact, 100);  // the truncation was really exercised
}

TEST(CollectiveDataExpected, CopiesPlaceEachRanksDataWhereNcclPutsIt) {
  constexpr size_t kCount = 6;
  constexpr uint32_t kSeed = 11;
  const ReduceOp op = ReduceOp::kSum;  // ignored by copies; inputs are those of sum
  const DataType t = DataType::kFloat32;
  for (int n : kRankCounts) {
    const auto un = static_cast<size_t>(n);
    for (int rank = 0; rank < n; ++rank) {
      const auto me = static_cast<size_t>(rank);
      for (size_t i = 0; i < kCount; ++i) {
        EXPECT_EQ(expected_value(Collective::kBroadcast, op, t, rank, n, 1 % n, i, kCount, kSeed),
                  input_value(1 % n, i, kSeed, op));
        EXPECT_EQ(expected_value(Collective::kSendRecv, op, t, rank, n, 0, i, kCount, kSeed),
                  input_value((rank + n - 1) % n, i, kSeed, op));
      }
      for (int p = 0; p < n; ++p) {
        const auto slot = static_cast<size_t>(p) * kCount;
        for (size_t i = 0; i < kCount; ++i) {
          // allgather: slot p is rank p's send buffer.
          EXPECT_EQ(
              expected_value(Collective::kAllGather, op, t, rank, n, 0, slot + i, kCount, kSeed),
              input_value(p, i, kSeed, op));
          // alltoall: slot p is block `rank` of rank p's send buffer.
          EXPECT_EQ(
              expected_value(Collective::kAllToAll, op, t, rank, n, 0, slot + i, kCount, kSeed),
              input_value(p, me * kCount + i, kSeed, op));
        }
      }
      // Past the receive buffer nothing is defined.
      EXPECT_FALSE(
          expected_value(Collective::kAllGather, op, t, rank, n, 0, un * kCount, kCount, kSeed));
      EXPECT_FALSE(
          expected_value(Collective::kAllReduce, op, t, rank, n, 0, kCount, kCount, kSeed));
    }
  }
}

TEST(CollectiveDataExpected, OneRankGetsBackWhatItSent) {
  for (Collective c : kCollectives) {
    for (ReduceOp op : kOps) {
      for (size_t i = 0; i < 50; ++i) {
        EXPECT_EQ(expected_value(c, op, DataType::kFloat32, 0, 1, 0, i, 50, 21),
                  input_value(0, i, 21, op))
            << to_string(c) << " " << to_string(op);
      }
    }
  }
}

TEST(CollectiveDataExpected, ImpossibleRanksHaveNoExpectedValue) {
  EXPECT_FALSE(
      expected_value(Collective::kAllReduce, ReduceOp::kSum, DataType::kInt32, 2, 2, 0, 0, 4, 1));
  EXPECT_FALSE(
      expected_value(Collective::kAllReduce, ReduceOp::kSum, DataType::kInt32, 0, 0, 0, 0, 4, 1));
  EXPECT_FALSE(
      expected_value(Collective::kBroadcast, ReduceOp::kSum, DataType::kInt32, 0, 2, 5, 0, 4, 1));
}

TEST(CollectiveDataExactness, SumAtTheMaxSupportedRanksIsExactInEveryType) {
  // Every partial sum of a worst-case element (all inputs 7) is an integer the type holds, so
  // any order of additions gives the expected value; one rank more could not.
  for (DataType t : kTypes) {
    const int n = max_exact_ranks(t, ReduceOp::kSum);
    ASSERT_GT(n, 8) << to_string(t);
    if (n > 1000) continue;  // 32- and 64-bit types: far beyond any machine
    const double worst = 7.0 * n;
    if (values::is_integer(t)) {
      const double largest = t == DataType::kInt8 ? 127 : 255;
      EXPECT_LE(worst, largest) << to_string(t);
      EXPECT_GT(worst + 7, largest) << to_string(t);
    } else {
      const int bits = significand_bits(t);
      for (double partial = 0; partial <= worst; partial += 1) {
        ASSERT_EQ(round_to_bits(partial, bits), partial) << to_string(t) << " " << partial;
      }
      EXPECT_GT(worst + 7, std::ldexp(1.0, bits)) << to_string(t);
    }
    for (size_t i = 0; i < 300; ++i) {  // and real elements at that n agree
      const double v =
          *expected_value(Collective::kAllReduce, ReduceOp::kSum, t, 0, n, 0, i, 300, 2);
      EXPECT_LE(v, worst);
      if (!values::is_integer(t)) {
        EXPECT_EQ(round_to_bits(v, significand_bits(t)), v);
      }
    }
  }
  EXPECT_EQ(max_exact_ranks(DataType::kInt8, ReduceOp::kSum), 18);
  EXPECT_EQ(max_exact_ranks(DataType::kBfloat16, ReduceOp::kSum), 36);
  EXPECT_EQ(max_exact_ranks(DataType::kFloat16, ReduceOp::kSum), 292);
}

TEST(CollectiveDataExactness, ProdAtTheMaxSupportedRanksIsAPowerOfTwoTheTypeHolds) {
  EXPECT_EQ(max_exact_ranks(DataType::kInt8, ReduceOp::kProd), 6);      // 64 <= 127 < 128
  EXPECT_EQ(max_exact_ranks(DataType::kUint8, ReduceOp::kProd), 7);     // 128 <= 255
  EXPECT_EQ(max_exact_ranks(DataType::kFloat16, ReduceOp::kProd), 15);  // 32768 <= 65504
  EXPECT_EQ(max_exact_ranks(DataType::kBfloat16, ReduceOp::kProd), 127);
  EXPECT_EQ(max_exact_ranks(DataType::kFloat32, ReduceOp::kProd), 127);
  for (DataType t : kTypes) {
    const int n = max_exact_ranks(t, ReduceOp::kProd);
    for (size_t i = 0; i < 200; ++i) {
      const double v =
          *expected_value(Collective::kAllReduce, ReduceOp::kProd, t, 0, n, 0, i, 200, 6);
      int e = 0;
      EXPECT_EQ(std::frexp(v, &e), 0.5) << "not a power of two: " << v;
      EXPECT_LE(v, std::ldexp(1.0, n)) << to_string(t);
    }
  }
}

TEST(CollectiveDataExactness, MinAndMaxAreExactAtAnyRankCount) {
  for (DataType t : kTypes) {
    EXPECT_EQ(max_exact_ranks(t, ReduceOp::kMin), INT_MAX);
    EXPECT_EQ(max_exact_ranks(t, ReduceOp::kMax), INT_MAX);
  }
}

TEST(CollectiveDataExactness, AvgToleranceIsZeroWhereNothingDivides) {
  EXPECT_EQ(values::check_tolerance(Collective::kAllReduce, ReduceOp::kSum, DataType::kFloat16, 8),
            0);
  EXPECT_EQ(values::check_tolerance(Collective::kAllReduce, ReduceOp::kAvg, DataType::kInt32, 8),
            0);
  EXPECT_EQ(values::check_tolerance(Collective::kBroadcast, ReduceOp::kAvg, DataType::kFloat32, 8),
            0);
  EXPECT_DOUBLE_EQ(
      values::check_tolerance(Collective::kAllReduce, ReduceOp::kAvg, DataType::kFloat16, 8), 1e-2);
  EXPECT_DOUBLE_EQ(
      values::check_tolerance(Collective::kAllReduce, ReduceOp::kAvg, DataType::kFloat32, 8), 1e-6);
  EXPECT_DOUBLE_EQ(
      values::check_tolerance(Collective::kReduce, ReduceOp::kAvg, DataType::kBfloat16, 8),
      10.0 / 256);
}

TEST(CollectiveDataExactness, AvgToleranceCoversNcclsPremultipliedSumInEveryOrder) {
  // NCCL's float avg: fl(1/n) in T, each x_r * fl(1/n) rounded, the products added in the
  // order the algorithm chooses (ring from any rank, tree halves), each addition rounded.
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32}) {
    const int bits = significand_bits(t);
    const int most = std::min(max_exact_ranks(t, ReduceOp::kAvg), 14);
    for (int n = 1; n <= most; ++n) {
      const double tol = values::check_tolerance(Collective::kAllReduce, ReduceOp::kAvg, t, n);
      const double scale = round_to_bits(1.0 / n, bits);
      for (size_t i = 0; i < 300; ++i) {
        std::vector<double> terms;
        for (int r = 0; r < n; ++r) {
          terms.push_back(round_to_bits(input_value(r, i, 5, ReduceOp::kAvg) * scale, bits));
        }
        const double want =
            *expected_value(Collective::kAllReduce, ReduceOp::kAvg, t, 0, n, 0, i, 300, 5);
        for (int start = 0; start < n; ++start) {  // ring order from each rank
          double acc = terms[start];
          for (int k = 1; k < n; ++k)
            acc = round_to_bits(acc + terms[(start + k) % n], bits);
          ASSERT_TRUE(values::output_matches(acc, want, tol))
              << to_string(t) << " n=" << n << " got " << acc << " want " << want;
        }
        std::vector<double> level = terms;  // pairwise, as a tree adds
        while (level.size() > 1) {
          std::vector<double> next;
          for (size_t k = 0; k + 1 < level.size(); k += 2) {
            next.push_back(round_to_bits(level[k] + level[k + 1], bits));
          }
          if (level.size() % 2) next.push_back(level.back());
          level = next;
        }
        ASSERT_TRUE(values::output_matches(level[0], want, tol)) << to_string(t) << " n=" << n;
      }
    }
  }
}

TEST(CollectiveDataExactness, AvgToleranceStaysFarBelowWhatAStaleResultIsOffBy) {
  // A stale avg is off by at least 1 on a value of at most 7: the tolerance must stay under 1/7.
  EXPECT_EQ(max_exact_ranks(DataType::kBfloat16, ReduceOp::kAvg), 14);
  EXPECT_EQ(max_exact_ranks(DataType::kFloat16, ReduceOp::kAvg), 126);
  EXPECT_EQ(max_exact_ranks(DataType::kInt8, ReduceOp::kAvg), 18);
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32}) {
    const int n = max_exact_ranks(t, ReduceOp::kAvg);
    EXPECT_LE(values::check_tolerance(Collective::kAllReduce, ReduceOp::kAvg, t, n), 1.0 / 16);
    EXPECT_GT(values::check_tolerance(Collective::kAllReduce, ReduceOp::kAvg, t, n + 1), 1.0 / 16);
  }
}

TEST(CollectiveDataExactness, NotANumberNeverMatches) {
  EXPECT_FALSE(values::output_matches(NAN, 3, 0));
  EXPECT_FALSE(values::output_matches(NAN, 3, 1e-2));
  EXPECT_TRUE(values::output_matches(3.01, 3, 1e-2));
  EXPECT_FALSE(values::output_matches(3.04, 3, 1e-2));
}
