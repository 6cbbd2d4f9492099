// What the doctor tests share: a fake libnvidia-ml whose answers a test sets
// (tests/fake_nvml.cpp, through $COMMTOOL_FAKE_NVML), a sysfs tree in a temporary directory, the
// kernel-log fixtures, and the H100 of the GPU machine as topo sees it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "probes/health/gpu_counters.hpp"
#include "probes/health/sysfs_health.hpp"
#include "probes/topo/topology.hpp"
#include "reports/doctor/doctor_checks.hpp"

namespace doctor_test {

using commtool::health::CountersRead;
using commtool::health::GpuCounters;
using commtool::health::kRdmaCounters;
using commtool::health::read_gpu_counters;
using commtool::reports::doctor::Check;
using commtool::reports::doctor::Severity;
namespace topo = commtool::topo;

inline std::string fixture(const std::string& name) {
  std::ifstream in(std::string(COMMTOOL_SOURCE_DIR) + "/tests/fixtures/kernel_log/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct FakeNvml {
  explicit FakeNvml(const std::string& answers) {
    setenv("COMMTOOL_FAKE_NVML", answers.c_str(), 1);
  }
  ~FakeNvml() { unsetenv("COMMTOOL_FAKE_NVML"); }
  static CountersRead read() { return read_gpu_counters({"0000:3b:00.0"}, COMMTOOL_FAKE_NVML); }
};

inline topo::Gpu h100() {
  topo::Gpu g;
  g.index = 0;
  g.bdf = "0000:91:00.0";  // the GPU that fell off the bus in public_xid_lines.txt
  g.name = "NVIDIA H100 80GB HBM3";
  g.sm = 90;
  g.pcie = {5, 16, 5, 16, 5, 16};
  return g;
}

inline GpuCounters counters(const std::string& answers) {
  FakeNvml fake(answers);
  return FakeNvml::read().gpus.at(0);
}

inline const Check& area(const std::vector<Check>& checks, const std::string& a) {
  for (const Check& c : checks)
    if (c.area == a) return c;
  static const Check none{"none", -1, "none", Severity::kPass, "no such check", "", std::nullopt};
  ADD_FAILURE() << "no check " << a;
  return none;
}

struct FakeSysfs {
  std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("commtool-sysfs-" + std::to_string(getpid()));
  FakeSysfs() { std::filesystem::create_directories(root); }
  ~FakeSysfs() { std::filesystem::remove_all(root); }
  void write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = root / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void port(const std::string& dev, int n, const std::string& state, uint64_t symbol_errors,
            uint64_t link_downed) {
    const std::string d = "class/infiniband/" + dev + "/ports/" + std::to_string(n) + "/";
    write(d + "state", state + "\n");
    write(d + "phys_state", state == "4: ACTIVE" ? "5: LinkUp\n" : "2: Polling\n");
    write(d + "rate", "400 Gb/sec (4X NDR)\n");
    write(d + "link_layer", "InfiniBand\n");
    for (const char* c : kRdmaCounters)
      write(d + "counters/" + c, "0\n");
    write(d + "counters/symbol_error", std::to_string(symbol_errors) + "\n");
    write(d + "counters/link_downed", std::to_string(link_downed) + "\n");
  }
};

}  // namespace doctor_test
