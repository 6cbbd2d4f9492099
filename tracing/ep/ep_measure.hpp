// The launcher side of `commtool diagnose ep`'s measurement: one worker per GPU runs each
// scenario's dispatch (its rank x rank byte matrix) and combine (the matrix going back) as
// grouped ncclSend/ncclRecv, every byte checked (tracing/ep/ep_exchange.hpp), and the times come
// back per operation and rank. With `trace`, a second, traced pass follows (the same turns
// under CUPTI, after the timed pass so that the timed figures carry no tracing cost) and each
// rank's records come back with the exchange each operation mark belongs to. What the matrices
// are and what the times mean is the caller's (tracing/ep/ep_routing.hpp makes them,
// reports/ep/ep_report.hpp and reports/ep/ep_split.hpp judge them). Never touches CUDA.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/nccl/communicator.hpp"
#include "probes/base/workers/placement.hpp"
#include "tracing/cupti/records.hpp"

namespace commtool::tracing {

// The most ranks an exchange takes (its segment table travels as a kernel argument).
inline constexpr int kMaxExchangeRanks = 64;

using ByteMatrix = std::vector<std::vector<uint64_t>>;  // [source rank][destination rank]

// What a scenario's traffic is: the routing as given, the same bytes spread evenly, and the
// routing after replicating the hottest experts. Named in that order in every report.
enum class EpScenarioKind { kRouted, kUniform, kReplicated };
enum class EpPhase { kDispatch, kCombine };

const char* to_string(EpScenarioKind k);  // "routed", "uniform", "replicated"
const char* to_string(EpPhase p);         // "dispatch", "combine"
// The names above back into kinds (task JSON and worker results); nullopt for any other name.
std::optional<EpScenarioKind> parse_ep_scenario(const std::string& name);
std::optional<EpPhase> parse_ep_phase(const std::string& name);

struct EpScenario {
  EpScenarioKind kind = EpScenarioKind::kRouted;
  ByteMatrix dispatch;  // bytes each rank sends each rank
  ByteMatrix combine;   // and what comes back (usually the transpose, in the combine dtype)
};

struct EpMeasureRequest {
  std::string executable = "/proc/self/exe";
  std::vector<EpScenario> scenarios;
  int iters = 20;
  int warmup = 5;
  std::vector<int> devices;  // GPU of each rank, repeats allowed (ranks sharing a GPU); empty: all
  double timeout_s = 60;
  nccl::CommMode comm = nccl::CommMode::kBlocking;
  bool trace = false;  // add a pass under CUPTI (EpMeasurement::traces)
};

struct PhaseTimes {
  std::vector<double> slowest_us;            // per measured operation: its slowest rank's time
  std::vector<std::vector<double>> rank_us;  // [rank][operation]
  // The host's enqueue of each operation (host clock, untraced), [rank][operation].
  std::vector<std::vector<double>> rank_enqueue_us;
};

struct EpScenarioTimes {
  EpScenarioKind kind = EpScenarioKind::kRouted;
  PhaseTimes dispatch, combine;
};

// One exchange of the traced pass on one rank: its operation mark's seq in that rank's
// records, which scenario and phase it was, and its CUDA-event time (traced).
struct EpTracedExchange {
  uint64_t seq = 0;
  EpScenarioKind scenario = EpScenarioKind::kRouted;
  EpPhase phase = EpPhase::kDispatch;
  double time_us = 0;
};

struct EpRankTrace {
  int rank = 0;
  RecordSet records;  // CUPTI's records with the harness's operation marks
  std::vector<EpTracedExchange> exchanges;
  std::string clock_note;  // how CUPTI's and the host's clocks were joined
};

struct EpMeasurement {
  int nranks = 0;
  workers::PlacementSummary placement;  // ranks sharing a GPU: times of time-sliced processes
  nccl::CommMode comm = nccl::CommMode::kBlocking;
  std::vector<std::string> gpus;  // per rank: "GPU 0 (0000:00:06.0, NVIDIA H200)"
  std::string nccl_version, nccl_library;
  std::vector<EpScenarioTimes> scenarios;
  std::vector<EpRankTrace> traces;  // by rank; empty unless the request traced
};

// The form a rank's trace travels in from worker to launcher (records in record_io's text).
nlohmann::json to_json(const EpRankTrace& trace);
// Throws Error(kUsage) naming the field when `j` is not such a trace.
EpRankTrace ep_rank_trace_from_json(const nlohmann::json& j);

// How many ranks a run over `devices` (the GPU of each rank; empty: one rank per GPU) has: the
// list's length, known without the machine, else the machine's GPUs (Error(kEnvironment) with
// no GPU). Throws BadValue (devices) above kMaxExchangeRanks.
int ep_rank_count(const std::vector<int>& devices);

// Every matrix must be nranks x nranks for nranks = ep_rank_count(devices). Throws the
// workers' errors: wrong data (kVerification, naming rank, scenario, phase and operation), a
// stuck exchange (kTimeout), no GPU or NCCL (kEnvironment).
EpMeasurement run_ep_measurement(const EpMeasureRequest& request);

}  // namespace commtool::tracing
