// What the rule files of reports/doctor share: how a check is made and a counter is said.
// Internal to reports/doctor.
#pragma once

#include <fmt/format.h>

#include <string>

#include "reports/doctor/doctor_checks.hpp"

namespace commtool::reports::doctor::rules {

inline std::string subject_of(const topo::Gpu& g) {
  return fmt::format("GPU{} {}", g.index, g.bdf);
}

inline Check check(const topo::Gpu* g, std::string area, Severity s, std::string evidence,
                   std::string advice = {}) {
  return {g ? subject_of(*g) : "node", g ? g->index : -1, std::move(area), s,
          std::move(evidence),         std::move(advice), std::nullopt};
}

inline const topo::Gpu* gpu_at(const topo::Topology& t, int index) {
  for (const topo::Gpu& g : t.gpus)
    if (g.index == index) return &g;
  return nullptr;
}

inline std::string count_text(const health::Count& c) {
  return c.available ? std::to_string(c.value) : "n/a (" + c.why + ")";
}

}  // namespace commtool::reports::doctor::rules
