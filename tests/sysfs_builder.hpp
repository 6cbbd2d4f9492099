// Builds a sysfs-shaped tree in a temporary directory: devices under devices/pci..., the
// bus/pci/devices symlinks, class/net and class/infiniband entries. Tests describe machines
// with it instead of shipping thousands of files.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace commtool::fixtures {

using Attrs = std::map<std::string, std::string>;

class SysfsBuilder {
 public:
  SysfsBuilder();
  ~SysfsBuilder();
  SysfsBuilder(const SysfsBuilder&) = delete;
  SysfsBuilder& operator=(const SysfsBuilder&) = delete;

  const std::string& root() const { return root_; }

  // path below devices/, e.g. "pci0000:00/0000:00:01.0/0000:01:00.0"; the last component is
  // the device's BDF. Writes each attribute as a file and links bus/pci/devices/<bdf>.
  void device(const std::string& path, const Attrs& attrs);
  // Raw bytes for a device's config file (for ACS).
  void config(const std::string& path, const std::vector<unsigned char>& bytes);
  void infiniband(const std::string& name, const std::string& device_path,
                  const std::string& link_layer, const std::string& rate,
                  const std::vector<std::string>& netdevs = {});
  // device_path may point below the PCI function ("pci0000:00/0000:00:03.0/virtio2").
  void netdev(const std::string& name, const std::string& device_path, const std::string& speed,
              int type = 1);
  void virtual_netdev(const std::string& name);  // lo, docker0: no device link
  void numa_node(int id, const std::string& cpulist);
  void iommu_groups(int count);
  void remove(const std::string& relative);
  // Binds a device to a kernel driver: devices/<path>/driver -> bus/pci/drivers/<name>.
  void driver(const std::string& path,
              const std::string& name);  // delete a file to simulate a broken tree

  // Common attribute sets.
  static Attrs bridge(const std::string& max_speed = "32.0 GT/s PCIe", int max_width = 16,
                      int numa = 0);
  static Attrs nvidia_gpu(const std::string& device_id, int numa, const std::string& cpus,
                          const std::string& cur_speed, int cur_width, const std::string& max_speed,
                          int max_width);
  static Attrs nic(const std::string& cls, int numa,
                   const std::string& max_speed = "16.0 GT/s PCIe", int max_width = 16);

 private:
  void write(const std::string& relative, const std::string& content);
  void link(const std::string& relative_link, const std::string& target);
  std::string root_;
};

}  // namespace commtool::fixtures
