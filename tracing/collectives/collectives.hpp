// The collectives commtool runs and the arithmetic nccl-tests uses to report them
// (nccl-tests doc/PERFORMANCE.md): algbw = bytes / time; busbw = algbw * factor, where the
// factor makes busbw comparable with the hardware's link speed whatever the rank count.
#pragma once

#include <optional>
#include <string>

namespace commtool::tracing {

enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kSendRecv
};

// "allreduce", "all_reduce" and "AllReduce" all name kAllReduce; nullopt for anything else.
std::optional<Collective> parse_collective(const std::string& name);
std::string to_string(Collective c);  // "allreduce"

// nccl-tests' bus bandwidth factor for n ranks: allreduce 2(n-1)/n; allgather, reducescatter
// and alltoall (n-1)/n; broadcast, reduce and sendrecv 1. n must be at least 1.
double busbw_factor(Collective c, int ranks);

// GB/s (1e9 bytes/s) from the bytes nccl-tests counts per rank (the larger of send and receive
// buffer) and the time of one operation in microseconds. 0 when time_us <= 0.
double algbw_gbps(double bytes, double time_us);
double busbw_gbps(Collective c, int ranks, double bytes, double time_us);

}  // namespace commtool::tracing
