#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "probes/base/error.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/sysfs_reader.hpp"
#include "reports/topo/topo_report.hpp"
#include "tests/topo_fixtures.hpp"

using namespace commtool;
using namespace commtool::topo;
using commtool::fixtures::SysfsBuilder;
namespace fixtures = commtool::fixtures;

namespace {

Topology read(const SysfsBuilder& fs) {
  return read_sysfs({fs.root(), true, ""});
}

bool has_missing(const Topology& t, const std::string& what_prefix) {
  return std::any_of(t.missing.begin(), t.missing.end(),
                     [&](const Missing& m) { return m.what.rfind(what_prefix, 0) == 0; });
}

// The message of the usage error reading fs must raise ("" and a test failure when none).
std::string usage_error_reading(const SysfsBuilder& fs) {
  try {
    read(fs);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "reading " << fs.root() << " succeeded";
  return {};
}

bool has_finding(const Analysis& a, const std::string& code) {
  return std::any_of(a.findings.begin(), a.findings.end(),
                     [&](const Finding& f) { return f.code == code; });
}

}  // namespace

TEST(SysfsVm, FindsTheOneGpuWithItsGen5x16Link) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Topology t = read(fs);
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].bdf, "0000:00:06.0");
  EXPECT_EQ(t.gpus[0].pcie.max_gen, 5);
  EXPECT_EQ(t.gpus[0].pcie.max_width, 16);
  EXPECT_EQ(t.gpus[0].pcie.current_gen, 5);
  EXPECT_EQ(t.gpus[0].numa_node, kUnknownNuma);
  EXPECT_EQ(t.gpus[0].cpu_affinity, "0-15");
}

TEST(SysfsVm, GpuOnTheRootBusIsNotedNotAnError) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Topology t = read(fs);
  EXPECT_TRUE(has_missing(t, "upstream port of 0000:00:06.0"));
  EXPECT_EQ(t.gpus[0].pcie.port_max_gen, 0);
  EXPECT_EQ(t.pci.size(), 2u);  // the GPU and the NIC; the host bridge is not on their path
}

TEST(SysfsVm, VirtioNicResolvesToItsPciFunction) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Topology t = read(fs);
  ASSERT_EQ(t.nics.size(), 1u);  // lo has no device and is skipped
  EXPECT_EQ(t.nics[0].name, "eth0");
  EXPECT_EQ(t.nics[0].bdf, "0000:00:03.0");
  EXPECT_EQ(t.nics[0].kind, NicKind::kEthernet);
  EXPECT_EQ(t.nics[0].port_rate_gbps, 0.0);  // speed -1: unknown
}

TEST(SysfsVm, UnknownNumaIsANoteOnAOneNodeMachine) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Topology t = read(fs);
  Analysis a = analyze(t);
  auto it = std::find_if(a.findings.begin(), a.findings.end(),
                         [](const Finding& f) { return f.code == "numa-unknown"; });
  ASSERT_NE(it, a.findings.end());
  EXPECT_EQ(it->severity, Severity::kNote);
  EXPECT_EQ(t.numa_node_count, 1);
}

TEST(SysfsVm, SingleGpuHasNoPeerToConnect) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Analysis a = analyze(read(fs));
  EXPECT_TRUE(a.p2p.empty());
  EXPECT_NE(a.p2p_summary.find("no peer"), std::string::npos);
}

// A netdev can be renamed to almost anything, and --sysfs-root reads a capture someone sent:
// names from sysfs reach the terminal escaped, as an NCCL file's do (issue 16).
TEST(SysfsVm, ControlCharactersInNamesReachNoTerminal) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  fs.netdev("eth1\x1b[31m", "pci0000:00/0000:00:03.0/virtio3", "-1");
  fs.infiniband("mlx5_\x1b[2J", "pci0000:00/0000:00:03.0", "InfiniBand", "400 Gb/sec (4X NDR)",
                {"ib0\x07"});
  fs.driver("pci0000:00/0000:00:06.0", "vfio\x1b]0;x\x07");
  Topology t = read(fs);
  const auto raw = [](const std::string& s) {
    return std::any_of(s.begin(), s.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  };
  ASSERT_EQ(t.nics.size(), 3u);
  for (const Nic& n : t.nics) {
    EXPECT_FALSE(raw(n.name)) << n.name;
    for (const std::string& d : n.netdevs)
      EXPECT_FALSE(raw(d)) << d;
  }
  ASSERT_TRUE(t.gpus[0].kernel_driver.has_value());
  EXPECT_EQ(*t.gpus[0].kernel_driver, "vfio\\x1b]0;x\\x07");
  EXPECT_TRUE(std::any_of(t.nics.begin(), t.nics.end(),
                          [](const Nic& n) { return n.name == "eth1\\x1b[31m"; }));
  const std::string text = commtool::reports::render_topo_text(t, analyze(t));
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
}

// A capture someone sent may link an attribute to /dev/zero or grow one past any page: exit 2
// naming the file, not std::bad_alloc (issue 16).
TEST(SysfsErrors, AnEndlessOrHugeAttributeIsUsageErrorNamingIt) {
  const std::string cpulist = "devices/pci0000:00/0000:00:06.0/local_cpulist";
  {
    SysfsBuilder fs;
    fixtures::build_vm_one_gpu(fs);
    std::filesystem::remove(fs.root() + "/" + cpulist);
    std::filesystem::create_symlink("/dev/zero", fs.root() + "/" + cpulist);
    const std::string message = usage_error_reading(fs);
    EXPECT_NE(message.find("local_cpulist: not a regular file"), std::string::npos) << message;
  }
  {
    SysfsBuilder fs;
    fixtures::build_vm_one_gpu(fs);
    std::ofstream(fs.root() + "/" + cpulist) << std::string(1 << 20, '0');
    const std::string message = usage_error_reading(fs);
    EXPECT_NE(message.find("local_cpulist: more than 65536 bytes"), std::string::npos) << message;
  }
}

TEST(SysfsTwoSocket, FindsEightGpusFourNicsFourRootComplexes) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Topology t = read(fs);
  EXPECT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(t.nics.size(), 4u);  // ib0..3 are IPoIB of the mlx5 devices, not NICs of their own
  EXPECT_EQ(t.root_complexes.size(), 4u);
  EXPECT_EQ(t.numa_node_count, 2);
  EXPECT_EQ(t.iommu_groups, 0);
}

TEST(SysfsTwoSocket, GpuIndicesFollowPciBusOrder) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Topology t = read(fs);
  for (size_t i = 1; i < t.gpus.size(); ++i) {
    EXPECT_LT(t.gpus[i - 1].bdf, t.gpus[i].bdf);
    EXPECT_EQ(t.gpus[i].index, static_cast<int>(i));
  }
}

TEST(SysfsTwoSocket, InfiniBandNicKeepsItsNetdevAndRate) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Topology t = read(fs);
  EXPECT_EQ(t.nics[0].name, "mlx5_0");
  EXPECT_EQ(t.nics[0].kind, NicKind::kInfiniBand);
  EXPECT_DOUBLE_EQ(t.nics[0].port_rate_gbps, 400.0);
  EXPECT_EQ(t.nics[0].netdevs, std::vector<std::string>{"ib0"});
}

TEST(SysfsTwoSocket, SameSwitchIsPixSameSocketIsNodeOtherSocketIsSys) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Analysis a = analyze(read(fs));
  EXPECT_EQ(label(a.matrix.cells[0][1]), "PIX");
  EXPECT_EQ(label(a.matrix.cells[0][2]), "NODE");
  EXPECT_EQ(label(a.matrix.cells[0][4]), "SYS");
  EXPECT_EQ(label(a.matrix.cells[0][8]), "PIX");  // GPU0 - NIC0 share the switch
  EXPECT_EQ(label(a.matrix.cells[8][11]), "SYS");
}

TEST(SysfsTwoSocket, EachGpuPairsWithTheNicOnItsSwitch) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Analysis a = analyze(read(fs));
  for (const NicPairing& p : a.nic_pairing) {
    EXPECT_EQ(p.nic, p.gpu / 2) << "GPU" << p.gpu;
    EXPECT_EQ(p.path.path, PathClass::kPix);
  }
}

TEST(SysfsTwoSocket, CrossRootComplexPairsAreOneWarning) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Analysis a = analyze(read(fs));
  auto n = std::count_if(a.findings.begin(), a.findings.end(),
                         [](const Finding& f) { return f.code == "different-root-complexes"; });
  EXPECT_EQ(n, 1);
}

TEST(SysfsTwoSocket, IdleGen1IsANoteNotAWarning) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Analysis a = analyze(read(fs));
  EXPECT_TRUE(has_finding(a, "pcie-gen-below-max"));
  EXPECT_FALSE(has_finding(a, "pcie-width-degraded"));
  for (const Finding& f : a.findings) {
    if (f.code == "pcie-gen-below-max") {
      EXPECT_EQ(f.severity, Severity::kNote);
    }
  }
}

TEST(SysfsTwoSocket, ExpectedRateIsGen5x16Payload) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  Analysis a = analyze(read(fs));
  EXPECT_NEAR(a.rates[0].pcie_raw_gbps, 63.02, 0.01);
  EXPECT_NEAR(a.rates[0].pcie_current_raw_gbps, 4.0, 0.01);  // Gen1 x16 while idle
}

TEST(SysfsDegraded, WidthBelowMaximumIsAWarningWithEvidence) {
  SysfsBuilder fs;
  fixtures::build_degraded_link(fs);
  Analysis a = analyze(read(fs));
  auto it = std::find_if(a.findings.begin(), a.findings.end(),
                         [](const Finding& f) { return f.code == "pcie-width-degraded"; });
  ASSERT_NE(it, a.findings.end());
  EXPECT_EQ(it->severity, Severity::kWarning);
  EXPECT_NE(it->message.find("x8"), std::string::npos);
  EXPECT_NE(it->evidence.find("current_link_width=8"), std::string::npos);
}

TEST(SysfsDegraded, Gen4SlotCapsTheGen5Gpu) {
  SysfsBuilder fs;
  fixtures::build_degraded_link(fs);
  Topology t = read(fs);
  EXPECT_EQ(t.gpus[0].pcie.port_max_gen, 4);
  EXPECT_EQ(t.gpus[0].pcie.attainable_gen(), 4);
  EXPECT_TRUE(has_finding(analyze(t), "pcie-slot-limits-gen"));
}

TEST(SysfsDegraded, NicOnTheOtherSocketIsFlagged) {
  SysfsBuilder fs;
  fixtures::build_degraded_link(fs);
  Topology t = read(fs);
  Analysis a = analyze(t);
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].kind, NicKind::kRoce);
  EXPECT_EQ(t.nics[0].netdevs, std::vector<std::string>{"ens1f0"});
  EXPECT_EQ(label(a.nic_pairing[0].path), "SYS");
  EXPECT_TRUE(has_finding(a, "nic-numa-mismatch"));
}

TEST(SysfsErrors, StrictRootWithoutPciDevicesIsUsageError) {
  SysfsBuilder fs;
  fs.remove("bus/pci/devices");
  EXPECT_NE(usage_error_reading(fs).find("bus/pci/devices"), std::string::npos);
}

TEST(SysfsErrors, DeviceWithoutClassFileIsUsageErrorNamingTheFile) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  fs.remove("devices/pci0000:00/0000:00:06.0/class");
  EXPECT_NE(usage_error_reading(fs).find("0000:00:06.0/class"), std::string::npos);
}

TEST(SysfsErrors, LiveModeNotesAMissingTreeAndGoesOn) {
  SysfsBuilder fs;
  fs.remove("bus/pci/devices");
  Topology t = read_sysfs({fs.root(), false, ""});
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_TRUE(has_missing(t, "PCI devices"));
}

TEST(SysfsAcs, RedirectBitIsReadFromTheExtendedCapability) {
  SysfsBuilder fs;
  fixtures::build_two_socket_8gpu(fs);
  std::vector<unsigned char> cfg(4096, 0);
  // Extended capability at 0x100: id 0x000d (ACS), version 1, next 0; control at +6, bit 2.
  cfg[0x100] = 0x0d;
  cfg[0x102] = 0x01;
  cfg[0x106] = 0x04;
  fs.config("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0", cfg);
  Topology t = read(fs);
  const PciNode* down = t.find_pci("0000:17:00.0");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->acs_p2p_redirect, 1);
  EXPECT_EQ(t.find_pci("0000:17:08.0")->acs_p2p_redirect, -1);  // no readable config
}

TEST(Cpulist, ListsEveryCpuOfRangesAndSingles) {
  EXPECT_EQ(parse_cpulist("0-15")->size(), 16u);
  EXPECT_EQ(*parse_cpulist("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(parse_cpulist("")->empty());
  EXPECT_FALSE(parse_cpulist("3-1").has_value());
  EXPECT_FALSE(parse_cpulist("a").has_value());
  // Far past any machine's CPUs: refused, not expanded into gigabytes (a fuzzer's finding).
  EXPECT_FALSE(parse_cpulist("0-444444444").has_value());
  EXPECT_FALSE(parse_cpulist("70000").has_value());
  EXPECT_EQ(parse_cpulist("0-8191")->size(), 8192u);
}

TEST(SysfsNetdev, LinkIntoAMissingDirectoryStillFindsThePciFunction) {
  // A capture kept in git loses empty directories such as .../0000:00:03.0/virtio2.
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  std::filesystem::remove_all(std::filesystem::path(fs.root()) /
                              "devices/pci0000:00/0000:00:03.0/virtio2");
  Topology t = read(fs);
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].bdf, "0000:00:03.0");
}

// --- Which kernel driver holds each GPU ---

TEST(SysfsDriver, BoundDriverIsTheDriverLinksName) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  fs.driver("pci0000:00/0000:00:06.0", "vfio-pci");
  Topology t = read(fs);
  ASSERT_TRUE(t.gpus[0].kernel_driver.has_value());
  EXPECT_EQ(*t.gpus[0].kernel_driver, "vfio-pci");
}

TEST(SysfsDriver, NoDriverLinkOnTheLiveTreeMeansNoneIsBound) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Topology t = read_sysfs({fs.root(), /*strict=*/false, ""});
  ASSERT_TRUE(t.gpus[0].kernel_driver.has_value());
  EXPECT_EQ(*t.gpus[0].kernel_driver, "");
  Analysis a = analyze(t);
  EXPECT_TRUE(has_finding(a, "gpu-driver-not-bound"));
}

TEST(SysfsDriver, NoDriverLinkInACaptureIsUnknownNotUnbound) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  Topology t = read(fs);  // strict: a capture that may not have copied the link
  EXPECT_FALSE(t.gpus[0].kernel_driver.has_value());
  EXPECT_FALSE(has_finding(analyze(t), "gpu-driver-not-bound"));
}

TEST(SysfsDriver, GpuNvLinksAreUnknownUntilNvmlAnswers) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  EXPECT_FALSE(read(fs).gpus[0].nvlinks_known);
}

TEST(SysfsNoGpu, AMachineWithoutGpuSaysSoAsAWarning) {
  SysfsBuilder fs;
  fs.device("pci0000:00/0000:00:03.0", SysfsBuilder::nic("0x020000", 0));
  Analysis a = analyze(read(fs));
  auto it = std::find_if(a.findings.begin(), a.findings.end(),
                         [](const Finding& f) { return f.code == "no-gpu"; });
  ASSERT_NE(it, a.findings.end());
  EXPECT_EQ(it->severity, Severity::kWarning);
  EXPECT_NE(it->evidence.find("0x10de"), std::string::npos) << it->evidence;
}

// Found by tests/fuzz/fuzz_sysfs.cpp: an InfiniBand port rate that is not a rate ("-400 Gb/sec",
// "nan") was taken as read, and a negative one left the GPU-NIC pairing with no candidate
// NIC, dividing by zero (SIGFPE). Such a rate is unknown, as a netdev's speed -1 is.
TEST(SysfsInfiniBand, RateThatIsNotANonNegativeNumberIsUnknown) {
  for (const char* rate : {"-400 Gb/sec (4X NDR)", "nan Gb/sec", "inf", "1e999 Gb/sec"}) {
    SysfsBuilder fs;
    fixtures::build_vm_one_gpu(fs);
    fs.infiniband("mlx5_0", "pci0000:00/0000:00:03.0", "InfiniBand", rate, {"eth0"});
    Topology t = read(fs);
    ASSERT_EQ(t.nics.size(), 1u) << rate;
    EXPECT_EQ(t.nics[0].port_rate_gbps, 0.0) << rate;
    Analysis a = analyze(t);
    ASSERT_EQ(a.nic_pairing.size(), 1u) << rate;
    EXPECT_EQ(a.nic_pairing[0].nic, 0) << rate;
  }
}

// Found by reading the reader for tests/fuzz/fuzz_sysfs.cpp: a NUMA node directory whose
// number does not fit an int (node99999999999) threw std::out_of_range out of the reader. It
// is not a node the kernel could have made, so it is skipped like any other stray entry.
TEST(SysfsNuma, NodeDirectoryWithAnOutOfRangeNumberIsSkipped) {
  SysfsBuilder fs;
  fixtures::build_vm_one_gpu(fs);
  std::filesystem::create_directories(std::filesystem::path(fs.root()) /
                                      "devices/system/node/node99999999999");
  Topology t;
  EXPECT_NO_THROW(t = read(fs));
  EXPECT_EQ(t.numa_node_count, 1);
}
