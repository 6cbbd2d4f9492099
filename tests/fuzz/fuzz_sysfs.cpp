// `commtool topo --sysfs-root DIR`: the sysfs reader's parsers (class codes, vendor and device
// ids, numa_node, link speeds and widths, cpulists, the PCIe config space's ACS capability, a
// NIC's speed and type, an InfiniBand port's rate and link layer, NUMA node directory names,
// /proc/cpuinfo's flags) are private to the reader, so each input is written into a small sysfs
// tree of fixed shape, read strictly as --sysfs-root reads, and analysed as topo analyses.
//
// The tree: a root port 0000:00:01.0 with a GPU 0000:01:00.0 below it, a NIC 0000:00:02.0 as
// netdev eth0 and as InfiniBand device mlx5_0, one NUMA node directory. The input is the file
// contents, one per line in the order of kFields; the last field (the root port's config
// space) takes the rest of the input, newlines and all.
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fuzz_common.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/sysfs_reader.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* kPort = "devices/pci0000:00/0000:00:01.0";
constexpr const char* kGpu = "devices/pci0000:00/0000:00:01.0/0000:01:00.0";
constexpr const char* kNic = "devices/pci0000:00/0000:00:02.0";

// Where each field of the input goes, relative to the root; "" for the two named by hand.
constexpr std::array<const char*, 22> kFields = {
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/class",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/device",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/current_link_speed",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/current_link_width",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/max_link_speed",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/max_link_width",
    "devices/pci0000:00/0000:00:01.0/0000:01:00.0/local_cpulist",
    "devices/pci0000:00/0000:00:01.0/class",
    "devices/pci0000:00/0000:00:01.0/max_link_speed",
    "devices/pci0000:00/0000:00:01.0/max_link_width",
    "devices/pci0000:00/0000:00:01.0/numa_node",
    "devices/pci0000:00/0000:00:02.0/numa_node",
    "class/net/eth0/type",
    "class/net/eth0/speed",
    "class/infiniband/mlx5_0/ports/1/rate",
    "class/infiniband/mlx5_0/ports/1/link_layer",
    "",  // the NUMA node directory's name (devices/system/node/<name>)
    "",  // its cpulist
    "cpuinfo",
    "devices/pci0000:00/0000:00:01.0/config",
};

const fs::path& root() {
  static const fs::path dir = [] {
    const fs::path& r = commtool::fuzz::scratch_dir("commtool-fuzz-sysfs");
    for (const char* d : {kGpu, kNic, "bus/pci/devices", "class/net/eth0",
                          "class/infiniband/mlx5_0/ports/1", "kernel/iommu_groups/0"}) {
      fs::create_directories(r / d);
    }
    fs::create_directory_symlink("../../../" + std::string(kGpu),
                                 r / "bus/pci/devices/0000:01:00.0");
    fs::create_directory_symlink("../../../" + std::string(kPort),
                                 r / "bus/pci/devices/0000:00:01.0");
    fs::create_directory_symlink("../../../" + std::string(kNic),
                                 r / "bus/pci/devices/0000:00:02.0");
    fs::create_directory_symlink("../../../" + std::string(kNic), r / "class/net/eth0/device");
    fs::create_directory_symlink("../../../" + std::string(kNic),
                                 r / "class/infiniband/mlx5_0/device");
    for (const char* f : {"class", "vendor", "device"}) {
      std::ofstream(r / kNic / f) << (f[0] == 'c'   ? "0x020000\n"
                                      : f[0] == 'v' ? "0x15b3\n"
                                                    : "0x1021\n");
    }
    std::ofstream(r / kPort / "vendor") << "0x8086\n";
    return r;
  }();
  return dir;
}

void write(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> field =
      commtool::fuzz::split_fields(commtool::fuzz::text_of(data, size), '\n', kFields.size());
  for (size_t i = 0; i < kFields.size(); ++i) {
    if (kFields[i][0] != '\0') write(root() / kFields[i], field[i]);
  }
  // One NUMA node directory, named by the input (a path component: no '/', not . or ..).
  const fs::path nodes = root() / "devices/system/node";
  std::error_code ec;
  fs::remove_all(nodes, ec);
  std::string node = field[18];
  if (node.empty() || node == "." || node == ".." || node.find('/') != std::string::npos ||
      node.find('\0') != std::string::npos || node.size() > 200) {
    node = "node0";
  }
  fs::create_directories(nodes / node);
  write(nodes / node / "cpulist", field[19]);

  commtool::fuzz::expect_error_or_value([&] {
    commtool::topo::Topology topo = commtool::topo::read_sysfs(
        {root().string(), /*strict=*/true, (root() / "cpuinfo").string()});
    commtool::topo::analyze(topo);
  });
  return 0;
}
