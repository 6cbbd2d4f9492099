// `trace --inject-fault`: makes one rank of a trace run misbehave in one of the ways real jobs
// hang, so that an engineer (and commtool's own tests) can see that commtool catches it, names
// the rank and the operation, and leaves nothing behind. A fire drill, never on by default.
//
//   die:R:S       rank R is SIGKILLed right after enqueueing operation #S (mid-collective)
//   no-join:R     rank R never creates the NCCL communicator
//   stall:R:S     rank R's stream stalls ahead of operation #S's input, far past --timeout
//                 (work queued before the collective that does not finish)
//   mismatch:R:S  rank R enqueues operation #S with half the count of the others
//
// S counts every operation of the run from 0, warm-up included, on every rank alike.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace commtool::tracing {

enum class FaultKind { kDie, kNoJoin, kStall, kMismatch };

struct Fault {
  FaultKind kind = FaultKind::kDie;
  int rank = 0;
  uint64_t seq = 0;  // unused by no-join

  // Whether this fault strikes `rank` at operation `seq`.
  bool at(FaultKind k, int r, uint64_t s) const { return kind == k && rank == r && seq == s; }
};

// Throws usage_error naming the text and the accepted forms.
Fault parse_fault(const std::string& text);
std::string to_string(const Fault& f);  // the form parse_fault reads

nlohmann::json to_json(const std::optional<Fault>& f);  // null when none
std::optional<Fault> fault_from_json(const nlohmann::json& j);

}  // namespace commtool::tracing
