// What the cluster view compares between the nodes of an MPI job: per GPU its model, PCIe link,
// NUMA node, active NVLinks and the NIC NCCL would pair it with; per NIC its kind, rate and link;
// and the driver, CUDA and NCCL versions. A few hundred bytes per node, taken from a Topology and
// its Analysis on each rank and sent to rank 0 (cluster_wire.hpp), so that rank 0 compares
// thousands of nodes without holding thousands of topologies.
//
// GPUs and NICs are matched between nodes by PCI bus id (servers of one model number their slots
// alike), a NIC known only by name (an NCCL file's <nic> under a <cpu>) by name: a missing device
// then shows as missing, not as every later device shifted by one.
#pragma once

#include <string>
#include <vector>

#include "probes/topo/classify.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::topo {

struct GpuFacts {
  std::string bus_id;
  std::string model;  // the name, or "PCI device 0x2330" when the source names none
  int numa_node = kUnknownNuma;
  int pcie_width = 0;       // trained width now; 0 unknown (the link may be down)
  int pcie_max_gen = 0;     // the best generation the GPU and its slot allow; 0 unknown
  int pcie_max_width = 0;   // the best width the GPU and its slot allow; 0 unknown
  int nvlinks_active = -1;  // -1: the source cannot tell
  std::string nic;          // NicFacts::key of the NIC NCCL would pair it with; "" none
  std::string nic_path;     // that path's class, "PIX", "NODE", ...; "" without a NIC
  bool operator==(const GpuFacts&) const = default;
};

struct NicFacts {
  std::string key;            // the bus id, or the name when the source gives no bus id
  std::string name;           // mlx5_0, eth0; "" unnamed
  std::string kind;           // to_string(NicKind)
  double port_rate_gbps = 0;  // 0 unknown
  int numa_node = kUnknownNuma;
  int pcie_width = 0;  // 0 unknown
  bool operator==(const NicFacts&) const = default;
};

struct NodeFacts {
  std::vector<GpuFacts> gpus;  // by bus id
  std::vector<NicFacts> nics;  // by key
  int nvswitches = 0;
  std::string driver_version;  // NVIDIA driver; "" unknown
  std::string cuda_version;    // CUDA driver API ("13.0"); "" unknown
  std::string nccl_version;    // "2.28.3"; "" unknown
  bool operator==(const NodeFacts&) const = default;
};

// The versions the node runs that a Topology does not hold. Left empty for a topology read from
// a file: the CUDA and NCCL of the machine reading it are not those of the machine it describes.
struct StackVersions {
  std::string cuda;
  std::string nccl;
};

NodeFacts node_facts(const Topology& topo, const Analysis& analysis, const StackVersions& versions);

// How a NIC is named in a message: "mlx5_1 (0000:26:00.0)", "eth0", "0000:26:00.0".
std::string describe(const NicFacts& nic);

}  // namespace commtool::topo

namespace commtool::topo {

// The same string for equal facts and different strings for different ones: the key that groups
// nodes with one configuration.
std::string fingerprint(const NodeFacts& facts);

}  // namespace commtool::topo
