// Renderings of a probe run: tables and matrices for people, one JSON document, CSV rows.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "probes/bandwidth/probe_cluster.hpp"
#include "probes/bandwidth/probe_plan.hpp"

namespace commtool::reports {

// 2: settings.repeats became settings.batches, and settings.warmup counts copies, not batches.
inline constexpr int kProbeSchemaVersion = 2;

std::string render_probe_text(const probe::ProbeReport& report);
nlohmann::json probe_to_json(const probe::ProbeReport& report);
std::string render_probe_csv(const probe::ProbeReport& report);

// `probe` under MPI: every node's figures side by side (probes/bandwidth/probe_cluster.hpp).
// The settings are the request every rank ran.
std::string render_probe_cluster_text(const probe::ProbeClusterView& view,
                                      const probe::ProbeRequest& settings);
nlohmann::json probe_cluster_to_json(const probe::ProbeClusterView& view,
                                     const probe::ProbeRequest& settings);
// The CSV of one machine with the node's host and measuring rank first on every row.
std::string render_probe_cluster_csv(const probe::ProbeClusterView& view);

// Pieces both renderings share.
std::string endpoint_name(int endpoint);                         // "host", "GPU3"
std::string verdict_text(const probe::Measurement& m);           // "ok", "LOW", ...
std::string figure_text(double value, const std::string& unit);  // 55.5 or 1.19
// "LOW h2d H2D host -> GPU0: ... is 41% of ... (basis)", or "" for a figure as expected.
std::string verdict_sentence(const probe::Measurement& m);
// What to do about a figure verdict_sentence names, for its probe and ends; "" for one as
// expected.
std::string verdict_advice(const probe::Measurement& m);
std::string csv_header();
std::string csv_row(const probe::Measurement& m);  // no newline
// Measurements as --json gives them: each with its share of the expected rate and verdict.
nlohmann::json measurements_to_json(const std::vector<probe::Measurement>& measurements);
nlohmann::json settings_to_json(const probe::ProbeRequest& settings);

}  // namespace commtool::reports
