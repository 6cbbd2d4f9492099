#include "tests/topo_fixtures.hpp"

#include <fmt/format.h>

namespace commtool::fixtures {

namespace {
constexpr const char* kGen5 = "32.0 GT/s PCIe";
constexpr const char* kGen4 = "16.0 GT/s PCIe";
constexpr const char* kGen1 = "2.5 GT/s PCIe";
}  // namespace

void build_vm_one_gpu(SysfsBuilder& fs) {
  // As read on the GPU machine (2026-12-02): the H200 sits on the root bus, no bridge above it,
  // numa_node -1; the NIC is virtio with its netdev one level below the PCI function.
  fs.device("pci0000:00/0000:00:00.0", {{"class", "0x060000"}, {"vendor", "0x8086"}});
  fs.device("pci0000:00/0000:00:06.0",
            SysfsBuilder::nvidia_gpu("0x2335", -1, "0-15", kGen5, 16, kGen5, 16));
  fs.device("pci0000:00/0000:00:03.0",
            {{"class", "0x020000"}, {"vendor", "0x1af4"}, {"numa_node", "-1"}});
  fs.netdev("eth0", "pci0000:00/0000:00:03.0/virtio2", "-1");
  fs.virtual_netdev("lo");
  fs.numa_node(0, "0-15");
}

void build_two_socket_8gpu(SysfsBuilder& fs) {
  // Four root complexes, two per socket; each: root port -> switch upstream port -> three
  // downstream ports with two GPUs and one ConnectX NIC.
  const char* roots[] = {"15", "36", "b5", "d8"};
  int gpu = 0;
  for (int r = 0; r < 4; ++r) {
    int numa = r < 2 ? 0 : 1;
    std::string cpus = numa == 0 ? "0-31" : "32-63";
    std::string rc = fmt::format("pci0000:{}", roots[r]);
    int bus = std::stoi(roots[r], nullptr, 16);
    std::string port = fmt::format("{}/0000:{:02x}:01.0", rc, bus);
    std::string up = fmt::format("{}/0000:{:02x}:00.0", port, bus + 1);
    fs.device(port, SysfsBuilder::bridge(kGen5, 16, numa));
    fs.device(up, SysfsBuilder::bridge(kGen5, 16, numa));
    for (int d = 0; d < 3; ++d) {
      std::string down = fmt::format("{}/0000:{:02x}:{:02x}.0", up, bus + 2, d * 8);
      fs.device(down, SysfsBuilder::bridge(kGen5, 16, numa));
      std::string ep = fmt::format("{}/0000:{:02x}:00.0", down, bus + 3 + d);
      if (d < 2) {
        fs.device(ep, SysfsBuilder::nvidia_gpu("0x2330", numa, cpus, kGen1, 16, kGen5, 16));
        ++gpu;
      } else {
        fs.device(ep, SysfsBuilder::nic("0x020700", numa, kGen5, 16));
        fs.infiniband(fmt::format("mlx5_{}", r), ep, "InfiniBand", "400 Gb/sec (4X NDR)",
                      {fmt::format("ib{}", r)});
        fs.netdev(fmt::format("ib{}", r), ep, "400000", 32);
      }
    }
  }
  fs.numa_node(0, "0-31");
  fs.numa_node(1, "32-63");
  fs.iommu_groups(0);
}

void build_degraded_link(SysfsBuilder& fs) {
  // A Gen5 GPU in a Gen4 root port, trained to x8 and idling at Gen1; the only NIC (RoCE) is
  // on the other socket.
  fs.device("pci0000:00/0000:00:01.0", SysfsBuilder::bridge(kGen4, 16, 0));
  fs.device("pci0000:00/0000:00:01.0/0000:01:00.0",
            SysfsBuilder::nvidia_gpu("0x2335", 0, "0-15", kGen1, 8, kGen5, 16));
  fs.device("pci0000:80/0000:80:02.0", SysfsBuilder::bridge(kGen4, 16, 1));
  fs.device("pci0000:80/0000:80:02.0/0000:81:00.0", SysfsBuilder::nic("0x020000", 1, kGen4, 16));
  fs.infiniband("mlx5_0", "pci0000:80/0000:80:02.0/0000:81:00.0", "Ethernet", "200 Gb/sec (4X HDR)",
                {"ens1f0"});
  fs.netdev("ens1f0", "pci0000:80/0000:80:02.0/0000:81:00.0", "200000");
  fs.numa_node(0, "0-15");
  fs.numa_node(1, "16-31");
}

}  // namespace commtool::fixtures
