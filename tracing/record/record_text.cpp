#include "tracing/record/record_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "probes/base/error.hpp"
#include "tracing/crossrank/crossrank.hpp"

namespace commtool::record {

std::string op_label(const OpRef& op) {
  const std::string func = excerpt(op.func, 40);
  if (op.kind == nccl_profiler::OpKind::kP2p) {
    return fmt::format("{} {} {} (op {})", func, func == "Recv" ? "from" : "to", op.peer, op.index);
  }
  if (op.seq) return fmt::format("{} #{}", func, *op.seq);
  return fmt::format("{} op {}", func, op.index);
}

std::string rank_list(std::vector<int> ranks) {
  return crossrank::rank_set(std::move(ranks), 0);
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return crossrank::ranks_text(ranks, 0);
}

std::string comm_label(uint64_t comm, const std::string& name) {
  if (name.empty()) return fmt::format("{:016x}", comm);
  return fmt::format("{:016x} (\"{}\")", comm, excerpt(name, 60));
}

std::string seconds_text(double s) {
  return s >= 10 ? fmt::format("{:.0f} s", s) : fmt::format("{:.1f} s", s);
}

}  // namespace commtool::record
