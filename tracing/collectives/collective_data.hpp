// What goes into a collective and what must come out, for every collective, data type and
// reduction commtool runs: inputs are small integers chosen so that every reduction of up to
// hundreds of ranks is exact in every type (bfloat16 included), so a check can demand equality
// (avg, which divides, gets a tolerance). The same __host__ __device__ arithmetic fills and
// checks on the GPU and is unit-tested on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "tracing/collectives/collectives.hpp"

namespace commtool::tracing {

enum class DataType {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBfloat16
};
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

// nccl-tests' names (-d): int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, and
// the aliases float16 float32 float64 bf16. nullopt for anything else.
std::optional<DataType> parse_data_type(const std::string& name);
std::string to_string(DataType t);  // the nccl-tests name
size_t type_size(DataType t);
std::optional<ReduceOp> parse_reduce_op(const std::string& name);  // sum prod min max avg
std::string to_string(ReduceOp op);

// The layout of one rank's buffers for `bytes` (nccl-tests' size) at n ranks, in elements:
// send_count and recv_count are what the NCCL call is given per buffer (allgather: send =
// recv / n; reducescatter: recv = send / n; alltoall and sendrecv: equal). bytes is rounded
// down to a whole number of elements (times n where the collective splits by rank).
struct BufferLayout {
  size_t send_elements = 0;
  size_t recv_elements = 0;
  size_t count = 0;  // the count argument of the NCCL call
};
BufferLayout buffer_layout(Collective c, DataType t, uint64_t bytes, int nranks);

// The most ranks a reducing collective (allreduce, reduce, reducescatter) of type t with op can
// have and still be checked: the sum of n inputs (each at most 7) and the product (at most 2^n)
// must be exact in t, and an avg of a floating type must keep its tolerance under 1/16 so that
// a stale result (off by at least 1 of at most 7) still fails. Sum: int8 18, uint8 36,
// bfloat16 36, half 292; prod: int8 6, uint8 7, half 15, int32 30, uint32 31, int64 62,
// uint64 63, float and bfloat16 127, double 1023; avg: as sum for integers, bfloat16 14,
// half 126. min and max are exact for any n (INT_MAX). Other collectives only copy: any n.
int max_exact_ranks(DataType t, ReduceOp op);

// The value rank `rank` puts at element `index` of its send buffer in the iteration with seed
// `seed`, as a double (always a small integer).
double input_value(int rank, size_t index, uint32_t seed, ReduceOp op);

// What element `index` of `rank`'s receive buffer must hold after the collective (root used by
// broadcast and reduce); nullopt where the collective leaves it undefined (reduce on a non-root
// rank, or past the receive buffer). avg of an integer type is the sum divided by n with
// truncation, as NCCL computes it (sum in the type, then x / n); of a floating type, the exact
// quotient (launch_check_output allows NCCL's rounding).
std::optional<double> expected_value(Collective c, ReduceOp op, DataType t, int rank, int nranks,
                                     int root, size_t index, size_t count, uint32_t seed);

// Fills rank's send buffer (send_elements elements of type t) for iteration `seed`.
void launch_fill_input(cudaStream_t stream, void* send, size_t send_elements, DataType t,
                       ReduceOp op, int rank, uint32_t seed);

// Adds to *wrong the number of receive-buffer elements that differ from expected_value (avg of
// a floating type: beyond a relative 1e-2 for 16-bit floats, 1e-6 otherwise, widened to
// (n + 2) unit roundoffs of the type where NCCL's premultiplied sum can round that much:
// bfloat16 from 1 rank on (3.9% at 8 ranks), half from 19, float from 15). wrong: device or
// mapped memory.
void launch_check_output(cudaStream_t stream, const void* recv, const BufferLayout& layout,
                         Collective c, DataType t, ReduceOp op, int rank, int nranks, int root,
                         uint32_t seed, unsigned long long* wrong);

// Occupies `stream` for `ns` nanoseconds (%globaltimer), for --stream-scope.
void launch_gpu_sleep(cudaStream_t stream, uint64_t ns);

}  // namespace commtool::tracing
