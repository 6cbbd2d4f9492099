// Renderings of a probe run: tables and matrices for people, one JSON document, CSV rows.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "probes/bandwidth/probe_plan.hpp"

namespace commtool::reports {

inline constexpr int kProbeSchemaVersion = 1;

std::string render_probe_text(const probe::ProbeReport& report);
nlohmann::json probe_to_json(const probe::ProbeReport& report);
std::string render_probe_csv(const probe::ProbeReport& report);

}  // namespace commtool::reports
