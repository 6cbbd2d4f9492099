// The limits doctor judges the hardware's counters by, each with where it comes from. The
// defaults are DCGM's health-watch limits (NVIDIA/DCGM 4.6, common/DcgmGPUHardwareLimits.h and
// modules/health/DcgmHealthWatch.cpp) where DCGM has one; a site overrides any of them with a
// file of `name = value` lines (`#` starts a comment), `commtool doctor --thresholds FILE`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace commtool::health {

struct Thresholds {
  // PCIe replays per lane per minute of the run at which the link is suspect, by generation
  // (index 1-6): DCGM's expected rate, link speed x a bit error rate of 1e-12 x 60 s.
  double pcie_replays_per_lane_minute[7] = {0, 0.15, 0.3, 0.48, 0.96, 1.92, 3.84};
  double nvlink_crc_warn = 1;                // CRC errors on one link during the run: WARN
  double nvlink_crc_fail_per_s = 100;        // ... at this rate: FAIL ("only matter at 100+/s")
  double nvlink_replay_fail = 1;             // replays on one link during the run: FAIL
  double nvlink_recovery_fail = 1;           // recoveries on one link during the run: FAIL
  double ecc_volatile_uncorrected_fail = 1;  // uncorrected ECC errors since the driver loaded
  double retired_pages_fail = 63;            // pages retired (SBE + DBE) over the GPU's life
  double remap_uncorrectable_warn = 512;     // rows remapped for uncorrectable errors
  double rdma_port_errors_warn = 1;          // any one RDMA port error counter (symbol errors, ...)
  double aer_nonfatal_warn = 1;              // PCIe AER non-fatal errors since boot
  double aer_fatal_fail = 1;                 // PCIe AER fatal errors since boot
};

struct ThresholdInfo {
  std::string name;  // "nvlink_crc_fail_per_s", "pcie_replays_per_lane_minute.gen5"
  double value = 0;
  std::string source;  // "DCGM 4.6 DCGM_LIMIT_MAX_NVLINK_CRC_ERROR"
};
// Every threshold of `t` with its name and source, in the file's vocabulary.
std::vector<ThresholdInfo> describe(const Thresholds& t);

// `base` with the lines of `text` applied. `source` names the file in errors, which are
// Error(kUsage) with the file and line: "site.conf:3: 'nvlink_crc' is not a threshold (known:
// ...)", "site.conf:4: nvlink_crc_warn 'x': not a number (a non-negative decimal)".
Thresholds parse_thresholds(std::string_view text, const std::string& source, Thresholds base = {});

// The file at `path` (bounded, not a FIFO or a device) parsed as above.
Thresholds load_thresholds(const std::string& path);

}  // namespace commtool::health
