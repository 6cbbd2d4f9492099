// What `commtool diagnose ep` prints: the routing and what it does to each rank (always), the
// measured dispatch and combine times of the routed, uniform and replicated traffic (unless
// --dry-run), and the diagnosis, each line with its evidence. diagnose_ep() is the pure part
// (figures and findings from plain structs, unit-tested); the renderers only format it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "reports/ep/ep_split.hpp"
#include "tracing/ep/ep_measure.hpp"
#include "tracing/ep/ep_routing.hpp"

namespace commtool::reports {

// Everything about the routing, measured or not.
struct EpSetup {
  tracing::EpConfig config;
  std::string routing_source;    // "generated, skew zipf:1.2, seed 1" or "file x.json, layer 0"
  std::string placement_source;  // "contiguous" or the placement file
  tracing::Routing routing;
  tracing::Placement placement;
  tracing::EpTraffic traffic;
  tracing::EpMetrics metrics;
  int replicate = 0;  // --replicate H; 0: no what-if
  std::optional<tracing::ReplicationPlan> replication;
};

// Names of the measured scenarios, in the order they run.
inline constexpr const char* kRouted = "routed";
inline constexpr const char* kUniform = "uniform";
inline constexpr const char* kReplicated = "replicated";

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
  std::string name;
  PhaseFigures dispatch, combine;
};

struct EpDiagnosis {
  std::vector<ScenarioFigures> scenarios;  // empty for a dry run
  std::optional<EpSplit> split;            // --trace: the CUPTI split of every phase
  std::vector<std::string> findings;       // plain sentences with their evidence
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
