// `commtool diagnose ep --trace`: every traced exchange split on every rank into trace's
// intervals (tracing/trace/attribution.hpp: host enqueue, input wait, kernel, exposed wait, stream
// dependency), gathered per scenario and phase. Across ranks an exchange is as slow as its
// slowest rank, so each interval is taken at its slowest rank per exchange, then summarised
// over exchanges; per rank, medians. The ranks' records share one clock (CLOCK_MONOTONIC), so
// when each rank's kernel started is comparable across ranks: a rank that starts late holds
// every peer's kernel up. Pure: tests feed it synthetic records.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "reports/ep/ep_finding.hpp"
#include "tracing/ep/ep_measure.hpp"

namespace commtool::reports {

struct EpSplitRow {
  tracing::EpScenarioKind scenario = tracing::EpScenarioKind::kRouted;
  tracing::EpPhase phase = tracing::EpPhase::kDispatch;
  int exchanges = 0;  // traced exchanges (each on every rank)
  // Per exchange, the slowest rank's interval; over exchanges, the summary. An interval a rank's
  // records lack (see EpSplit::warnings) counts on the ranks that have it.
  measure::Summary host_enqueue_us;
  measure::Summary input_wait_us;
  measure::Summary kernel_us;
  measure::Summary exposed_wait_us;
  measure::Summary stream_dependency_us;
  measure::Summary start_spread_us;           // last rank's kernel start - first rank's
  measure::Summary traced_time_us;            // CUDA events, as the untraced times are taken
  measure::Summary untraced_host_enqueue_us;  // the timed pass's, slowest rank per exchange
  int launched_by_nccl_thread = 0;  // rank-exchanges whose GPU work NCCL launched from a thread
                                    // of its own (a non-blocking communicator's group)
  std::optional<double> traced_over_untraced;  // median traced / median untraced time
  // Per rank, medians over exchanges.
  std::vector<double> rank_host_enqueue_us;
  std::vector<double> rank_kernel_us;
  std::vector<double> rank_start_lag_us;  // its kernel start - the first rank's
};

struct EpSplit {
  std::vector<EpSplitRow> rows;          // in the order the phases were measured
  std::vector<std::string> clock_notes;  // distinct, over ranks
  std::vector<std::string> warnings;     // attribution's, with the rank
  uint64_t records = 0;                  // CUPTI records analysed, all ranks
};

// Null when the measurement was not traced.
std::optional<EpSplit> ep_split(const tracing::EpMeasurement& measured);

// The diagnosis lines the split supports for `scenario` (the routed traffic): a phase the host
// cannot enqueue as fast as the GPU runs it (the untraced enqueue against the traced kernel).
std::vector<EpFinding> ep_split_findings(const EpSplit& split, tracing::EpScenarioKind scenario);

// The traced pass as a Chrome/Perfetto trace (reports/trace/chrome_trace.hpp), each exchange's host
// spans named by its traffic and phase ("enqueue routed dispatch #42"). Empty of events when the
// measurement was not traced.
nlohmann::json ep_chrome_trace(const tracing::EpMeasurement& measured);

}  // namespace commtool::reports
