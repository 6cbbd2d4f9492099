// One finding of `commtool diagnose ep`, shaped as topo's (probes/topo/classify.hpp: Finding): a
// stable code for scripts, a severity, what it means in one line, and the figures it rests on.
// The text report prints "  WARNING [code] message" or "  note [code] message" and the evidence
// under it, as topo does; JSON carries the four members.
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
};

}  // namespace commtool::reports
