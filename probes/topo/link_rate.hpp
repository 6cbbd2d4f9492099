// What a link should carry, from its generation and width. These are the denominators of every
// "% of expected" that probe prints, so each constant cites where it comes from.
#pragma once

#include <string>

namespace commtool::topo {

// Per-lane signalling rate in GT/s for PCIe generation 1..6 (PCI-SIG base specs 1.0-6.0);
// 0 for an unknown generation.
double pcie_lane_gtps(int gen);

// Bytes per second per direction after line coding, in GB/s (1e9 B/s): 8b/10b for Gen1-2,
// 128b/130b for Gen3-5, FLIT mode for Gen6 (242 of 256 bytes carry TLP/DLLP data).
// Gen5 x16: 63.0 GB/s.
double pcie_raw_gbps(int gen, int width);

// Raw rate less TLP overhead for writes of max_payload_bytes: 16 B header (4 DW, 64-bit
// address), 4 B LCRC and 6 B framing + sequence number per TLP, no ECRC. Flow-control and ACK
// DLLPs are ignored, so this is an upper bound: a copy engine reaches ~95% of it.
// Gen5 x16 at MPS 256: 57.2 GB/s.
inline constexpr int kDefaultMaxPayloadBytes = 256;
inline constexpr int kTlpOverheadBytes = 26;
double pcie_payload_gbps(int gen, int width, int max_payload_bytes = kDefaultMaxPayloadBytes);

// "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s" (sysfs link_speed, NCCL XML link_speed) -> generation.
// Returns 0 for "Unknown" or an empty string; nullopt-like -1 for text that is not a speed.
int pcie_gen_from_speed(const std::string& text);
std::string pcie_speed_string(int gen);  // 5 -> "32.0 GT/s"

// NVLink data rate per link and direction in GB/s by generation: NVLink1 (P100) 20,
// NVLink2 (V100) 25, NVLink3 (A100) 25, NVLink4 (H100/H200, 18 links = 450 GB/s) 25,
// NVLink5 (B200, 18 links = 900 GB/s) 50. From NVIDIA's product specifications.
double nvlink_link_gbps(int generation);

// The NVLink generation a GPU of this compute capability (major*10+minor) speaks; 0 if none.
// NVML's nvmlDeviceGetNvLinkVersion is not used for this: drivers have reported 4 and 5 for
// the same Hopper part, so the architecture is the dependable key.
int nvlink_generation_for_sm(int sm);

}  // namespace commtool::topo
