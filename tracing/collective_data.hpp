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

#include "tracing/collectives.hpp"

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

// The value rank `rank` puts at element `index` of its send buffer in the iteration with seed
// `seed`, as a double (always a small integer).
double input_value(int rank, size_t index, uint32_t seed, ReduceOp op);

// What element `index` of `rank`'s receive buffer must hold after the collective (root used by
// broadcast and reduce); nullopt where the collective leaves it undefined (reduce on a non-root
// rank).
std::optional<double> expected_value(Collective c, ReduceOp op, DataType t, int rank, int nranks,
                                     int root, size_t index, size_t count, uint32_t seed);

// Fills rank's send buffer (send_elements elements of type t) for iteration `seed`.
void launch_fill_input(cudaStream_t stream, void* send, size_t send_elements, DataType t,
                       ReduceOp op, int rank, uint32_t seed);

// Adds to *wrong the number of receive-buffer elements that differ from expected_value (avg:
// beyond a relative 1e-2 for 16-bit floats, 1e-6 otherwise). wrong: device or mapped memory.
void launch_check_output(cudaStream_t stream, const void* recv, const BufferLayout& layout,
                         Collective c, DataType t, ReduceOp op, int rank, int nranks, int root,
                         uint32_t seed, unsigned long long* wrong);

// Occupies `stream` for `ns` nanoseconds (%globaltimer), for --stream-scope.
void launch_gpu_sleep(cudaStream_t stream, uint64_t ns);

}  // namespace commtool::tracing
