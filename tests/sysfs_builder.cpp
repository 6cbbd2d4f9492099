#include "tests/sysfs_builder.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace commtool::fixtures {

SysfsBuilder::SysfsBuilder() {
  std::string pattern = (fs::temp_directory_path() / "commtool-sysfs-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = pattern;
  fs::create_directories(fs::path(root_) / "bus/pci/devices");
  fs::create_directories(fs::path(root_) / "devices/system/node");
}

SysfsBuilder::~SysfsBuilder() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void SysfsBuilder::write(const std::string& relative, const std::string& content) {
  fs::path p = fs::path(root_) / relative;
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content << "\n";
}

void SysfsBuilder::link(const std::string& relative_link, const std::string& target) {
  fs::path l = fs::path(root_) / relative_link;
  fs::create_directories(l.parent_path());
  // Relative, as in the real /sys, so the tree can be moved.
  fs::create_symlink(fs::relative(fs::path(root_) / target, l.parent_path()), l);
}

void SysfsBuilder::device(const std::string& path, const Attrs& attrs) {
  for (const auto& [name, value] : attrs)
    write("devices/" + path + "/" + name, value);
  std::string bdf = fs::path(path).filename().string();
  link("bus/pci/devices/" + bdf, "devices/" + path);
}

void SysfsBuilder::driver(const std::string& path, const std::string& name) {
  fs::create_directories(fs::path(root_) / "bus/pci/drivers" / name);
  link("devices/" + path + "/driver", "bus/pci/drivers/" + name);
}

void SysfsBuilder::config(const std::string& path, const std::vector<unsigned char>& bytes) {
  fs::path p = fs::path(root_) / "devices" / path / "config";
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void SysfsBuilder::infiniband(const std::string& name, const std::string& device_path,
                              const std::string& link_layer, const std::string& rate,
                              const std::vector<std::string>& netdevs) {
  write("class/infiniband/" + name + "/ports/1/link_layer", link_layer);
  write("class/infiniband/" + name + "/ports/1/rate", rate);
  link("class/infiniband/" + name + "/device", "devices/" + device_path);
  for (const auto& n : netdevs)
    write("devices/" + device_path + "/net/" + n + "/type", "1");
}

void SysfsBuilder::netdev(const std::string& name, const std::string& device_path,
                          const std::string& speed, int type) {
  fs::create_directories(fs::path(root_) / "devices" / device_path);
  write("class/net/" + name + "/speed", speed);
  write("class/net/" + name + "/type", std::to_string(type));
  link("class/net/" + name + "/device", "devices/" + device_path);
}

void SysfsBuilder::virtual_netdev(const std::string& name) {
  write("class/net/" + name + "/type", name == "lo" ? "772" : "1");
}

void SysfsBuilder::numa_node(int id, const std::string& cpulist) {
  write("devices/system/node/node" + std::to_string(id) + "/cpulist", cpulist);
}

void SysfsBuilder::iommu_groups(int count) {
  fs::create_directories(fs::path(root_) / "kernel/iommu_groups");
  for (int i = 0; i < count; ++i) {
    fs::create_directories(fs::path(root_) / "kernel/iommu_groups" / std::to_string(i));
  }
}

void SysfsBuilder::remove(const std::string& relative) {
  fs::remove(fs::path(root_) / relative);
}

Attrs SysfsBuilder::bridge(const std::string& max_speed, int max_width, int numa) {
  return {{"class", "0x060400"},
          {"vendor", "0x1000"},
          {"device", "0xc030"},
          {"numa_node", std::to_string(numa)},
          {"max_link_speed", max_speed},
          {"max_link_width", std::to_string(max_width)},
          {"current_link_speed", max_speed},
          {"current_link_width", std::to_string(max_width)}};
}

Attrs SysfsBuilder::nvidia_gpu(const std::string& device_id, int numa, const std::string& cpus,
                               const std::string& cur_speed, int cur_width,
                               const std::string& max_speed, int max_width) {
  return {{"class", "0x030200"},
          {"vendor", "0x10de"},
          {"device", device_id},
          {"numa_node", std::to_string(numa)},
          {"local_cpulist", cpus},
          {"current_link_speed", cur_speed},
          {"current_link_width", std::to_string(cur_width)},
          {"max_link_speed", max_speed},
          {"max_link_width", std::to_string(max_width)}};
}

Attrs SysfsBuilder::nic(const std::string& cls, int numa, const std::string& max_speed,
                        int max_width) {
  return {{"class", cls},
          {"vendor", "0x15b3"},
          {"device", "0x1021"},
          {"numa_node", std::to_string(numa)},
          {"max_link_speed", max_speed},
          {"max_link_width", std::to_string(max_width)},
          {"current_link_speed", max_speed},
          {"current_link_width", std::to_string(max_width)}};
}

}  // namespace commtool::fixtures
