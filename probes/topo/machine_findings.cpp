#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "probes/base/tool_packages.hpp"
#include "probes/topo/finding_rules.hpp"
#include "probes/topo/findings.hpp"
#include "probes/topo/link_rate.hpp"

namespace commtool::topo {

namespace rules {

std::string gpu_name(const Gpu& g) {
  return fmt::format("GPU{} ({})", g.index, g.bdf);
}

namespace {

std::string gpu_list(const std::vector<const Gpu*>& gpus) {
  std::vector<std::string> names;
  for (const Gpu* g : gpus)
    names.push_back("GPU" + std::to_string(g->index));
  return fmt::format("{}", fmt::join(names, ", "));
}

void no_gpu_finding(const Topology& topo, std::vector<Finding>& out) {
  bool file = !topo.read_from_sysfs();
  out.push_back(
      {Severity::kWarning, "no-gpu",
       file ? "the topology file lists no NVIDIA GPU: nothing here can run NCCL on a GPU"
            : "no NVIDIA GPU on the PCIe bus: nothing here can run CUDA or NCCL",
       file ? "no <gpu> element and no display-class <pci> (class 0x03) of NVIDIA or unstated "
              "vendor"
            : fmt::format("no PCI function of vendor 0x10de with a display class (0x03xxxx) under "
                          "{}/bus/pci/devices",
                          topo.source.substr(6)),
       file ? "check that the file is the one NCCL_TOPO_FILE points at"
            : fmt::format("`lspci -d 10de:` ({}) lists what the bus has; in a container the GPUs "
                          "must be passed in (docker --gpus all, or the device plugin's resource "
                          "request)",
                          tools::kPciutils)});
}

std::string driver_advice(const std::string& driver) {
  if (driver.empty()) {
    return "load the NVIDIA driver (`modprobe nvidia`); `dmesg | grep -i nvrm` says why it did "
           "not bind";
  }
  if (driver == "vfio-pci") {
    return "the GPU is reserved for passthrough to a VM: unbind it from vfio-pci to use it here";
  }
  if (driver == "nouveau") {
    return "blacklist nouveau and install the NVIDIA driver; CUDA does not run on nouveau";
  }
  return "bind the GPU to the nvidia driver";
}

void unbound_gpu_findings(const Topology& topo, std::vector<Finding>& out) {
  std::map<std::string, std::vector<const Gpu*>> by_driver;  // driver -> GPUs bound to it
  for (const Gpu& g : topo.gpus) {
    if (g.kernel_driver && *g.kernel_driver != "nvidia") by_driver[*g.kernel_driver].push_back(&g);
  }
  for (const auto& [driver, gpus] : by_driver) {
    std::vector<std::string> evidence;
    for (const Gpu* g : gpus)
      evidence.push_back(g->bdf + "/driver " + (driver.empty() ? "absent" : "-> " + driver));
    out.push_back({Severity::kWarning, "gpu-driver-not-bound",
                   fmt::format("{} {} bound to {}: CUDA, NVML and NCCL cannot use {}",
                               gpu_list(gpus), gpus.size() == 1 ? "is" : "are",
                               driver.empty() ? "no driver" : driver + ", not nvidia",
                               gpus.size() == 1 ? "it" : "them"),
                   fmt::format("sysfs {}", fmt::join(evidence, ", ")), driver_advice(driver)});
  }
}

}  // namespace

}  // namespace rules

std::optional<std::string> unusable_driver(const Topology& topo) {
  for (const Gpu& g : topo.gpus) {
    if (g.kernel_driver && *g.kernel_driver != "nvidia") {
      return fmt::format("GPU {} ({}) is bound to {}", g.index, g.bdf,
                         g.kernel_driver->empty() ? "no driver (the NVIDIA driver is not loaded?)"
                                                  : *g.kernel_driver + ", not nvidia");
    }
  }
  return std::nullopt;
}

namespace rules {

void driver_findings(const Topology& topo, std::vector<Finding>& out) {
  if (topo.gpus.empty()) {
    no_gpu_finding(topo, out);
    return;
  }
  unbound_gpu_findings(topo, out);
  if (!topo.nvml_error.empty()) {
    out.push_back({Severity::kWarning, "nvml-unusable",
                   fmt::format("NVML cannot be used although {} GPU(s) are on the bus: the driver "
                               "is missing, broken or does not match its libraries",
                               topo.gpus.size()),
                   "NVML: " + topo.nvml_error,
                   fmt::format("run nvidia-smi ({}): \"Driver/library version mismatch\" means the "
                               "kernel module and the user-space libraries differ (reload the "
                               "module or reboot); \"couldn't communicate with the NVIDIA "
                               "driver\" means it is not loaded",
                               tools::kNvidiaSmi)});
  }
  if (!topo.cuda_error.empty()) {
    out.push_back(
        {Severity::kWarning, "cuda-unusable",
         fmt::format("CUDA cannot be used although {} GPU(s) are on the bus", topo.gpus.size()),
         "CUDA: " + topo.cuda_error,
         fmt::format("run nvidia-smi ({}), then check CUDA_VISIBLE_DEVICES and that the driver "
                     "is at least as new as the CUDA runtime (`nvidia-smi` prints the highest "
                     "CUDA it supports)",
                     tools::kNvidiaSmi)});
  }
}

}  // namespace rules

}  // namespace commtool::topo
