#include "tracing/collectives/collective_data.hpp"

#include <algorithm>
#include <cctype>
#include <climits>

#include "tracing/collectives/collective_values.cuh"

namespace commtool::tracing {

namespace {

std::string lowercase(const std::string& s) {
  std::string out;
  for (char c : s)
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// What bounds the exactness of a type: every integer 0..largest_exact is representable, 2^k
// for k <= max_power_of_two too, and unit_roundoff is 2^-precision (0 for integers).
struct Exactness {
  double largest_exact;
  int max_power_of_two;
  double unit_roundoff;
};

Exactness exactness(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return {127, 6, 0};
    case DataType::kUint8:
      return {255, 7, 0};
    case DataType::kInt32:
      return {2147483647.0, 30, 0};
    case DataType::kUint32:
      return {4294967295.0, 31, 0};
    case DataType::kInt64:
      return {9223372036854775807.0, 62, 0};
    case DataType::kUint64:
      return {18446744073709551615.0, 63, 0};
    case DataType::kFloat16:  // 11-bit significand; largest finite 65504 < 2^16
      return {2048, 15, 1.0 / 2048};
    case DataType::kBfloat16:  // 8-bit significand, float's exponent range
      return {256, 127, 1.0 / 256};
    case DataType::kFloat32:
      return {16777216.0, 127, 1.0 / 16777216};
    case DataType::kFloat64:
      return {9007199254740992.0, 1023, 1.0 / 9007199254740992.0};
  }
  return {0, 0, 0};
}

int clamp_to_int(double n) {
  return n >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(n);
}

}  // namespace

std::optional<DataType> parse_data_type(const std::string& name) {
  const std::string key = lowercase(name);
  if (key == "int8") return DataType::kInt8;
  if (key == "uint8") return DataType::kUint8;
  if (key == "int32") return DataType::kInt32;
  if (key == "uint32") return DataType::kUint32;
  if (key == "int64") return DataType::kInt64;
  if (key == "uint64") return DataType::kUint64;
  if (key == "half" || key == "float16") return DataType::kFloat16;
  if (key == "float" || key == "float32") return DataType::kFloat32;
  if (key == "double" || key == "float64") return DataType::kFloat64;
  if (key == "bfloat16" || key == "bf16") return DataType::kBfloat16;
  return std::nullopt;
}

std::string to_string(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return "int8";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kUint32:
      return "uint32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUint64:
      return "uint64";
    case DataType::kFloat16:
      return "half";
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat64:
      return "double";
    case DataType::kBfloat16:
      return "bfloat16";
  }
  return "?";
}

size_t type_size(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 1;
}

std::optional<ReduceOp> parse_reduce_op(const std::string& name) {
  const std::string key = lowercase(name);
  if (key == "sum") return ReduceOp::kSum;
  if (key == "prod") return ReduceOp::kProd;
  if (key == "min") return ReduceOp::kMin;
  if (key == "max") return ReduceOp::kMax;
  if (key == "avg") return ReduceOp::kAvg;
  return std::nullopt;
}

std::string to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "?";
}

// nccl-tests' convention: `bytes` is the larger buffer; where a collective splits its data by
// rank, the element count is rounded down to a multiple of n so every rank gets equal parts.
BufferLayout buffer_layout(Collective c, DataType t, uint64_t bytes, int nranks) {
  BufferLayout l;
  if (nranks < 1) return l;
  const auto n = static_cast<size_t>(nranks);
  const size_t elements = static_cast<size_t>(bytes / type_size(t));
  const size_t whole = elements / n * n;
  switch (c) {
    case Collective::kAllGather:
      l.recv_elements = whole;
      l.send_elements = whole / n;
      l.count = l.send_elements;
      break;
    case Collective::kReduceScatter:
      l.send_elements = whole;
      l.recv_elements = whole / n;
      l.count = l.recv_elements;
      break;
    case Collective::kAllToAll:
      l.send_elements = l.recv_elements = whole;
      l.count = whole / n;
      break;
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      l.send_elements = l.recv_elements = l.count = elements;
      break;
  }
  return l;
}

int max_exact_ranks(DataType t, ReduceOp op) {
  const Exactness e = exactness(t);
  // Inputs are at most 7 (collective_values.cuh), and every partial sum is at most the total.
  const int sum_ranks = clamp_to_int(e.largest_exact / 7);
  switch (op) {
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return INT_MAX;
    case ReduceOp::kProd:
      return e.max_power_of_two;
    case ReduceOp::kSum:
      return sum_ranks;
    case ReduceOp::kAvg:
      if (e.unit_roundoff == 0) return sum_ranks;
      // check_tolerance is (n + 2) unit roundoffs; keep it at most 1/16.
      return std::min(sum_ranks, clamp_to_int(1.0 / (16 * e.unit_roundoff)) - 2);
  }
  return 0;
}

double input_value(int rank, size_t index, uint32_t seed, ReduceOp op) {
  return values::input_int(rank, index, seed, op);
}

std::optional<double> expected_value(Collective c, ReduceOp op, DataType t, int rank, int nranks,
                                     int root, size_t index, size_t count, uint32_t seed) {
  values::OutputSpec s;
  s.collective = c;
  s.op = op;
  s.integer_type = values::is_integer(t);
  s.rank = rank;
  s.nranks = nranks;
  s.root = root;
  s.count = count;
  s.seed = seed;
  double v = 0;
  if (!values::expected_output(s, index, &v)) return std::nullopt;
  return v;
}

}  // namespace commtool::tracing
