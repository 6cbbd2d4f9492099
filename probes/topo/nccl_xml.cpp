#include "probes/topo/nccl_xml.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/int_runs.hpp"
#include "probes/base/parse_number.hpp"
#include "probes/topo/link_rate.hpp"
#include "probes/topo/xml.hpp"

namespace commtool::topo {
namespace {

// A GPU has at most 18 NVLinks (NVLink4 and NVLink5); the bound keeps a bad count from
// allocating millions of links.
constexpr int kMaxNvLinksPerElement = 64;
constexpr int kMaxPcieLanes = 32;              // PCIe base spec: x1 .. x32
constexpr uint32_t kClassInfiniBand = 0x0207;  // class >> 8: network controller, InfiniBand

std::optional<long long> parse_decimal(std::string_view text) {
  return parse_number<long long>(text);
}

// "0x060400": NCCL writes PCI IDs and classes with a 0x prefix.
std::optional<uint32_t> parse_hex(std::string_view text, size_t max_digits) {
  if (!text.starts_with("0x") && !text.starts_with("0X")) return std::nullopt;
  std::string_view digits = text.substr(2);
  uint32_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (digits.empty() || digits.size() > max_digits || ec != std::errc() ||
      ptr != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return value;
}

// Whether an NCCL <net> is an RDMA device. NCCL's socket transport writes gdr="0" and its
// device number as the guid ("0x0", "0x1"); an RDMA device has a 64-bit EUI-64 GUID, and
// gdr="1" when GPUDirect RDMA is possible. A guid alone says nothing.
bool is_rdma_net(const xml::Element& net) {
  const std::string* gdr = net.attribute("gdr");
  if (gdr && *gdr == "1") return true;
  const std::string* guid = net.attribute("guid");
  if (!guid || !(guid->starts_with("0x") || guid->starts_with("0X"))) return false;
  uint64_t value = 0;
  std::string_view digits = std::string_view(*guid).substr(2);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  return ec == std::errc() && ptr == digits.data() + digits.size() && value > 0xffff;
}

std::string format_cpulist(const std::vector<int>& cpus) {
  return int_runs(cpus);
}

std::optional<std::string> parse_cpumask(std::string_view mask) {
  if (mask.empty()) return std::string();
  std::vector<uint32_t> words;  // most significant first, as written
  for (size_t start = 0;;) {
    size_t comma = std::min(mask.find(',', start), mask.size());
    std::string_view word = mask.substr(start, comma - start);
    uint32_t value = 0;
    auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value, 16);
    if (word.empty() || word.size() > 8 || ec != std::errc() || ptr != word.data() + word.size()) {
      return std::nullopt;
    }
    words.push_back(value);
    if (comma == mask.size()) break;
    start = comma + 1;
  }
  std::vector<int> cpus;
  for (size_t k = 0; k < words.size(); ++k) {
    uint32_t word = words[words.size() - 1 - k];
    for (int bit = 0; bit < 32; ++bit) {
      if ((word >> bit) & 1u) cpus.push_back(static_cast<int>(32 * k) + bit);
    }
  }
  return format_cpulist(cpus);
}

// "<pci busid="0000:17:00.0">": the element as the user finds it in the file, named by its
// identifying attribute (unless that attribute is the one being complained about).
std::string describe(const xml::Element& e, std::string_view skip = {}) {
  for (std::string_view key : {"busid", "numaid", "name", "target", "dev"}) {
    const std::string* value = e.attribute(key);
    if (value && key != skip) return "<" + e.name + " " + std::string(key) + "=\"" + *value + "\">";
  }
  return "<" + e.name + ">";
}

struct CpuScope {
  std::string id;
  int numa_node = kUnknownNuma;
  std::string cpu_affinity;
};

struct PciScope {
  std::string bdf;
  uint32_t class_code = 0;
  uint16_t vendor = 0;  // 0 when the file does not say
  uint16_t device = 0;
  PcieLink link;
};

class Reader {
 public:
  Reader(const std::string& source, Topology& topo) : source_(source), topo_(topo) {}

  void read_system(const xml::Element& system) {
    if (system.name != "system") {
      fail(system, "expected <system> as the root element of an NCCL topology file, found <" +
                       system.name + ">");
    }
    int position = 0;
    for (const xml::Element& child : system.children) {
      if (child.name == "cpu") {
        read_cpu(child, position++);
      } else if (child.name == "pci" || child.name == "nic" || child.name == "gpu") {
        fail(child, describe(child) + " must be inside a <cpu>");
      }
    }
  }

 private:
  const std::string& source_;
  Topology& topo_;
  std::map<std::string, int> line_of_;  // bdf or cpu id -> line, to reject duplicates

 public:
  std::vector<std::string> pci_only_gpus_;  // bus ids of GPUs known only by their PCI class
  std::vector<std::string> pci_only_nics_;

 private:
  [[noreturn]] void fail(const xml::Element& e, const std::string& what) const {
    throw usage_error(source_ + ":" + std::to_string(e.line) + ": " + what);
  }
  [[noreturn]] void fail_value(const xml::Element& e, std::string_view key,
                               const std::string& value, const std::string& expected) const {
    fail(e, describe(e, key) + " " + std::string(key) + "=\"" + value + "\": expected " + expected);
  }
  void claim(const xml::Element& e, const std::string& key, const std::string& what) {
    auto [it, fresh] = line_of_.emplace(key, e.line);
    if (!fresh) fail(e, what + " appears twice (first at line " + std::to_string(it->second) + ")");
  }

  // The attribute as an integer in [lo, hi]; `fallback` when absent.
  int int_attr(const xml::Element& e, std::string_view key, int fallback, int lo, int hi,
               const std::string& expected) const {
    const std::string* text = e.attribute(key);
    if (!text) return fallback;
    auto value = parse_decimal(*text);
    if (!value || *value < lo || *value > hi) fail_value(e, key, *text, expected);
    return static_cast<int>(*value);
  }
  std::optional<uint32_t> hex_attr(const xml::Element& e, std::string_view key, size_t max_digits,
                                   const std::string& expected) const {
    const std::string* text = e.attribute(key);
    if (!text) return std::nullopt;
    auto value = parse_hex(*text, max_digits);
    if (!value) fail_value(e, key, *text, expected);
    return value;
  }
  std::string bdf_attr(const xml::Element& e, std::string_view key) const {
    const std::string* text = e.attribute(key);
    if (!text) {
      fail(e, describe(e) + " has no " + std::string(key) +
                  ": expected a PCI address such as \"0000:17:00.0\"");
    }
    auto bdf = canonical_bdf(*text);
    if (!bdf) fail_value(e, key, *text, "a PCI address such as 0000:17:00.0");
    return *bdf;
  }

  // The 24-bit class code. Vendors' files often write only class and subclass ("0x0302"); NCCL
  // matches class codes by prefix, so "0x03", "0x0302" and "0x030200" are all display
  // controllers. A short code is widened with zeros: 0x0302 -> 0x030200.
  uint32_t class_attr(const xml::Element& e) const {
    const std::string* text = e.attribute("class");
    if (!text) fail(e, describe(e) + " has no class: expected one such as 0x060400");
    const std::string expected = "a hex PCI class of 2, 4 or 6 digits such as 0x060400 or 0x0302";
    auto value = parse_hex(*text, 6);
    size_t digits = text->size() - 2;
    if (!value || digits % 2 != 0) fail_value(e, "class", *text, expected);
    return *value << (4 * (6 - digits));
  }

  void add_nvswitch(const std::string& bdf) {
    auto& switches = topo_.nvswitches;
    auto same = [&](const NvSwitch& s) { return s.bdf == bdf; };
    if (std::none_of(switches.begin(), switches.end(), same)) switches.push_back(NvSwitch{bdf});
  }

  void read_cpu(const xml::Element& cpu, int position) {
    CpuScope scope;
    scope.numa_node = int_attr(cpu, "numaid", kUnknownNuma, -1, INT_MAX,
                               "a NUMA node number such as 0, or -1 when unknown");
    scope.id = cpu.attribute("numaid") ? "cpu" + std::to_string(scope.numa_node)
                                       : "cpu?" + std::to_string(position);
    claim(cpu, scope.id, describe(cpu));
    if (const std::string* mask = cpu.attribute("affinity")) {
      auto cpulist = parse_cpumask(*mask);
      if (!cpulist) {
        fail_value(cpu, "affinity", *mask,
                   "comma-separated 32-bit hex words such as 0000ffff,0000ffff");
      }
      scope.cpu_affinity = *cpulist;
    }
    topo_.root_complexes.push_back(RootComplex{scope.id, scope.numa_node, scope.cpu_affinity});
    for (const xml::Element& child : cpu.children) {
      if (child.name == "pci") {
        read_pci(child, scope, nullptr);
      } else if (child.name == "nic") {
        read_nic(child, scope, nullptr);
      } else if (child.name == "gpu") {
        fail(child, describe(child) + " must be inside a <pci>");
      }
    }
  }

  void read_pci(const xml::Element& e, const CpuScope& cpu, const PciScope* parent) {
    PciNode node;
    node.bdf = bdf_attr(e, "busid");
    claim(e, node.bdf, "busid \"" + node.bdf + "\"");
    node.class_code = class_attr(e);
    node.vendor = static_cast<uint16_t>(
        hex_attr(e, "vendor", 4, "a hex PCI vendor ID such as 0x10de").value_or(0));
    node.device = static_cast<uint16_t>(
        hex_attr(e, "device", 4, "a hex PCI device ID such as 0x2330").value_or(0));
    node.parent_bdf = parent ? parent->bdf : "";
    node.root_complex = cpu.id;
    node.numa_node = cpu.numa_node;
    if (const std::string* speed = e.attribute("link_speed")) {
      node.link.max_gen = pcie_gen_from_speed(*speed);  // 0 for "" and "Unknown"
      if (node.link.max_gen < 0) {
        fail_value(e, "link_speed", *speed, "a PCIe rate such as \"32.0 GT/s PCIe\"");
      }
    }
    node.link.max_width =
        int_attr(e, "link_width", 0, 0, kMaxPcieLanes, "a number of lanes such as 16");
    if (node.class_code == kClassBridgeOther) add_nvswitch(node.bdf);
    PciScope scope{node.bdf, node.class_code, node.vendor, node.device, node.link};
    topo_.pci.push_back(std::move(node));

    const xml::Element* gpu = nullptr;
    bool has_nic = false;
    for (const xml::Element& child : e.children) {
      if (child.name == "pci") {
        read_pci(child, cpu, &scope);
      } else if (child.name == "nic") {
        has_nic = true;
        read_nic(child, cpu, &scope);
      } else if (child.name == "gpu") {
        if (gpu)
          fail(child, "a second <gpu> in " + describe(e) + " (the first is at line " +
                          std::to_string(gpu->line) + ")");
        gpu = &child;
        read_gpu(child, cpu, scope);
      }
    }
    // A vendor's file names devices only by class; NCCL fills in the <gpu> and <nic> from the
    // machine at run time. Read them as NCCL does: a display function of NVIDIA (or of no stated
    // vendor) is a GPU, a network function is a NIC.
    if (!gpu && is_display_class(scope.class_code) &&
        (scope.vendor == kVendorNvidia || scope.vendor == 0)) {
      add_pci_only_gpu(cpu, scope);
    }
    if (!has_nic && is_network_class(scope.class_code)) add_pci_only_nic(cpu, scope);
  }

  void add_pci_only_gpu(const CpuScope& cpu, const PciScope& pci) {
    Gpu gpu;
    gpu.bdf = pci.bdf;
    gpu.numa_node = cpu.numa_node;
    gpu.cpu_affinity = cpu.cpu_affinity;
    gpu.pcie = pci.link;
    gpu.nvlinks_known = false;
    if (pci.device != 0) gpu.name = fmt::format("NVIDIA device {:04x}", pci.device);
    topo_.gpus.push_back(std::move(gpu));
    pci_only_gpus_.push_back(pci.bdf);
  }

  void add_pci_only_nic(const CpuScope& cpu, const PciScope& pci) {
    Nic nic;
    nic.bdf = pci.bdf;
    nic.pcie = pci.link;
    nic.numa_node = cpu.numa_node;
    nic.kind =
        (pci.class_code >> 8) == kClassInfiniBand ? NicKind::kInfiniBand : NicKind::kEthernet;
    topo_.nics.push_back(std::move(nic));
    pci_only_nics_.push_back(pci.bdf);
  }

  void read_gpu(const xml::Element& e, const CpuScope& cpu, const PciScope& pci) {
    Gpu gpu;
    gpu.bdf = pci.bdf;
    gpu.cuda_ordinal = int_attr(e, "dev", -1, -1, INT_MAX, "a CUDA device number such as 0");
    gpu.sm = int_attr(e, "sm", 0, 0, INT_MAX, "a compute capability such as 90");
    gpu.numa_node = cpu.numa_node;
    gpu.cpu_affinity = cpu.cpu_affinity;
    gpu.pcie = pci.link;
    // The file has no names; the PCI device id is what identifies the model, as from sysfs.
    gpu.name = fmt::format("NVIDIA device {:04x}", pci.device);
    for (const xml::Element& child : e.children) {
      if (child.name == "nvlink") read_nvlink(child, gpu);
    }
    topo_.gpus.push_back(std::move(gpu));
  }

  void read_nvlink(const xml::Element& e, Gpu& gpu) {
    std::string target = bdf_attr(e, "target");
    if (!e.attribute("count")) fail(e, describe(e) + " has no count: expected a number of links");
    int count =
        int_attr(e, "count", 0, 1, kMaxNvLinksPerElement, "a positive number of links such as 18");
    NvLinkPeer peer = NvLinkPeer::kUnknown;
    if (auto tclass = hex_attr(e, "tclass", 6, "a hex PCI class such as 0x068000")) {
      // NCCL's reading of NVML's remote device type: an NVSwitch, a GPU, or else the CPU
      // (POWER9's NVLink to the host).
      if (*tclass == kClassBridgeOther) {
        peer = NvLinkPeer::kNvSwitch;
        add_nvswitch(target);
      } else {
        peer = is_display_class(*tclass) ? NvLinkPeer::kGpu : NvLinkPeer::kCpu;
      }
    }
    int generation = nvlink_generation_for_sm(gpu.sm);
    for (int i = 0; i < count; ++i) {
      int index = static_cast<int>(gpu.nvlinks.size());
      gpu.nvlinks.push_back(NvLink{index, true, 0, generation, peer, target});
    }
  }

  void read_nic(const xml::Element& e, const CpuScope& cpu, const PciScope* pci) {
    for (const xml::Element& net : e.children) {
      if (net.name != "net") continue;
      Nic nic;
      // Names reach the terminal: control characters and non-ASCII bytes are escaped.
      if (const std::string* name = net.attribute("name")) nic.name = excerpt(*name, 64);
      if (pci) {
        nic.bdf = pci->bdf;
        nic.pcie = pci->link;
      } else {
        nic.root_complex = cpu.id;
      }
      nic.numa_node = cpu.numa_node;
      // NCCL records the port speed in Mbit/s.
      int speed_mbps = int_attr(net, "speed", 0, 0, INT_MAX, "a rate in Mbit/s such as 400000");
      nic.port_rate_gbps = speed_mbps / 1000.0;
      if (pci && (pci->class_code >> 8) == kClassInfiniBand) {
        nic.kind = NicKind::kInfiniBand;
      } else if (is_rdma_net(net)) {
        nic.kind = pci ? NicKind::kRoce : NicKind::kRdma;  // RDMA over an Ethernet function
      } else {
        nic.kind = NicKind::kEthernet;
      }
      topo_.nics.push_back(std::move(nic));
    }
  }
};

}  // namespace

std::string cpumask_to_cpulist(const std::string& mask) {
  auto cpulist = parse_cpumask(mask);
  if (!cpulist) {
    throw usage_error("CPU mask \"" + mask +
                      "\": expected comma-separated 32-bit hex words such as 0000ffff,0000ffff");
  }
  return *cpulist;
}

Topology parse_nccl_xml(std::string_view text, const std::string& source_name) {
  xml::Element root = xml::parse(text, source_name);
  Topology topo;
  topo.source = "nccl-xml:" + source_name;
  topo.pci_hops_collapsed = true;
  Reader reader(source_name, topo);
  reader.read_system(root);

  std::sort(topo.gpus.begin(), topo.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.bdf < b.bdf; });  // nvidia-smi's order
  for (size_t i = 0; i < topo.gpus.size(); ++i)
    topo.gpus[i].index = static_cast<int>(i);
  for (size_t i = 0; i < topo.nics.size(); ++i)
    topo.nics[i].index = static_cast<int>(i);

  topo.missing.push_back({"current PCIe link state",
                          "an NCCL topology file records only the maximum link speed and width"});
  topo.missing.push_back({"P2P capability from CUDA",
                          "not recorded in NCCL topology files; run commtool topo on the machine "
                          "itself"});
  topo.missing.push_back({"GPU names", "not recorded in NCCL topology files"});
  if (!reader.pci_only_gpus_.empty()) {
    topo.missing.push_back(
        {fmt::format("model, CUDA device and NVLinks of {} GPU(s)", reader.pci_only_gpus_.size()),
         fmt::format("the file lists them only as display-class PCI functions ({}); NCCL fills "
                     "these in from the machine at run time, so their NVLinks are unknown, not "
                     "absent",
                     fmt::join(reader.pci_only_gpus_, ", "))});
  }
  if (!reader.pci_only_nics_.empty()) {
    topo.missing.push_back(
        {fmt::format("name, port rate and RDMA capability of {} NIC(s)",
                     reader.pci_only_nics_.size()),
         fmt::format("the file lists them only as network-class PCI functions ({}); NCCL asks "
                     "its network plugin at run time (class 0x0207 is InfiniBand; an Ethernet "
                     "function may or may not be RoCE)",
                     fmt::join(reader.pci_only_nics_, ", "))});
  }
  if (std::any_of(topo.root_complexes.begin(), topo.root_complexes.end(),
                  [](const RootComplex& r) { return r.numa_node == kUnknownNuma; })) {
    topo.missing.push_back({"NUMA node of some CPUs",
                            "a <cpu> without numaid (or numaid=\"-1\"): the devices under it "
                            "have no NUMA node"});
  }
  check_device_counts(topo);
  topo.reindex();
  return topo;
}

Topology read_nccl_xml_file(const std::string& path) {
  // A DGX's file is 20 kB; a topology of kMaxTopologyGpus GPUs with their links a few MB.
  constexpr uint64_t kMaxNcclXmlBytes = 64ull << 20;
  return parse_nccl_xml(files::read_input_file(path, kMaxNcclXmlBytes), path);
}

}  // namespace commtool::topo
