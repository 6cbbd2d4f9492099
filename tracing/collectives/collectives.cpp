#include "tracing/collectives/collectives.hpp"

#include <algorithm>
#include <cctype>

namespace commtool::tracing {

std::optional<Collective> parse_collective(const std::string& name) {
  std::string key;
  for (char c : name) {
    if (c != '_' && c != '-') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (key == "allreduce") return Collective::kAllReduce;
  if (key == "allgather") return Collective::kAllGather;
  if (key == "reducescatter") return Collective::kReduceScatter;
  if (key == "broadcast") return Collective::kBroadcast;
  if (key == "reduce") return Collective::kReduce;
  if (key == "alltoall") return Collective::kAllToAll;
  if (key == "sendrecv") return Collective::kSendRecv;
  return std::nullopt;
}

std::string to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

double busbw_factor(Collective c, int ranks) {
  const double n = std::max(ranks, 1);
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double algbw_gbps(double bytes, double time_us) {
  return time_us > 0 ? bytes / (time_us * 1e-6) / 1e9 : 0.0;
}

double busbw_gbps(Collective c, int ranks, double bytes, double time_us) {
  return algbw_gbps(bytes, time_us) * busbw_factor(c, ranks);
}

}  // namespace commtool::tracing
