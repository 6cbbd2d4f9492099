// The launcher side of `commtool diagnose ep`'s measurement: one worker per GPU runs each
// scenario's dispatch (its rank x rank byte matrix) and combine (the matrix going back) as
// grouped ncclSend/ncclRecv, every byte checked (tracing/ep_exchange.hpp), and the times come
// back per operation and rank. What the matrices are and what the times mean is the caller's
// (tracing/ep_routing.hpp makes them, reports/ep_report.hpp judges them). Never touches CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commtool::tracing {

// The most ranks an exchange takes (its segment table travels as a kernel argument).
inline constexpr int kMaxExchangeRanks = 64;

using ByteMatrix = std::vector<std::vector<uint64_t>>;  // [source rank][destination rank]

struct EpScenario {
  std::string name;     // "routed", "uniform", "replicated", ...
  ByteMatrix dispatch;  // bytes each rank sends each rank
  ByteMatrix combine;   // and what comes back (usually the transpose, in the combine dtype)
};

struct EpMeasureRequest {
  std::string executable = "/proc/self/exe";
  std::vector<EpScenario> scenarios;
  int iters = 20;
  int warmup = 5;
  std::vector<int> devices;  // empty: all
  double timeout_s = 60;
};

struct PhaseTimes {
  std::vector<double> slowest_us;            // per measured operation: its slowest rank's time
  std::vector<std::vector<double>> rank_us;  // [rank][operation]
};

struct EpScenarioTimes {
  std::string name;
  PhaseTimes dispatch, combine;
};

struct EpMeasurement {
  int nranks = 0;
  std::vector<std::string> gpus;  // per rank: "GPU 0 (0000:00:06.0, NVIDIA H200)"
  std::string nccl_version, nccl_library;
  std::vector<EpScenarioTimes> scenarios;
};

// How many ranks a run over `devices` (empty: every GPU) has; Error(kEnvironment) with no GPU.
int ep_rank_count(const std::vector<int>& devices);

// Every matrix must be nranks x nranks for nranks = ep_rank_count(devices). Throws the
// workers' errors: wrong data (kVerification, naming rank, scenario, phase and operation), a
// stuck exchange (kTimeout), no GPU or NCCL (kEnvironment).
EpMeasurement run_ep_measurement(const EpMeasureRequest& request);

}  // namespace commtool::tracing
