// The topology model: plain data that every source (live sysfs + NVML + CUDA, or an NCCL XML
// file) fills in, and that classification, probes and reports read. It knows nothing about how
// it is discovered or printed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace commtool::topo {

inline constexpr int kUnknownNuma = -1;

// PCIe class codes (PCI Code and ID Assignment spec), the 24-bit value sysfs prints.
inline constexpr uint32_t kClassBridgePci = 0x060400;
inline constexpr uint32_t kClassBridgeOther = 0x068000;  // NVIDIA NVSwitch reports this
inline constexpr uint16_t kVendorNvidia = 0x10de;

inline bool is_display_class(uint32_t cls) {
  return (cls >> 16) == 0x03;
}
inline bool is_network_class(uint32_t cls) {
  return (cls >> 16) == 0x02;
}
inline bool is_pci_bridge_class(uint32_t cls) {
  return (cls >> 8) == 0x0604;
}

// One PCIe link as seen from the device at its lower end. Zero means "not known": the GPU
// machine is a VM whose sysfs lacks the parent port's speed, and an NCCL XML carries no
// current/max split.
struct PcieLink {
  int current_gen = 0;
  int current_width = 0;
  int max_gen = 0;  // what the device supports
  int max_width = 0;
  int port_max_gen = 0;  // what the port above it supports (the slot); 0 when unreadable
  int port_max_width = 0;

  // The best the link could train to: the lower of the device's and the port's maximum.
  int attainable_gen() const;
  int attainable_width() const;
};

// A node of the PCIe tree: a bridge (switch port, root port), an endpoint, or an NVSwitch.
struct PciNode {
  std::string bdf;  // canonical "dddd:bb:dd.f", lower case
  uint32_t class_code = 0;
  uint16_t vendor = 0;
  uint16_t device = 0;
  std::string parent_bdf;    // the bridge above; empty when attached to the root complex
  std::string root_complex;  // "pci0000:00" from sysfs, or "cpu<numa>" from NCCL XML
  int numa_node = kUnknownNuma;
  PcieLink link;
  // ACS "P2P Request Redirect" on this bridge (PCIe ACS control bit 2): peer writes are sent up
  // to the root complex instead of across the switch. -1 when the config space is unreadable
  // (it is past the first 64 bytes, which only root may read) or the bridge has no ACS.
  int acs_p2p_redirect = -1;
};

struct RootComplex {
  std::string id;
  int numa_node = kUnknownNuma;
  std::string cpu_affinity;  // cpulist of the NUMA node, when known
};

enum class NvLinkPeer { kGpu, kNvSwitch, kCpu, kUnknown };

struct NvLink {
  int link = 0;  // link index on the GPU
  bool active = false;
  int nvml_version = 0;  // the raw value NVML reported (not reliable as a generation)
  int generation = 0;    // NVLink generation (1..5), derived from the GPU architecture
  NvLinkPeer peer = NvLinkPeer::kUnknown;
  std::string peer_bdf;
};

struct Gpu {
  int index = 0;          // position in PCI bus order, as nvidia-smi numbers GPUs
  int cuda_ordinal = -1;  // CUDA's ordinal under CUDA_DEVICE_ORDER=PCI_BUS_ID, -1 if not visible
  std::string bdf;
  std::string name;
  int sm = 0;  // compute capability * 10 (90 for Hopper), 0 unknown
  int numa_node = kUnknownNuma;
  std::string cpu_affinity;  // cpulist, e.g. "0-15,32-47"
  PcieLink pcie;
  std::vector<NvLink> nvlinks;
  // false when the source lists the GPU only as a PCI function (a vendor's NCCL topology file
  // with a display-class <pci> and no <gpu> inside): its NVLinks are unknown, not absent.
  bool nvlinks_known = true;
  // The kernel driver bound to the PCI function (the sysfs `driver` link): "nvidia", "vfio-pci",
  // "nouveau", or "" when none is bound; nullopt when the source cannot tell (a capture or an
  // NCCL file).
  std::optional<std::string> kernel_driver;
};

// kRdma: an RDMA device whose link layer the source does not say (an NCCL <nic> outside any
// <pci>); kEthernet is plain Ethernet, which NCCL drives through sockets.
enum class NicKind { kInfiniBand, kRoce, kEthernet, kRdma };

inline bool is_rdma(NicKind kind) {
  return kind != NicKind::kEthernet;
}

struct Nic {
  int index = 0;
  std::string name;  // mlx5_0 for RDMA devices, eth0 for plain Ethernet
  NicKind kind = NicKind::kEthernet;
  std::string bdf;  // empty when the source knows only its CPU (NCCL XML <nic> under <cpu>)
  std::string root_complex;          // set when bdf is empty
  std::vector<std::string> netdevs;  // Ethernet interfaces on the same PCI function
  double port_rate_gbps = 0;         // link rate in Gbit/s as the port reports it, 0 unknown
  int numa_node = kUnknownNuma;
  PcieLink pcie;
};

struct NvSwitch {
  std::string bdf;
};

// CUDA's view of one ordered GPU pair.
struct P2pPair {
  int gpu_a = 0;  // Gpu::index
  int gpu_b = 0;
  bool can_access = false;
  int performance_rank = -1;  // cudaDevP2PAttrPerformanceRank, lower is better; -1 unknown
  bool native_atomics = false;
};

// What a source could not read. Reported, never fatal: topo works on an empty machine.
struct Missing {
  std::string what;  // "NVML", "CUDA driver", "max_link_speed of 0000:00:06.0"
  std::string why;
};

struct Topology {
  std::string source;  // "sysfs:/sys", "nccl-xml:FILE"
  std::vector<RootComplex> root_complexes;
  std::vector<PciNode> pci;  // every node on a path from a GPU/NIC/NVSwitch up to its root
  // sysfs lists every bridge, so a PCIe switch appears as an upstream port plus a downstream
  // port per device: only every second bridge is a hop. NCCL's XML already keeps one node per
  // switch, so there every bridge is a hop.
  bool pci_hops_collapsed = false;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<NvSwitch> nvswitches;
  std::vector<P2pPair> p2p;  // empty when CUDA could not be asked
  bool p2p_queried = false;
  std::string driver_version;  // from NVML or the NCCL XML, empty when unknown
  bool nvml_available = false;
  std::string nvml_error;  // why NVML could not be used, when it was asked and failed
  std::string cuda_error;  // why CUDA could not be used, when it was asked and failed
  bool cuda_available = false;
  bool cuda_queried = false;  // false when CUDA had nothing to add (see cuda_needed)
  bool in_vm = false;         // hypervisor flag seen in /proc/cpuinfo
  int numa_node_count = 0;    // NUMA nodes the OS knows; 0 when unknown
  int iommu_groups = -1;      // number of IOMMU groups; 0 = no IOMMU, -1 unknown
  std::vector<Missing> missing;

  // Lookups by bus id are indexed: call reindex() after changing pci or gpus (the readers do);
  // a stale index falls back to a linear search, so it is never wrong, only slower.
  const PciNode* find_pci(const std::string& bdf) const;
  const RootComplex* find_root(const std::string& id) const;
  const Gpu* find_gpu_by_bdf(const std::string& bdf) const;
  void reindex();
  // Whether the source is a sysfs tree (the live /sys or a capture), as opposed to an NCCL
  // topology file, which holds no driver or NVML answers and may be hand-written.
  bool read_from_sysfs() const { return source.rfind("sysfs:", 0) == 0; }

 private:
  std::unordered_map<std::string, size_t> pci_index_;
  std::unordered_map<std::string, size_t> gpu_index_;
};

// The most GPUs and NICs one topology may have. No machine comes near (NCCL's own topology
// holds at most 256 nodes of a kind); the bounds keep the connection matrix, which grows with
// the square of GPUs plus NICs, near 100 MB for any file (65,536 GPUs in an NCCL topology file
// once ended in bad_alloc).
inline constexpr size_t kMaxTopologyGpus = 4096;
inline constexpr size_t kMaxTopologyNics = 1024;

// Throws usage_error naming the source when `topo` has more GPUs or NICs than the bounds above:
// called by the readers of files and sysfs trees before anything is analysed.
void check_device_counts(const Topology& topo);

// "0000:3B:00.0", "00000000:3b:00.0" (NVML), "3b:00.0" -> "0000:3b:00.0"; nullopt otherwise.
std::optional<std::string> canonical_bdf(const std::string& text);

// The CPUs of a sysfs cpulist ("0-3,8,10-11"), in order; empty for ""; nullopt when malformed.
std::optional<std::vector<int>> parse_cpulist(const std::string& cpulist);

std::string to_string(NicKind kind);
std::string to_string(NvLinkPeer peer);

}  // namespace commtool::topo
