// One finding of `commtool diagnose ep`, shaped as topo's (probes/topo/classify.hpp: Finding): a
// stable code for scripts, a severity, what it means in one line, the figures it rests on, and
// what to do next. The text report prints "  WARNING [code] message" or "  note [code] message",
// the evidence and "what to do:" under it, as topo does; JSON carries the five members, the next
// step as "advice" (topo's name). Every finding has a next step (tests/test_ep_report.cpp).
#pragma once

#include <string>

namespace commtool::reports {

enum class EpSeverity { kNote, kWarning };

inline const char* to_string(EpSeverity s) {
  return s == EpSeverity::kWarning ? "warning" : "note";
}

struct EpFinding {
  std::string code;  // "rank-imbalance", "hot-experts", "skew-cost", ...: stable, for scripts
  EpSeverity severity = EpSeverity::kNote;
  std::string message;   // what it means, in one line
  std::string evidence;  // the figures it rests on
  std::string advice;    // what to do next, for this evidence: never empty
};

}  // namespace commtool::reports
