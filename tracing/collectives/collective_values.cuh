// The value arithmetic behind collective_data: what each rank sends and what each receive
// element must hold. Plain inline functions, __host__ __device__ under nvcc, so the fill and
// check kernels compute exactly what the CPU unit tests pin.
//
// The scheme, per element i of rank r's send buffer in the iteration with seed s:
//   sum, min, max, avg:  v = b(r, i) + d(i, s)   b in 0..3 from a hash of (r, i),
//                                                d = (hash(i) + s) mod 5, common to all ranks
//   prod:                v = 1 or 2              rank 0 alternates 1, 2 with s; rank r > 0 is 2
//                                                only where rank 0 is 2 and a hash of (r, i) says
// Why this shape: from seed s to s + 1, d moves by +1 or -4 at every element and every rank
// sees the same move, so a sum, min, max or avg over any set of ranks moves too, and so does
// every copied value: an output left over from the previous operation is wrong at every
// element. For prod every factor moves the same way as rank 0's, so the product doubles or
// halves at every element. b makes ranks differ, so data from the wrong rank is caught at
// about 3 elements in 4. Values repeat every 5 seeds (prod: every 2); only neighbours matter.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

#include "probes/base/cuda/pattern.hpp"  // COMMTOOL_HD and the project's hash, pattern_word
#include "tracing/collectives/collective_data.hpp"

namespace commtool::tracing::values {

// Salt of the per-element hash; above INT_MAX, so never the salt of a rank's hash.
constexpr uint32_t kElementSalt = 0x9e3779b9u;

COMMTOOL_HD inline uint32_t rank_hash(int rank, uint64_t index) {
  return cuda::pattern_word(index, static_cast<uint32_t>(rank));
}

COMMTOOL_HD inline uint32_t element_hash(uint64_t index) {
  return cuda::pattern_word(index, kElementSalt);
}

// The send value of `rank` at `index` (see the file comment): 0..7, or 1..2 for prod.
COMMTOOL_HD inline int input_int(int rank, uint64_t index, uint32_t seed, ReduceOp op) {
  const uint32_t e = element_hash(index);
  const uint32_t r = rank_hash(rank, index);
  if (op == ReduceOp::kProd) {
    // e + seed wraps modulo 2^32, an even number, so the parity still alternates.
    const bool rank0_two = ((e + seed) & 1u) != 0;
    if (rank == 0) return rank0_two ? 2 : 1;
    return rank0_two && (r & 4u) != 0 ? 2 : 1;
  }
  const uint32_t shift = (e % 5u + seed % 5u) % 5u;
  return static_cast<int>((r & 3u) + shift);
}

COMMTOOL_HD inline bool is_integer(DataType t) {
  return t != DataType::kFloat16 && t != DataType::kBfloat16 && t != DataType::kFloat32 &&
         t != DataType::kFloat64;
}

COMMTOOL_HD inline bool reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduce || c == Collective::kReduceScatter;
}

// op over the send values of all ranks at `index`, as NCCL must produce it. Exact (a small
// integer, or a power of two for prod) while nranks <= max_exact_ranks. avg: integer types
// divide the sum with truncation, as NCCL's ncclAvg does for them (FuncSumPostDiv: sum in T,
// then x / n); floating types get the exact quotient, which NCCL only approximates
// (check_tolerance).
COMMTOOL_HD inline double reduce_inputs(ReduceOp op, bool integer_type, int nranks, uint64_t index,
                                        uint32_t seed) {
  double acc = input_int(0, index, seed, op);
  for (int r = 1; r < nranks; ++r) {
    const double v = input_int(r, index, seed, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case ReduceOp::kMax:
        acc = v > acc ? v : acc;
        break;
    }
  }
  if (op != ReduceOp::kAvg) return acc;
  if (integer_type) return static_cast<double>(static_cast<long long>(acc) / nranks);
  return acc / nranks;
}

// Everything a receive element's expected value depends on but its index.
struct OutputSpec {
  Collective collective = Collective::kAllReduce;
  ReduceOp op = ReduceOp::kSum;
  bool integer_type = false;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  size_t count = 0;  // the count argument of the NCCL call
  uint32_t seed = 0;
};

// Elements of the receive buffer the collective defines (its recv_elements).
COMMTOOL_HD inline size_t recv_extent(Collective c, int nranks, size_t count) {
  if (c == Collective::kAllGather || c == Collective::kAllToAll) {
    return count * static_cast<size_t>(nranks);
  }
  return count;
}

// Sets *value to what receive element `index` must hold after the collective; false where
// the collective leaves it undefined (reduce off the root, or beyond the receive buffer).
COMMTOOL_HD inline bool expected_output(const OutputSpec& s, size_t index, double* value) {
  if (s.nranks < 1 || s.rank < 0 || s.rank >= s.nranks) return false;
  if (index >= recv_extent(s.collective, s.nranks, s.count)) return false;
  const auto n = static_cast<size_t>(s.nranks);
  const auto rank = static_cast<size_t>(s.rank);
  switch (s.collective) {
    case Collective::kAllReduce:
      *value = reduce_inputs(s.op, s.integer_type, s.nranks, index, s.seed);
      return true;
    case Collective::kReduce:
      if (s.rank != s.root) return false;
      *value = reduce_inputs(s.op, s.integer_type, s.nranks, index, s.seed);
      return true;
    case Collective::kReduceScatter:
      *value = reduce_inputs(s.op, s.integer_type, s.nranks, rank * s.count + index, s.seed);
      return true;
    case Collective::kBroadcast:
      if (s.root < 0 || s.root >= s.nranks) return false;
      *value = input_int(s.root, index, s.seed, s.op);
      return true;
    case Collective::kAllGather:  // slot p holds rank p's whole send buffer
      *value = input_int(static_cast<int>(index / s.count), index % s.count, s.seed, s.op);
      return true;
    case Collective::kAllToAll:  // slot p holds what rank p sent to this rank
      *value = input_int(static_cast<int>(index / s.count), rank * s.count + index % s.count,
                         s.seed, s.op);
      return true;
    case Collective::kSendRecv:  // the ring: each rank receives from the one before it
      *value = input_int(static_cast<int>((rank + n - 1) % n), index, s.seed, s.op);
      return true;
  }
  return false;
}

// The relative error the check allows. Zero (exact equality) except for avg of a floating type
// in a reducing collective: NCCL computes ncclAvg there as a premultiplied sum, sum of
// x_r * fl(1/n) in T, each product and each addition rounded. With non-negative inputs every
// partial sum is at most the result, so the error is at most (n + 1) unit roundoffs of T
// (first order; one more unit covers the rest): 2^-11 half, 2^-8 bfloat16, 2^-24 float,
// 2^-53 double. The tolerance is that bound, and at least 1e-2 for 16-bit floats, 1e-6 otherwise.
COMMTOOL_HD inline double check_tolerance(Collective c, ReduceOp op, DataType t, int nranks) {
  if (op != ReduceOp::kAvg || !reduces(c) || is_integer(t)) return 0.0;
  double unit = 0, least = 1e-6;
  switch (t) {
    case DataType::kFloat16:
      unit = 1.0 / 2048, least = 1e-2;
      break;
    case DataType::kBfloat16:
      unit = 1.0 / 256, least = 1e-2;
      break;
    case DataType::kFloat32:
      unit = 1.0 / 16777216;
      break;
    default:
      unit = 1.0 / 9007199254740992.0;
      break;
  }
  const double bound = (nranks + 2) * unit;
  return bound > least ? bound : least;
}

// NaN never matches: both comparisons are false for it.
COMMTOOL_HD inline bool output_matches(double got, double expected, double rel_tolerance) {
  if (rel_tolerance == 0.0) return got == expected;
  const double diff = got > expected ? got - expected : expected - got;
  return diff <= rel_tolerance * (expected < 0 ? -expected : expected);
}

}  // namespace commtool::tracing::values
