#include "probes/topo/sysfs_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "probes/base/error.hpp"
#include "probes/topo/link_rate.hpp"

namespace fs = std::filesystem;

namespace commtool::topo {

namespace {

// A name sysfs gives (a directory entry, a link's target, a file's text) as it may reach the
// terminal: control characters and non-ASCII bytes escaped, as an NCCL file's names are. A
// netdev may be renamed to almost anything, and --sysfs-root reads a capture someone sent.
std::string shown(const std::string& name, size_t max_chars = 64) {
  return excerpt(name, max_chars);
}

// A sysfs attribute holds at most a page, a PCI config space 4 KiB. A capture someone sent may
// link one to /dev/zero or hold a FIFO: such a file is refused by its kind, one that goes on
// past the bound by its size, before it can take the memory or hang (exit 2, not bad_alloc).
constexpr size_t kMaxSysfsFileBytes = 64 * 1024;

std::optional<std::string> read_bounded(const fs::path& file, std::ios::openmode mode = {}) {
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (ec || !fs::exists(st) || fs::is_directory(st)) return std::nullopt;
  if (!fs::is_regular_file(st)) {
    throw usage_error(fmt::format("{}: not a regular file; sysfs attributes are regular files",
                                  excerpt(file.string(), 200)));
  }
  std::ifstream in(file, std::ios::in | mode);
  if (!in) return std::nullopt;
  std::string text(kMaxSysfsFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxSysfsFileBytes) {
    throw usage_error(fmt::format("{}: more than {} bytes; a sysfs attribute holds at most a page",
                                  excerpt(file.string(), 200), kMaxSysfsFileBytes));
  }
  return text;
}

std::optional<std::string> read_attr(const fs::path& file) {
  auto read = read_bounded(file);
  if (!read) return std::nullopt;
  std::string text = std::move(*read);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

std::optional<long> read_number(const fs::path& file, int base = 10) {
  auto text = read_attr(file);
  if (!text || text->empty()) return std::nullopt;
  try {
    size_t used = 0;
    long v = std::stol(*text, &used, base);
    if (used != text->size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A directory's entries in name order (sysfs lists in creation order, which differs between
// boots); empty when the directory is missing.
std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Where a symlink points, also when the target itself is missing: a capture kept in git lacks
// the empty directory a netdev link points to (.../0000:00:03.0/virtio2), and only the PCI
// function above it counts.
fs::path resolve_link(const fs::path& link, std::error_code& ec) {
  fs::path resolved = fs::canonical(link, ec);
  if (!ec) return resolved;
  fs::path target = fs::read_symlink(link, ec);
  if (ec) return {};
  return fs::weakly_canonical(link.parent_path() / target, ec);
}

Error missing_class_file(const fs::path& file, const char* example) {
  return usage_error(fmt::format(
      "{}: missing or unreadable; every PCI device in sysfs has a class file (hex, e.g. {})",
      file.string(), example));
}

bool is_bdf(const std::string& s) {
  static const std::regex bdf("^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$");
  return std::regex_match(s, bdf);
}

bool is_root_bus(const std::string& s) {
  static const std::regex root("^pci[0-9a-fA-F]{4}:[0-9a-fA-F]{2}$");
  return std::regex_match(s, root);
}

// The PCI ancestry of a sysfs device directory: root complex and BDFs from the root down, the
// device's own function last. A netdev or IB device resolves below its PCI function
// (".../0000:00:03.0/virtio2"), so trailing non-BDF components are dropped.
struct PciPath {
  std::string root_complex;
  std::vector<std::string> bdfs;
  fs::path function_dir;  // directory of the last BDF
};

std::optional<PciPath> pci_path_of(const fs::path& resolved) {
  PciPath p;
  fs::path walked;
  for (const auto& part : resolved) {
    walked /= part;
    std::string s = part.string();
    if (is_root_bus(s)) {
      p.root_complex = s;
      p.bdfs.clear();
    } else if (!p.root_complex.empty() && is_bdf(s)) {
      p.bdfs.push_back(*canonical_bdf(s));
      p.function_dir = walked;
    } else if (!p.root_complex.empty() && !p.bdfs.empty()) {
      break;  // below the PCI function: virtio2, net/eth0, ...
    }
  }
  if (p.root_complex.empty() || p.bdfs.empty()) return std::nullopt;
  return p;
}

class Reader {
 public:
  explicit Reader(const SysfsOptions& o) : opt_(o) {}

  Topology run() {
    topo_.source = "sysfs:" + opt_.root;
    fs::path devices = fs::path(opt_.root) / "bus/pci/devices";
    std::error_code ec;
    if (!fs::is_directory(devices, ec)) {
      if (opt_.strict) {
        throw bad_value("sysfs_root", opt_.root,
                        "no bus/pci/devices directory there; expected a sysfs tree such as /sys "
                        "or a capture made by scripts/capture-sysfs.sh");
      }
      topo_.missing.push_back({"PCI devices", devices.string() + " is not readable"});
      return std::move(topo_);
    }
    for (const auto& entry : sorted_entries(devices))
      scan_pci_function(entry);
    scan_infiniband();
    scan_netdevs();
    read_system_facts();
    finish();
    check_device_counts(topo_);
    return std::move(topo_);
  }

 private:
  void scan_pci_function(const fs::path& entry) {
    std::error_code ec;
    fs::path resolved = fs::canonical(entry, ec);
    if (ec) return;
    auto cls = read_number(resolved / "class", 16);
    if (!cls) {
      if (opt_.strict) {
        throw missing_class_file(entry / "class", "0x030200");
      }
      topo_.missing.push_back({"class of " + shown(entry.filename().string()), "unreadable"});
      return;
    }
    auto vendor = read_number(resolved / "vendor", 16).value_or(0);
    auto c = static_cast<uint32_t>(*cls);
    bool gpu = vendor == kVendorNvidia && is_display_class(c);
    bool nvswitch = vendor == kVendorNvidia && c == kClassBridgeOther;
    if (!gpu && !nvswitch) return;  // NICs come from the class/ directories, bridges on demand
    auto path = pci_path_of(resolved);
    if (!path) return;
    add_chain(*path);
    if (gpu) add_gpu(*path);
    if (nvswitch) topo_.nvswitches.push_back({path->bdfs.back()});
  }

  // Adds the function and every bridge above it to the tree.
  void add_chain(const PciPath& path) {
    fs::path dir = path.function_dir;
    for (size_t i = path.bdfs.size(); i-- > 0; dir = dir.parent_path()) {
      const std::string& bdf = path.bdfs[i];
      if (seen_.count(bdf)) continue;
      seen_.insert({bdf, topo_.pci.size()});
      PciNode n;
      n.bdf = bdf;
      n.parent_bdf = i > 0 ? path.bdfs[i - 1] : std::string();
      n.root_complex = path.root_complex;
      auto cls = read_number(dir / "class", 16);
      if (!cls && opt_.strict) {
        throw missing_class_file(dir / "class", "0x060400");
      }
      n.class_code = static_cast<uint32_t>(cls.value_or(0));
      n.vendor = static_cast<uint16_t>(read_number(dir / "vendor", 16).value_or(0));
      n.device = static_cast<uint16_t>(read_number(dir / "device", 16).value_or(0));
      n.numa_node = static_cast<int>(read_number(dir / "numa_node").value_or(kUnknownNuma));
      n.link = read_link(dir);
      if (is_pci_bridge_class(n.class_code)) n.acs_p2p_redirect = read_acs_redirect(dir);
      topo_.pci.push_back(n);
      if (std::none_of(topo_.root_complexes.begin(), topo_.root_complexes.end(),
                       [&](const RootComplex& r) { return r.id == path.root_complex; })) {
        topo_.root_complexes.push_back({path.root_complex, kUnknownNuma, ""});
      }
    }
  }

  PcieLink read_link(const fs::path& dir) {
    PcieLink l;
    auto gen = [&](const char* file) {
      auto text = read_attr(dir / file);
      return text ? std::max(0, pcie_gen_from_speed(*text)) : 0;
    };
    auto width = [&](const char* file) {
      return static_cast<int>(read_number(dir / file).value_or(0));
    };
    l.current_gen = gen("current_link_speed");
    l.current_width = width("current_link_width");
    l.max_gen = gen("max_link_speed");
    l.max_width = width("max_link_width");
    return l;
  }

  // Walks the PCIe extended capability list in the config space (offset 0x100 on) for ACS
  // (capability id 0x000d) and returns bit 2 of its control register (offset +6).
  static int read_acs_redirect(const fs::path& dir) {
    const std::string raw = read_bounded(dir / "config", std::ios::binary).value_or("");
    const std::vector<unsigned char> cfg(raw.begin(), raw.end());
    if (cfg.size() < 0x104) return -1;  // not root: only the first 64 bytes are readable
    auto u32 = [&](size_t off) {
      return static_cast<uint32_t>(cfg[off] | cfg[off + 1] << 8 | cfg[off + 2] << 16 |
                                   static_cast<uint32_t>(cfg[off + 3]) << 24);
    };
    size_t off = 0x100;
    for (int guard = 0; off >= 0x100 && off + 8 <= cfg.size() && guard < 64; ++guard) {
      uint32_t header = u32(off);
      if (header == 0 || header == 0xffffffff) return -1;
      if ((header & 0xffff) == 0x000d) {
        unsigned control = cfg[off + 6] | static_cast<unsigned>(cfg[off + 7]) << 8;
        return (control >> 2) & 1;
      }
      off = header >> 20;
    }
    return -1;
  }

  // The driver bound to a function: the name its `driver` link points at. A live /sys always
  // has the link when a driver is bound; a capture may simply not have copied it.
  std::optional<std::string> bound_driver(const fs::path& function_dir) const {
    std::error_code ec;
    fs::path target = fs::read_symlink(function_dir / "driver", ec);
    if (!ec) return shown(target.filename().string());
    if (opt_.strict) return std::nullopt;
    return std::string();
  }

  void add_gpu(const PciPath& path) {
    const PciNode& node = topo_.pci[seen_.at(path.bdfs.back())];
    Gpu g;
    g.bdf = node.bdf;
    g.numa_node = node.numa_node;
    g.cpu_affinity = shown(read_attr(path.function_dir / "local_cpulist").value_or(""), 4096);
    g.pcie = node.link;
    g.name = fmt::format("NVIDIA device {:04x}", node.device);
    g.kernel_driver = bound_driver(path.function_dir);
    g.nvlinks_known = false;  // sysfs has no NVLink; NVML fills them in
    if (path.bdfs.size() >= 2) {
      const PciNode& port = topo_.pci[seen_.at(path.bdfs[path.bdfs.size() - 2])];
      g.pcie.port_max_gen = port.link.max_gen;
      g.pcie.port_max_width = port.link.max_width;
      if (port.link.max_gen == 0) {
        topo_.missing.push_back(
            {"max_link_speed of " + port.bdf + " (upstream port of " + g.bdf + ")",
             "not readable; cannot tell whether the slot limits the link"});
      }
    } else {
      topo_.missing.push_back({"upstream port of " + g.bdf,
                               "the GPU sits directly on root bus " + path.root_complex +
                                   " (typical of a VM): no port link speed to compare with"});
    }
    if (g.pcie.max_gen == 0) {
      topo_.missing.push_back({"max_link_speed of " + g.bdf, "not readable in sysfs"});
    }
    topo_.gpus.push_back(g);
  }

  Nic& add_nic(const std::string& name, NicKind kind, const fs::path& device_link) {
    std::error_code ec;
    fs::path resolved = resolve_link(device_link, ec);
    auto path = ec ? std::nullopt : pci_path_of(resolved);
    Nic n;
    n.name = name;  // shown() by the caller
    n.kind = kind;
    if (path) {
      add_chain(*path);
      const PciNode& node = topo_.pci[seen_.at(path->bdfs.back())];
      n.bdf = node.bdf;
      n.numa_node = node.numa_node;
      n.pcie = node.link;
    }
    topo_.nics.push_back(n);
    return topo_.nics.back();
  }

  void scan_infiniband() {
    fs::path dir = fs::path(opt_.root) / "class/infiniband";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    for (const fs::path& dev : sorted_entries(dir)) {
      if (!fs::exists(fs::symlink_status(dev / "device", ec)))
        continue;  // soft RDMA (rxe) has no PCI device
      auto layer = read_attr(dev / "ports/1/link_layer").value_or("InfiniBand");
      Nic& nic =
          add_nic(shown(dev.filename().string()),
                  layer == "Ethernet" ? NicKind::kRoce : NicKind::kInfiniBand, dev / "device");
      // "400 Gb/sec (4X NDR)"; anything but a finite rate >= 0 is unknown (0), as a netdev's -1
      if (auto rate = read_attr(dev / "ports/1/rate")) {
        const double gbps = std::atof(rate->c_str());
        if (std::isfinite(gbps) && gbps >= 0) nic.port_rate_gbps = gbps;
      }
      for (const auto& net : sorted_entries(dev / "device/net")) {
        nic.netdevs.push_back(shown(net.filename().string()));
      }
    }
  }

  void scan_netdevs() {
    fs::path dir = fs::path(opt_.root) / "class/net";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    for (const fs::path& itf : sorted_entries(dir)) {
      if (!fs::exists(fs::symlink_status(itf / "device", ec)))
        continue;  // lo, bridges, veth: no hardware
      std::string name = shown(itf.filename().string());
      bool owned = std::any_of(topo_.nics.begin(), topo_.nics.end(), [&](const Nic& n) {
        return std::find(n.netdevs.begin(), n.netdevs.end(), name) != n.netdevs.end();
      });
      if (owned) continue;  // the RDMA device already stands for it
      auto type = read_number(itf / "type").value_or(1);
      if (type == 32) continue;  // IPoIB: the InfiniBand device is the NIC
      Nic& nic = add_nic(name, NicKind::kEthernet, itf / "device");
      nic.netdevs.push_back(name);
      auto mbps = read_number(itf / "speed").value_or(0);
      if (mbps > 0) nic.port_rate_gbps = static_cast<double>(mbps) / 1000.0;
    }
  }

  void read_system_facts() {
    std::error_code ec;
    fs::path nodes = fs::path(opt_.root) / "devices/system/node";
    std::map<int, std::string> node_cpus;
    for (const auto& e : fs::directory_iterator(nodes, ec)) {
      std::string name = e.path().filename().string();
      int id = 0;
      const char* digits = name.data() + 4;
      const char* end = name.data() + name.size();
      // node<N>, N an int: the kernel makes no other (a capture may hold anything).
      if (name.rfind("node", 0) != 0 || name.size() < 5 ||
          !std::all_of(digits, end, [](char c) { return c >= '0' && c <= '9'; }) ||
          std::from_chars(digits, end, id).ec != std::errc()) {
        continue;
      }
      node_cpus[id] = read_attr(e.path() / "cpulist").value_or("");
    }
    topo_.numa_node_count = static_cast<int>(node_cpus.size());
    fs::path groups = fs::path(opt_.root) / "kernel/iommu_groups";
    if (fs::is_directory(groups, ec)) {
      topo_.iommu_groups = static_cast<int>(
          std::distance(fs::directory_iterator(groups, ec), fs::directory_iterator()));
    }
    for (RootComplex& rc : topo_.root_complexes) {
      for (const PciNode& n : topo_.pci) {
        if (n.root_complex == rc.id && n.numa_node != kUnknownNuma) {
          rc.numa_node = n.numa_node;
          break;
        }
      }
      if (auto it = node_cpus.find(rc.numa_node); it != node_cpus.end()) {
        rc.cpu_affinity = it->second;
      }
    }
    if (!opt_.cpuinfo.empty()) {
      std::ifstream in(opt_.cpuinfo);
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("flags", 0) == 0) {
          topo_.in_vm = line.find(" hypervisor") != std::string::npos;
          break;
        }
      }
    }
  }

  void finish() {
    std::sort(topo_.gpus.begin(), topo_.gpus.end(),
              [](const Gpu& a, const Gpu& b) { return a.bdf < b.bdf; });
    for (size_t i = 0; i < topo_.gpus.size(); ++i)
      topo_.gpus[i].index = static_cast<int>(i);
    for (size_t i = 0; i < topo_.nics.size(); ++i)
      topo_.nics[i].index = static_cast<int>(i);
    std::sort(topo_.pci.begin(), topo_.pci.end(),
              [](const PciNode& a, const PciNode& b) { return a.bdf < b.bdf; });
    std::sort(topo_.root_complexes.begin(), topo_.root_complexes.end(),
              [](const RootComplex& a, const RootComplex& b) { return a.id < b.id; });
    topo_.reindex();
  }

  SysfsOptions opt_;
  Topology topo_;
  std::map<std::string, size_t> seen_;  // bdf -> index in topo_.pci (before the final sort)
};

}  // namespace

Topology read_sysfs(const SysfsOptions& options) {
  return Reader(options).run();
}

}  // namespace commtool::topo
