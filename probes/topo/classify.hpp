// Pure analysis of a Topology: the connection matrix in nvidia-smi's vocabulary, the GPU-NIC
// pairing NCCL would make, the expected rate of every link, and warnings with their evidence.
// No I/O here; tests feed it fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/topo/topology.hpp"

namespace commtool::topo {

// Ordered from nearest to farthest, as `nvidia-smi topo -m` explains them.
enum class PathClass : uint8_t {
  kSelf,    // X
  kNvLink,  // NV#: a bonded set of # NVLinks (direct, or to the same NVSwitch fabric)
  kPix,     // at most one PCIe switch
  kPxb,     // several PCIe switches, not through the host bridge
  kPhb,     // through a PCIe host bridge (the CPU's root complex)
  kNode,    // between host bridges within one NUMA node
  kSys,     // across the inter-socket link (QPI/UPI/xGMI)
};

// Four bytes: a matrix of 6,144 GPUs and NICs holds 37.7 M of them.
struct Connection {
  PathClass path = PathClass::kSys;
  uint16_t nvlinks = 0;  // for kNvLink
  // A guess: the two NUMA nodes were unknown, so NODE vs SYS could not be told apart.
  bool numa_assumed = false;
};

std::string label(const Connection& c);  // "X", "NV18", "PIX", ...
std::string label(PathClass p);          // "NV", "PIX", ...
std::string describe(PathClass p);       // the legend line

// PCIe path class between two PCI functions of the tree, following NCCL's reading of sysfs:
// a switch is its upstream port plus downstream ports, so only every second bridge on the way
// up counts as a hop.
Connection classify_pcie(const Topology& topo, const std::string& bdf_a, const std::string& bdf_b);

// GPU pair: NVLink where they share links (directly or through NVSwitches), else PCIe.
Connection classify_gpus(const Topology& topo, const Gpu& a, const Gpu& b);

struct ConnectionMatrix {
  std::vector<std::string> labels;             // GPU0.., NIC0..
  std::vector<std::vector<Connection>> cells;  // [row][col]
};

// Past this many GPUs and NICs together the matrix is given as counts of pairs by path (the
// text and the JSON alike): a 4,096-column table helps no one, and its cells would make the
// JSON grow with the square of the devices (16.8 M cells, 5 GB of memory at 4,096 GPUs).
inline constexpr size_t kMatrixListedUpTo = 64;

// How many pairs have each connection, GPU with GPU and GPU with NIC; by path and NVLink count,
// the lowest class first.
struct PathCount {
  Connection connection;
  size_t pairs = 0;
};
struct MatrixSummary {
  std::vector<PathCount> gpu_gpu, gpu_nic;
};
MatrixSummary summarise_matrix(const ConnectionMatrix& m, size_t gpus);

struct NicPairing {
  int gpu = 0;
  int nic = -1;  // Nic::index, -1 when the machine has no NIC
  Connection path;
};

struct GpuLinkRates {
  int gpu = 0;
  double pcie_raw_gbps = 0;          // at the attainable generation and width
  double pcie_payload_gbps = 0;      // what a DMA copy can reach at best, per direction
  double pcie_current_raw_gbps = 0;  // at the link state read now (drops when idle)
  int nvlink_active = 0;
  int nvlink_generation = 0;
  double nvlink_gbps = 0;  // per direction, all active links together
};

enum class Severity { kNote, kWarning };

struct Finding {
  Severity severity = Severity::kWarning;
  std::string code;      // stable id for scripts: "pcie-width-degraded", ...
  std::string message;   // what is wrong, in one line
  std::string evidence;  // the values read, and where from
  std::string advice;    // what to do
};

struct P2pVerdict {
  int gpu_a = 0;
  int gpu_b = 0;
  bool known = false;  // CUDA answered
  bool can_access = false;
  int performance_rank = -1;
  bool native_atomics = false;
  std::string reason;  // when not possible: the likely cause
};

struct Analysis {
  ConnectionMatrix matrix;
  std::vector<NicPairing> nic_pairing;
  std::vector<GpuLinkRates> rates;
  std::vector<P2pVerdict> p2p;
  std::string p2p_summary;  // e.g. "no peer: only one GPU"
  std::vector<Finding> findings;
};

Analysis analyze(const Topology& topo);

}  // namespace commtool::topo
