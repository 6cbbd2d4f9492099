// What sysfs says about the links' errors: each RDMA port's state, rate and error counters
// (/sys/class/infiniband/DEV/ports/N: the InfiniBand port counters, kept by the NIC since the
// counters were last cleared), and the PCIe Advanced Error Reporting totals of a GPU or NIC
// (/sys/bus/pci/devices/BDF/aer_dev_{correctable,nonfatal,fatal}, kept by the kernel since
// boot). A file that is not there (no AER in a VM, no such counter on this NIC) stays
// unavailable with the reason.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "probes/health/gpu_counters.hpp"

namespace commtool::health {

struct RdmaPort {
  std::string device;  // "mlx5_0"
  int port = 1;
  std::string state;       // "ACTIVE", "DOWN", "INIT", ... (the word after "4: ")
  std::string phys_state;  // "LinkUp", "Polling", "Disabled", ...
  std::string rate;        // "400 Gb/sec (4X NDR)"
  std::string link_layer;  // "InfiniBand", "Ethernet"
  // The counters doctor judges, by their sysfs names, in the order of kRdmaCounters.
  std::vector<std::pair<std::string, Count>> counters;
};

// symbol_error, link_downed, port_rcv_errors, link_error_recovery, local_link_integrity_errors,
// excessive_buffer_overrun_errors, port_rcv_remote_physical_errors, port_xmit_discards.
extern const char* const kRdmaCounters[8];

// Every port of each RDMA device named, under `sysfs_root` (tests give a tree of their own).
std::vector<RdmaPort> read_rdma_ports(const std::vector<std::string>& devices,
                                      const std::filesystem::path& sysfs_root = "/sys");

struct AerCounts {
  std::string bdf;
  Count correctable;   // TOTAL_ERR_COR
  Count nonfatal;      // TOTAL_ERR_NONFATAL
  Count fatal;         // TOTAL_ERR_FATAL
  std::string detail;  // the non-zero kinds: "RxErr 3, BadTLP 1"
};

AerCounts read_aer(const std::string& bdf, const std::filesystem::path& sysfs_root = "/sys");

// How the IOMMU treats the device's DMA, from its group's `type`: "identity" (passed through),
// "DMA" or "DMA-FQ" (translated), "none" (no IOMMU group: no IOMMU), "unknown" (unreadable).
std::string read_iommu_type(const std::string& bdf,
                            const std::filesystem::path& sysfs_root = "/sys");

}  // namespace commtool::health
