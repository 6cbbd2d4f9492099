// doctor's evidence layer on the CPU (probes/health): the Xid catalog, the thresholds file,
// NVML's counters read through a fake libnvidia-ml (tests/fake_nvml.cpp), and the RDMA ports,
// PCIe AER totals and IOMMU groups read from a sysfs tree.
#include <gtest/gtest.h>

#include <string>

#include "doctor_test_support.hpp"
#include "probes/base/error.hpp"
#include "probes/health/gpu_counters.hpp"
#include "probes/health/sysfs_health.hpp"
#include "probes/health/thresholds.hpp"
#include "probes/health/xid_catalog.hpp"
#include "reports/doctor/doctor_checks.hpp"

using namespace commtool;
using namespace commtool::health;
using namespace doctor_test;

TEST(XidCatalog, EveryNumberFindsItsOwnEntryOrNone) {
  int known = 0;
  for (int x = 0; x < 400; ++x) {
    const XidInfo info = describe_xid(x);
    EXPECT_EQ(info.xid, x);  // the table is sorted: a lookup never returns a neighbour
    if (info.known) {
      ++known;
      EXPECT_NE(std::string(info.meaning), "");
      EXPECT_NE(std::string(info.action), "");
    }
  }
  EXPECT_EQ(known, 37);
}

TEST(XidCatalog, LinksAndWeightsFollowNvidiasCatalog) {
  EXPECT_EQ(describe_xid(79).link, XidLink::kPcie);
  EXPECT_EQ(describe_xid(79).weight, XidWeight::kFail);
  EXPECT_EQ(describe_xid(32).link, XidLink::kPcie);
  EXPECT_EQ(describe_xid(74).link, XidLink::kNvLink);
  EXPECT_EQ(describe_xid(149).link, XidLink::kNvLink);
  EXPECT_EQ(describe_xid(121).link, XidLink::kC2c);
  EXPECT_EQ(describe_xid(121).weight, XidWeight::kWarn);  // corrected: retrain at a window
  EXPECT_EQ(describe_xid(13).weight, XidWeight::kApplication);
  EXPECT_EQ(describe_xid(43).weight, XidWeight::kApplication);
  EXPECT_EQ(describe_xid(45).weight, XidWeight::kInfo);
  // DCGM calls 38 "PCIe Bus Error"; NVIDIA's catalog says it is a firmware watchdog.
  EXPECT_EQ(describe_xid(38).link, XidLink::kNone);
  const XidInfo unknown = describe_xid(999);
  EXPECT_FALSE(unknown.known);
  EXPECT_EQ(unknown.weight, XidWeight::kWarn);
  EXPECT_NE(std::string(unknown.action).find("NVIDIA's Xid catalog"), std::string::npos);
}

TEST(Thresholds, DefaultsAreDcgmsAndEachNamesItsSource) {
  const Thresholds t;
  EXPECT_DOUBLE_EQ(t.pcie_replays_per_lane_minute[5], 1.92);
  EXPECT_DOUBLE_EQ(t.nvlink_crc_fail_per_s, 100);
  EXPECT_DOUBLE_EQ(t.retired_pages_fail, 63);
  EXPECT_DOUBLE_EQ(t.remap_uncorrectable_warn, 512);
  for (const ThresholdInfo& i : describe(t))
    EXPECT_NE(i.source, "") << i.name;
}

TEST(Thresholds, AFileOverridesWhatItNamesAndKeepsTheRest) {
  const Thresholds t = parse_thresholds(
      "# site limits\n\n  nvlink_crc_warn = 10   # our links are noisy\n"
      "pcie_replays_per_lane_minute.gen5=0.5\r\n",
      "site.conf");
  EXPECT_DOUBLE_EQ(t.nvlink_crc_warn, 10);
  EXPECT_DOUBLE_EQ(t.pcie_replays_per_lane_minute[5], 0.5);
  EXPECT_DOUBLE_EQ(t.pcie_replays_per_lane_minute[4], 0.96);
  EXPECT_DOUBLE_EQ(t.retired_pages_fail, 63);
}

TEST(Thresholds, ABadLineIsExit2NamingFileLineAndWhatIsAccepted) {
  const auto error_of = [](const std::string& text) {
    try {
      parse_thresholds(text, "site.conf");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("\n\nnvlink_crc = 5\n")
                .rfind("site.conf:3: 'nvlink_crc' is not a threshold "
                       "(known: pcie_replays_per_lane_minute.gen1",
                       0),
            0u)
      << error_of("\n\nnvlink_crc = 5\n");
  EXPECT_EQ(error_of("nvlink_crc_warn = x"),
            "site.conf:1: nvlink_crc_warn 'x': not a non-negative decimal number");
  EXPECT_EQ(error_of("nvlink_crc_warn = -1"),
            "site.conf:1: nvlink_crc_warn '-1': not a non-negative decimal number");
  EXPECT_EQ(error_of("nvlink_crc_warn = nan"),
            "site.conf:1: nvlink_crc_warn 'nan': not a non-negative decimal number");
  EXPECT_EQ(error_of("nvlink_crc_warn"),
            "site.conf:1: 'nvlink_crc_warn' is not a 'name = value' line");
  EXPECT_EQ(error_of("nvlink_crc_warn = 1\x1b[2J"),
            "site.conf:1: nvlink_crc_warn '1\\x1b[2J': not a non-negative decimal number");
}

TEST(Thresholds, AMissingFileIsExit2) {
  try {
    load_thresholds("/nonexistent/site.conf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/site.conf"), std::string::npos);
  }
}

TEST(GpuCounters, AHealthyH100AsNvidiaSmiShowedIt) {
  FakeNvml fake("");
  const CountersRead r = FakeNvml::read();
  ASSERT_EQ(r.unavailable, "");
  ASSERT_EQ(r.gpus.size(), 1u);
  const GpuCounters& g = r.gpus[0];
  EXPECT_EQ(g.uuid, "GPU-187a3ed2-dc3f-e885-c1e4-066b882acd69");
  EXPECT_TRUE(g.ecc_enabled.available);
  EXPECT_EQ(g.ecc_enabled.value, 1u);
  EXPECT_TRUE(g.ecc_volatile_uncorrected.available);
  EXPECT_TRUE(g.remap_failure.available);
  EXPECT_EQ(g.pcie_replay.value, 0u);
  EXPECT_EQ(g.persistence.value, 1u);
  // "Retired Pages: N/A" in nvidia-smi -q: not available with NVML's words, never 0.
  EXPECT_FALSE(g.retired_sbe.available);
  EXPECT_EQ(g.retired_sbe.why, "Not Supported");
  EXPECT_FALSE(g.mig.available);
  EXPECT_TRUE(g.nvlinks.empty());
}

TEST(GpuCounters, RetiredPagesAreCountedThroughTheSizeQuery) {
  FakeNvml fake("retired_sbe=3;retired_dbe=0;retired_pending=1");
  const GpuCounters g = FakeNvml::read().gpus.at(0);
  EXPECT_TRUE(g.retired_sbe.available);
  EXPECT_EQ(g.retired_sbe.value, 3u);
  EXPECT_EQ(g.retired_dbe.value, 0u);
  EXPECT_EQ(g.retired_pending.value, 1u);
}

TEST(GpuCounters, NvLinksWithTheirStateAndErrors) {
  FakeNvml fake("nvlinks=18;link_down=7;link_crc_flit=2;link_replay3=5");
  const GpuCounters g = FakeNvml::read().gpus.at(0);
  ASSERT_EQ(g.nvlinks.size(), 18u);
  EXPECT_FALSE(g.nvlinks[7].active);
  EXPECT_TRUE(g.nvlinks[0].active);
  EXPECT_EQ(g.nvlinks[0].crc_flit.value, 2u);
  EXPECT_EQ(g.nvlinks[3].replay.value, 5u);
  EXPECT_EQ(g.nvlinks[4].replay.value, 0u);
}

TEST(GpuCounters, WhatNvmlRefusesCarriesItsReason) {
  {
    FakeNvml fake("init=e:4");
    const CountersRead r = FakeNvml::read();
    EXPECT_EQ(r.unavailable, "nvmlInit failed: Insufficient Permissions");
    EXPECT_TRUE(r.gpus.empty());
  }
  {
    FakeNvml fake("handle=e:15");
    EXPECT_EQ(FakeNvml::read().gpus.at(0).unavailable, "GPU is lost");
  }
  {
    FakeNvml fake("replay=e:3;remap=e:4");
    const GpuCounters g = FakeNvml::read().gpus.at(0);
    EXPECT_EQ(g.pcie_replay.why, "Not Supported");
    EXPECT_EQ(g.remap_failure.why, "Insufficient Permissions");
    EXPECT_FALSE(g.remap_correctable.available);
  }
  const CountersRead none = read_gpu_counters({"0000:3b:00.0"}, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_NE(none.unavailable.find("cannot load /nonexistent/libnvidia-ml.so.1 ("),
            std::string::npos);
}

TEST(SysfsHealth, RdmaPortsWithTheirStateAndCounters) {
  FakeSysfs s;
  s.port("mlx5_0", 1, "4: ACTIVE", 0, 0);
  s.port("mlx5_1", 1, "1: DOWN", 0, 0);
  s.port("mlx5_2", 1, "4: ACTIVE", 12, 3);
  const std::vector<RdmaPort> ports =
      read_rdma_ports({"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_9"}, s.root);
  ASSERT_EQ(ports.size(), 3u);  // mlx5_9 has no ports there
  EXPECT_EQ(ports[0].state, "ACTIVE");
  EXPECT_EQ(ports[0].phys_state, "LinkUp");
  EXPECT_EQ(ports[0].rate, "400 Gb/sec (4X NDR)");
  const Thresholds t;
  const Check ok = reports::doctor::judge_rdma_port(ports[0], t);
  EXPECT_EQ(ok.severity, Severity::kPass);
  EXPECT_EQ(ok.subject, "NIC mlx5_0 port 1");
  const Check down = reports::doctor::judge_rdma_port(ports[1], t);
  EXPECT_EQ(down.severity, Severity::kWarn);
  EXPECT_NE(down.evidence.find("DOWN (Polling)"), std::string::npos) << down.evidence;
  const Check errors = reports::doctor::judge_rdma_port(ports[2], t);
  EXPECT_EQ(errors.severity, Severity::kWarn);
  EXPECT_NE(errors.evidence.find("symbol_error 12, link_downed 3"), std::string::npos)
      << errors.evidence;
  Thresholds lenient;
  lenient.rdma_port_errors_warn = 100;
  EXPECT_EQ(reports::doctor::judge_rdma_port(ports[2], lenient).severity, Severity::kPass);
}

TEST(SysfsHealth, AerTotalsAndTheKindsThatAreNotZero) {
  FakeSysfs s;
  const std::string d = "bus/pci/devices/0000:91:00.0/";
  s.write(d + "aer_dev_correctable", "RxErr 3\nBadTLP 1\nBadDLLP 0\nTOTAL_ERR_COR 4\n");
  s.write(d + "aer_dev_nonfatal", "Undefined 0\nDLP 0\nTOTAL_ERR_NONFATAL 0\n");
  s.write(d + "aer_dev_fatal", "Undefined 0\nDLP 0\nTOTAL_ERR_FATAL 0\n");
  const AerCounts a = read_aer("0000:91:00.0", s.root);
  EXPECT_EQ(a.correctable.value, 4u);
  EXPECT_EQ(a.detail, "RxErr 3, BadTLP 1");
  const topo::Gpu g = h100();
  const Thresholds t;
  EXPECT_EQ(reports::doctor::judge_aer(a, &g, t).severity, Severity::kPass);
  s.write(d + "aer_dev_fatal", "Undefined 0\nDLP 1\nTOTAL_ERR_FATAL 1\n");
  EXPECT_EQ(reports::doctor::judge_aer(read_aer("0000:91:00.0", s.root), &g, t).severity,
            Severity::kFail);
  s.write(d + "aer_dev_fatal", "TOTAL_ERR_FATAL 0\n");
  s.write(d + "aer_dev_nonfatal", "TOTAL_ERR_NONFATAL 2\n");
  EXPECT_EQ(reports::doctor::judge_aer(read_aer("0000:91:00.0", s.root), &g, t).severity,
            Severity::kWarn);
  // The H100 VM's sysfs has no aer_dev_* files: not available, never a pass.
  const AerCounts none = read_aer("0000:00:06.0", s.root);
  const Check na = reports::doctor::judge_aer(none, &g, t);
  EXPECT_EQ(na.severity, Severity::kUnavailable);
  EXPECT_NE(na.evidence.find("a kernel without AER, or a VM"), std::string::npos);
}

TEST(SysfsHealth, TheIommuTypeOfAGpusGroup) {
  FakeSysfs s;
  s.write("bus/pci/devices/0000:91:00.0/iommu_group/type", "DMA-FQ\n");
  s.write("bus/pci/devices/0000:92:00.0/iommu_group/type", "identity\n");
  s.write("bus/pci/devices/0000:93:00.0/vendor", "0x10de\n");
  EXPECT_EQ(read_iommu_type("0000:91:00.0", s.root), "DMA-FQ");
  EXPECT_EQ(read_iommu_type("0000:92:00.0", s.root), "identity");
  EXPECT_EQ(read_iommu_type("0000:93:00.0", s.root), "none");
  const topo::Gpu g = h100();
  EXPECT_EQ(reports::doctor::judge_iommu(g, "DMA-FQ", true).severity, Severity::kWarn);
  EXPECT_EQ(reports::doctor::judge_iommu(g, "DMA-FQ", false).severity, Severity::kPass);
  EXPECT_EQ(reports::doctor::judge_iommu(g, "identity", true).severity, Severity::kPass);
  EXPECT_EQ(reports::doctor::judge_iommu(g, "unknown", true).severity, Severity::kUnavailable);
}
