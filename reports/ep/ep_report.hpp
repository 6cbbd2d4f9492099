// What `commtool diagnose ep` prints: the routing and what it does to each rank (always), the
// measured dispatch and combine times of the routed, uniform and replicated traffic (unless
// --dry-run), and the diagnosis, each line with its evidence. diagnose_ep() is the pure part
// (figures and findings from plain structs, unit-tested); the renderers only format it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "reports/ep/ep_finding.hpp"
#include "reports/ep/ep_split.hpp"
#include "tracing/ep/ep_measure.hpp"
#include "tracing/ep/ep_plan.hpp"
#include "tracing/ep/ep_routing.hpp"

namespace commtool::reports {

using tracing::EpSetup;  // the plan: routing, placement, traffic (tracing/ep/ep_plan.hpp)

struct PhaseFigures {
  measure::Summary time_us;          // per operation at its slowest rank
  measure::Summary host_enqueue_us;  // host clock, per operation at its slowest rank
  uint64_t bytes = 0;                // every byte of the matrix, self-copies included
  uint64_t moved_bytes = 0;          // between ranks (the diagonal is a local copy)
  double effective_gbps = 0;         // moved_bytes / median time
  uint64_t bottleneck_bytes = 0;     // the most any rank receives from other ranks
  int bottleneck_rank = 0;
  double bottleneck_gbps = 0;          // bottleneck_bytes / median time: nccl-tests' alltoall busbw
                                       // when the exchange is uniform
  std::vector<double> rank_median_us;  // each rank's own median
  int slowest_rank = 0;                // the largest of those
};

struct ScenarioFigures {
  tracing::EpScenarioKind kind = tracing::EpScenarioKind::kRouted;
  PhaseFigures dispatch, combine;
};

struct EpDiagnosis {
  std::vector<ScenarioFigures> scenarios;  // empty for a dry run
  std::optional<EpSplit> split;            // --trace: the CUPTI split of every phase
  std::vector<EpFinding> findings;         // warnings and notes, each with its evidence
};

// Figures per measured scenario and phase, and the findings. `measured` is null for --dry-run.
EpDiagnosis diagnose_ep(const EpSetup& setup, const tracing::EpMeasurement* measured);

// The figures of one phase from its matrix and its times (exposed for tests).
PhaseFigures phase_figures(const tracing::ByteMatrix& matrix, const tracing::PhaseTimes& times);

std::string ep_text(const EpSetup& setup, const EpDiagnosis& diagnosis,
                    const tracing::EpMeasurement* measured);
std::string ep_json(const EpSetup& setup, const EpDiagnosis& diagnosis,
                    const tracing::EpMeasurement* measured);

// The dispatch matrix in MiB as an SVG heat map (rows send to columns).
std::string ep_heat_map_svg(const EpSetup& setup);

}  // namespace commtool::reports
