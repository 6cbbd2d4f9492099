// What a probe measured: plain data for reports. Knows nothing about printing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"

namespace commtool::probe {

enum class Engine { kCopyEngine, kSm };
std::string to_string(Engine e);  // "CE", "SM"

inline constexpr int kHost = -1;  // an endpoint that is host memory, not a GPU

struct Measurement {
  std::string probe;  // "h2d", "p2p", "ipc", "latency"
  std::string what;   // "H2D", "D2H", "H2D while D2H", "write", "round trip", ...
  Engine engine = Engine::kCopyEngine;
  int src = kHost;  // GPU index, or kHost
  int dst = kHost;
  bool bidirectional = false;   // measured while the reverse direction ran too
  uint64_t bytes = 0;           // per copy
  int iters = 0;                // copies per timed batch
  std::string unit;             // "GB/s" (1e9 B/s, bytes counted once) or "us"
  std::vector<double> samples;  // one per timed batch (repeat)
  measure::Summary summary;
  double expected = 0;         // what the link should give, same unit; 0 when unknown
  std::string expected_basis;  // "PCIe Gen5 x16 payload", "NVLink4 x18"
  bool verified = false;       // every batch's data checked and right
  // For IPC: the worker ranks at both ends (several ranks may share a GPU in tests); -1 else.
  int src_rank = -1;
  int dst_rank = -1;
};

}  // namespace commtool::probe

#include <nlohmann/json_fwd.hpp>

namespace commtool::probe {

// A verified measurement of `samples`, summarised: every probe builds its results with this
// (the probes throw before returning anything unverified).
Measurement make_measurement(std::string probe, std::string what, Engine engine, int src, int dst,
                             bool bidirectional, uint64_t bytes, int iters, std::string unit,
                             std::vector<double> samples);

// How a Measurement crosses from a worker to the launcher, and how --json shows it.
void to_json(nlohmann::json& j, const Measurement& m);
void from_json(const nlohmann::json& j, Measurement& m);

// The judgement printed beside a figure: its share of what the link should give.
struct Verdict {
  double percent = 0;  // of expected; 0 when expected is unknown
  bool low = false;    // under kLowShare of the expected rate
  bool above = false;  // over kAboveShare: the expectation or the measurement is wrong
  // Bidirectional SM copies are shown but not judged: the two copy kernels share the SMs and
  // their memory-level parallelism, so the figure measures the kernels as much as the link
  // (on the H200 reference machine each direction reaches ~60% with SM kernels and 82-90%
  // with the copy engines, on a healthy link).
  bool judged = false;
};

// A healthy copy engine reaches ~95-97% of the PCIe payload rate (55.5 of 57.2 GB/s on the
// H200 reference machine) and NVLink copies ~87% of the link's data rate (390 of 450 GB/s
// published for H100): 75% leaves room for platform variation and still catches a link at
// half width or a slot at the wrong generation.
inline constexpr double kLowShare = 0.75;
// Above 102% of a spec rate means something is off (caching, a wrong link model).
inline constexpr double kAboveShare = 1.02;

Verdict judge(const Measurement& m);

}  // namespace commtool::probe
