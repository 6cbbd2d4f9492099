// doctor's judgement: the evidence of tracing/doctor turned into checks, each a PASS, WARN or
// FAIL with the values it rests on and the next step, or "not available" with the reason.
// Pure: the tests give it evidence built from fixtures (fake NVML answers, real kernel-log
// lines, sysfs captures).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/health/gpu_counters.hpp"
#include "probes/health/kernel_log.hpp"
#include "probes/health/sysfs_health.hpp"
#include "probes/health/thresholds.hpp"
#include "tracing/doctor/doctor_run.hpp"

namespace commtool::reports::doctor {

// In order of weight; kUnavailable (a counter this GPU or this user cannot read) never passes.
enum class Severity { kPass, kUnavailable, kWarn, kFail };
const char* to_string(Severity s);  // "PASS", "n/a", "WARN", "FAIL"

// A measured figure a check rests on, for a baseline to be compared with (baseline.hpp).
struct Figure {
  double value = 0;    // GB/s
  uint64_t bytes = 0;  // per copy, or the all-reduce's size
  int ranks = 0;       // the all-reduce's; 0 for a copy
};

struct Check {
  std::string subject;  // "GPU0 0000:3b:00.0", "node"
  int gpu = -1;         // the GPU's index, -1 for the node
  std::string area;     // "Xid", "ECC", "memory repair", "PCIe replay", "NVLink", ...
  Severity severity = Severity::kPass;
  std::string evidence;          // the values read, and where from
  std::string advice;            // what to do (FAIL, WARN; for n/a what would let commtool read it)
  std::optional<Figure> figure;  // a measured figure, when the check rests on one
};

struct Verdict {
  Severity overall = Severity::kPass;  // the worst check's; kFail when there is no GPU
  std::vector<Check> checks;           // by subject (the node first, then each GPU), then area
  std::vector<std::string> skipped;    // "P2P: only one GPU", with why
  int count(Severity s) const;
};

// The rules, one family each, exposed for the tests.
std::vector<Check> judge_kernel_log(const commtool::doctor::Evidence& e);
std::vector<Check> judge_counters(const topo::Gpu& gpu, const health::GpuCounters& before,
                                  const health::GpuCounters* after, double window_s,
                                  const health::Thresholds& t);
std::vector<Check> judge_probe(const commtool::doctor::Evidence& e);
// The GPU beside its model's row of expected_figures.hpp: the PCIe link it can train at and its
// active NVLinks. `in_vm`: a VM that passes some GPUs hides the NVLinks of the others.
Check judge_model(const topo::Gpu& gpu, bool in_vm);
std::vector<Check> judge_allreduce(const commtool::doctor::Evidence& e);

// An RDMA port: WARN when it is not active or counts errors (t.rdma_port_errors_warn).
Check judge_rdma_port(const health::RdmaPort& port, const health::Thresholds& t);
// A device's PCIe AER totals: FAIL at a fatal error, WARN at a non-fatal one. `gpu`: the GPU it
// is, or nullptr for a NIC (the subject is then its bus id).
Check judge_aer(const health::AerCounts& aer, const topo::Gpu* gpu, const health::Thresholds& t);

// The IOMMU's treatment of a GPU's DMA (`type` from read_iommu_type): translated DMA is a WARN
// where the GPU talks to peers or NICs (`shares`: more than one GPU, or an RDMA NIC).
Check judge_iommu(const topo::Gpu& gpu, const std::string& type, bool shares);
// ACS P2P Request Redirect on the bridges above the GPUs and RDMA NICs (topo reads it): peer
// traffic sent up to the root complex; none when no GPU or NIC sits below a bridge.
std::optional<Check> judge_acs(const topo::Topology& t);

Verdict judge(const commtool::doctor::Evidence& e);

// The exit code: 0 every check passed (or could not be read), 6 a WARN, 7 a FAIL; 3 when there
// is no GPU to examine.
int exit_code(const commtool::doctor::Evidence& e, const Verdict& v);
inline constexpr int kExitWarn = 6;
inline constexpr int kExitFail = 7;
// The exit code of a verdict's worst severity: 7, 6, else 0. One node's and a job's alike.
int exit_code_of(Severity worst);

}  // namespace commtool::reports::doctor
