// The GPU's own error counters and modes, as NVML reports them: ECC, retired pages and row
// remapping, the PCIe replay counter, NVLink state and error counters, clock-event (throttle)
// reasons, persistence and MIG mode. NVML is loaded with dlopen, as topo loads it, so a machine
// without the driver gets a reason, not a link error. A counter NVML does not give on this GPU
// (N/A in `nvidia-smi -q`: retired pages on Hopper, which remaps rows instead) stays unavailable
// with NVML's own words, never zero: a check reads "not available", never PASS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commtool::health {

struct Count {
  bool available = false;
  uint64_t value = 0;
  std::string why;  // when not available: "Not Supported" (NVML's words), "not in this driver"
};

struct NvLinkCounters {
  int link = 0;
  bool active = false;
  Count crc_flit;  // data-link CRC errors on flow-control units
  Count crc_data;  // data-link CRC errors on data
  Count replay;    // data-link replays
  Count recovery;  // data-link recoveries (the link retrained)
};

// Clock-event reason bits (nvmlClocksEventReasons, the same as the older throttle reasons).
inline constexpr uint64_t kClockIdle = 0x1;
inline constexpr uint64_t kClockApplicationsSetting = 0x2;
inline constexpr uint64_t kClockSwPowerCap = 0x4;
inline constexpr uint64_t kClockHwSlowdown = 0x8;
inline constexpr uint64_t kClockSyncBoost = 0x10;
inline constexpr uint64_t kClockSwThermal = 0x20;
inline constexpr uint64_t kClockHwThermal = 0x40;
inline constexpr uint64_t kClockHwPowerBrake = 0x80;
inline constexpr uint64_t kClockDisplaySetting = 0x100;

// nvmlGpuFabricState_t
inline constexpr uint64_t kFabricNotSupported = 0;
inline constexpr uint64_t kFabricNotStarted = 1;
inline constexpr uint64_t kFabricInProgress = 2;
inline constexpr uint64_t kFabricCompleted = 3;

struct GpuCounters {
  std::string bdf;               // "0000:3b:00.0", as topo names the GPU
  std::string uuid;              // "GPU-187a3ed2-...", when NVML gave it
  std::string unavailable;       // NVML could not open this GPU: why ("GPU is lost"); else ""
  Count ecc_enabled;             // 1 when ECC is on now
  Count ecc_volatile_corrected;  // since the driver loaded
  Count ecc_volatile_uncorrected;
  Count ecc_aggregate_corrected;  // over the GPU's life
  Count ecc_aggregate_uncorrected;
  Count retired_sbe;        // pages retired for repeated single-bit errors (before Ampere)
  Count retired_dbe;        // pages retired for double-bit errors
  Count retired_pending;    // 1 when a retirement waits for the next driver load
  Count remap_correctable;  // rows remapped (Ampere and later)
  Count remap_uncorrectable;
  Count remap_pending;  // 1 when a remap waits for a GPU reset
  Count remap_failure;  // 1 when a row could not be remapped
  Count pcie_replay;    // PCIe replays since the driver loaded
  Count clock_reasons;  // the kClock* bits active now
  Count persistence;    // 1 when persistence mode is on
  Count mig;            // 1 when MIG mode is on now
  // NVSwitch fabric registration (HGX with a fabric manager, NVLink domains): a kFabric* state,
  // and NVML's status code of the registration once completed. Not available elsewhere.
  Count fabric_state;
  Count fabric_status;
  std::vector<NvLinkCounters> nvlinks;  // the links NVML knows on this GPU
};

struct CountersRead {
  std::string unavailable;        // NVML could not be used at all: why; else ""
  std::string library;            // the library loaded
  std::vector<GpuCounters> gpus;  // one per bdf asked, in that order
};

// The counters of the GPUs at `bdfs`. `library`: the NVML to load (tests give a fake one).
CountersRead read_gpu_counters(const std::vector<std::string>& bdfs,
                               const std::string& library = "libnvidia-ml.so.1");

}  // namespace commtool::health
