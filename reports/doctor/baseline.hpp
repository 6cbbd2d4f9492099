// A good node's own figures as the bar: `doctor --baseline FILE` reads a doctor --json of such a
// node and sets each figure measured now (copies per GPU and direction, the all-reduce's bus
// bandwidth) beside the same one there, same GPU, same area, same size and ranks. A figure under
// kBaselineLowShare of its baseline is a WARN; a figure the baseline lacks is left as it is.
#pragma once

#include <string>
#include <vector>

#include "reports/doctor/doctor_checks.hpp"

namespace commtool::reports::doctor {

// 10% under a good node's own figure is past the run-to-run spread of copies and all-reduces on
// one machine (under 5% between rounds on the H100, PERFORMANCE.md).
inline constexpr double kBaselineLowShare = 0.9;

struct BaselineFigure {
  int gpu = -1;
  std::string area;
  Figure figure;
};

struct Baseline {
  std::string source;  // the file
  std::string host;
  std::string started_at;
  std::vector<BaselineFigure> figures;
};

// The figures of a doctor --json document. Throws Error(kUsage) naming `source` and the field:
// "good.json: not a doctor --json document (command 'probe')", "good.json: schema_version 2:
// this commtool reads 1", "good.json: checks[3].figure.gbps: not a number".
Baseline parse_baseline(const std::string& text, const std::string& source);
Baseline load_baseline(const std::string& path);

// Sets each check with a figure beside its baseline: the evidence says the share, a LOW one is
// raised to WARN; then the verdict's overall is the worst again.
void compare_with_baseline(Verdict& verdict, const Baseline& baseline);

}  // namespace commtool::reports::doctor
