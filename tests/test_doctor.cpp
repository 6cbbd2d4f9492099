// doctor's pieces on the CPU: the Xid catalog, the thresholds file, NVML's counters read through
// a fake libnvidia-ml (tests/fake_nvml.cpp), and every rule of reports/doctor on evidence built
// from them and from the real kernel-log lines of tests/fixtures/kernel_log.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "probes/base/error.hpp"
#include "probes/health/gpu_counters.hpp"
#include "probes/health/thresholds.hpp"
#include "probes/health/xid_catalog.hpp"
#include "reports/doctor/baseline.hpp"
#include "reports/doctor/doctor_checks.hpp"
#include "reports/doctor/doctor_report.hpp"
#include "reports/doctor/expected_figures.hpp"

namespace {

using namespace commtool;
using namespace commtool::health;
using commtool::reports::doctor::Check;
using commtool::reports::doctor::Severity;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(COMMTOOL_SOURCE_DIR) + "/tests/fixtures/kernel_log/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// --- the Xid catalog ---

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

// --- thresholds ---

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

// --- NVML's counters, through the fake library ---

struct FakeNvml {
  explicit FakeNvml(const std::string& answers) {
    setenv("COMMTOOL_FAKE_NVML", answers.c_str(), 1);
  }
  ~FakeNvml() { unsetenv("COMMTOOL_FAKE_NVML"); }
  static CountersRead read() { return read_gpu_counters({"0000:3b:00.0"}, COMMTOOL_FAKE_NVML); }
};

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
    EXPECT_EQ(r.unavailable, "NVML did not start: Insufficient Permissions");
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
  EXPECT_NE(none.unavailable.find("NVML could not be loaded"), std::string::npos);
}

// --- the rules ---

topo::Gpu h100() {
  topo::Gpu g;
  g.index = 0;
  g.bdf = "0000:91:00.0";  // the GPU that fell off the bus in public_xid_lines.txt
  g.name = "NVIDIA H100 80GB HBM3";
  g.sm = 90;
  g.pcie = {5, 16, 5, 16, 5, 16};
  return g;
}

GpuCounters counters(const std::string& answers) {
  FakeNvml fake(answers);
  return FakeNvml::read().gpus.at(0);
}

const Check& area(const std::vector<Check>& checks, const std::string& a) {
  for (const Check& c : checks)
    if (c.area == a) return c;
  static const Check none{"none", -1, "none", Severity::kPass, "no such check", ""};
  ADD_FAILURE() << "no check " << a;
  return none;
}

TEST(DoctorRules, AHealthyH100PassesWhatItCanReadAndSaysWhatItCannot) {
  const GpuCounters before = counters("");
  const GpuCounters after = counters("");
  const std::vector<Check> c =
      reports::doctor::judge_counters(h100(), before, &after, 20, Thresholds{});
  EXPECT_EQ(area(c, "ECC").severity, Severity::kPass);
  EXPECT_EQ(area(c, "memory repair").severity, Severity::kPass);
  EXPECT_NE(area(c, "memory repair").evidence.find("page retirement: Not Supported"),
            std::string::npos);
  EXPECT_EQ(area(c, "PCIe replay").severity, Severity::kPass);
  EXPECT_EQ(area(c, "PCIe replay").evidence,
            "0 replays during doctor's 20 s of traffic (at most 11 expected at Gen5 x16), 0 since "
            "the driver loaded");
  EXPECT_EQ(area(c, "clocks").severity, Severity::kPass);
  EXPECT_EQ(area(c, "modes").severity, Severity::kPass);
  for (const Check& x : c)
    EXPECT_NE(x.area, "NVLink state");  // no NVLink: no line about it
}

TEST(DoctorRules, MemoryFaultsFailAndPendingRepairsWarn) {
  const Thresholds t;
  const auto severity = [&](const std::string& answers, const std::string& a) {
    const GpuCounters g = counters(answers);
    return area(reports::doctor::judge_counters(h100(), g, &g, 20, t), a).severity;
  };
  EXPECT_EQ(severity("ecc_vol_unc=1", "ECC"), Severity::kFail);
  EXPECT_EQ(severity("ecc_agg_unc=4", "ECC"), Severity::kPass);  // DCGM judges volatile only
  EXPECT_EQ(severity("ecc_mode=0", "ECC"), Severity::kWarn);
  EXPECT_EQ(severity("ecc_mode=e:3", "ECC"), Severity::kUnavailable);
  EXPECT_EQ(severity("remap_failed=1", "memory repair"), Severity::kFail);
  EXPECT_EQ(severity("remap_pending=1", "memory repair"), Severity::kWarn);
  EXPECT_EQ(severity("remap_unc=511", "memory repair"), Severity::kPass);
  EXPECT_EQ(severity("remap_unc=512", "memory repair"), Severity::kWarn);
  EXPECT_EQ(severity("remap=e:3;retired_sbe=40;retired_dbe=23", "memory repair"), Severity::kFail);
  EXPECT_EQ(severity("remap=e:3;retired_sbe=40;retired_dbe=22", "memory repair"), Severity::kPass);
  EXPECT_EQ(severity("remap=e:3", "memory repair"), Severity::kUnavailable);
  EXPECT_EQ(severity("clocks=65", "clocks"), Severity::kWarn);  // idle + HW thermal slowdown
  EXPECT_EQ(severity("clocks=5", "clocks"), Severity::kPass);   // idle + SW power cap
  EXPECT_EQ(severity("persistence=0", "modes"), Severity::kWarn);
  EXPECT_EQ(severity("mig=1", "modes"), Severity::kWarn);
}

TEST(DoctorRules, PcieReplaysAreJudgedByTheirGrowthDuringTheRun) {
  const Thresholds t;
  const GpuCounters before = counters("replay=1000");
  // 20 s at Gen5 x16: DCGM's 1.92 per lane-minute allows ceil(1.92 x 16 / 3) = 11.
  const GpuCounters eleven = counters("replay=1011");
  const GpuCounters twelve = counters("replay=1012");
  EXPECT_EQ(
      area(reports::doctor::judge_counters(h100(), before, &eleven, 20, t), "PCIe replay").severity,
      Severity::kPass);
  const Check warn =
      area(reports::doctor::judge_counters(h100(), before, &twelve, 20, t), "PCIe replay");
  EXPECT_EQ(warn.severity, Severity::kWarn);
  EXPECT_NE(warn.advice.find("reseat"), std::string::npos);
  // One reading only: a total since the driver loaded is no rate.
  EXPECT_EQ(
      area(reports::doctor::judge_counters(h100(), before, nullptr, 0, t), "PCIe replay").severity,
      Severity::kUnavailable);
  // A Gen4 x8 link is allowed fewer.
  topo::Gpu slow = h100();
  slow.pcie = {4, 8, 4, 8, 4, 8};
  const GpuCounters six = counters("replay=1006");
  EXPECT_EQ(
      area(reports::doctor::judge_counters(slow, before, &six, 20, t), "PCIe replay").severity,
      Severity::kWarn);  // ceil(0.96 x 8 / 3) = 3
}

TEST(DoctorRules, NvLinkReplaysFailCrcErrorsWarnAndADownLinkIsNamed) {
  const Thresholds t;
  const GpuCounters before = counters("nvlinks=18");
  const auto judged = [&](const std::string& after_answers) {
    const GpuCounters after = counters(after_answers);
    return reports::doctor::judge_counters(h100(), before, &after, 10, t);
  };
  EXPECT_EQ(area(judged("nvlinks=18"), "NVLink errors").severity, Severity::kPass);
  EXPECT_EQ(area(judged("nvlinks=18"), "NVLink state").evidence, "18 of 18 links active");
  EXPECT_EQ(area(judged("nvlinks=18;link_crc_flit5=3"), "NVLink errors").severity, Severity::kWarn);
  EXPECT_EQ(area(judged("nvlinks=18;link_crc_data5=1000"), "NVLink errors").severity,
            Severity::kFail);  // 100 per second over 10 s
  const Check replay = area(judged("nvlinks=18;link_replay3=1"), "NVLink errors");
  EXPECT_EQ(replay.severity, Severity::kFail);
  EXPECT_NE(replay.evidence.find("link 3: 0 CRC (0.0/s), 1 replays"), std::string::npos)
      << replay.evidence;
  EXPECT_EQ(area(judged("nvlinks=18;link_recovery0=2"), "NVLink errors").severity, Severity::kFail);
  const Check down = area(judged("nvlinks=18;link_down=7"), "NVLink state");
  EXPECT_EQ(down.severity, Severity::kWarn);
  EXPECT_EQ(down.evidence, "17 of 18 links active; down: 7");
  EXPECT_EQ(area(judged("nvlinks=18;link_crc_flit=e:3;link_crc_data=e:3;link_replay=e:3;"
                        "link_recovery=e:3"),
                 "NVLink errors")
                .severity,
            Severity::kUnavailable);
}

commtool::doctor::Evidence evidence_with_log(const std::string& log) {
  commtool::doctor::Evidence e;
  e.topology.source = "test";
  e.topology.in_vm = true;  // as on the GPU machine: one SXM GPU passed in, its NVLinks hidden
  e.topology.gpus = {h100()};
  topo::Gpu other = h100();
  other.index = 1;
  other.bdf = "0000:cb:00.0";  // Xid 13 x3 then 109 in the fixture
  e.topology.gpus.push_back(other);
  topo::Gpu clean = h100();
  clean.index = 2;
  clean.bdf = "0000:17:00.0";
  e.topology.gpus.push_back(clean);
  e.kernel_log_read = true;
  e.kernel_log_source = "public_xid_lines.txt";
  e.kernel_log = scan_kernel_log(log);
  return e;
}

TEST(DoctorRules, RealXidLinesGiveEachGpuItsVerdictAndNvidiasAction) {
  const std::vector<Check> c =
      reports::doctor::judge_kernel_log(evidence_with_log(fixture("public_xid_lines.txt")));
  const auto of_gpu = [&](int gpu) {
    for (const Check& x : c)
      if (x.gpu == gpu) return x;
    return Check{};
  };
  const Check fell = of_gpu(0);
  EXPECT_EQ(fell.severity, Severity::kFail);
  EXPECT_NE(fell.evidence.find("Xid 79 x1 (GPU has fallen off the bus (not reachable over PCIe), "
                               "a PCIe error)"),
            std::string::npos)
      << fell.evidence;
  EXPECT_NE(fell.advice.find("reboot the node"), std::string::npos);
  const Check ctx = of_gpu(1);
  EXPECT_EQ(ctx.severity, Severity::kFail);  // 109, after three application faults (13)
  EXPECT_NE(ctx.evidence.find("Xid 13 x3"), std::string::npos);
  EXPECT_NE(ctx.advice.find("Xid 109: reset the GPU"), std::string::npos) << ctx.advice;
  EXPECT_EQ(ctx.advice.find("Xid 13"), std::string::npos);  // the lesser ones give no advice
  EXPECT_EQ(of_gpu(2).severity, Severity::kPass);
  EXPECT_NE(of_gpu(2).evidence.find("no Xid for this GPU in"), std::string::npos);
  // The NVSwitches' fatal SXids and the GPUs no longer there are the node's.
  bool nvswitch = false, elsewhere = false;
  for (const Check& x : c) {
    if (x.area == "NVSwitch") nvswitch = x.severity == Severity::kFail;
    // One check per address where no GPU is now: 0003:00:00 had the fatal Xid 74.
    if (x.subject == "PCI 0003:00:00 (no GPU there now)") {
      elsewhere = x.severity == Severity::kFail && x.evidence.find("Xid 74 x1") == 0;
    }
  }
  EXPECT_TRUE(nvswitch);
  EXPECT_TRUE(elsewhere);
}

TEST(DoctorRules, ApplicationXidsLeaveTheGpuPassing) {
  commtool::doctor::Evidence e = evidence_with_log(
      "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:91:00): 13, pid='<unknown>', "
      "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction\n");
  const Check c = reports::doctor::judge_kernel_log(e).at(0);
  EXPECT_EQ(c.gpu, 0);
  EXPECT_EQ(c.severity, Severity::kPass);
  EXPECT_NE(c.evidence.find("Xid 13 x1"), std::string::npos);
}

TEST(DoctorRules, AnUnreadableKernelLogIsNotAPass) {
  commtool::doctor::Evidence e = evidence_with_log("");
  e.kernel_log_read = false;
  e.kernel_log_why = "/dev/kmsg: Operation not permitted (kernel.dmesg_restrict=1)";
  const std::vector<Check> c = reports::doctor::judge_kernel_log(e);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].severity, Severity::kUnavailable);
  EXPECT_NE(c[0].advice.find("--kernel-log"), std::string::npos);
}

TEST(DoctorVerdict, TheWorstCheckDecidesAndNotAvailableNeverPasses) {
  commtool::doctor::Evidence e = evidence_with_log("");
  e.counters_before.unavailable = "NVML could not be loaded (libnvidia-ml.so.1: cannot open)";
  reports::doctor::Verdict v = reports::doctor::judge(e);
  EXPECT_EQ(v.overall, Severity::kPass);
  EXPECT_GE(v.count(Severity::kUnavailable), 1);
  EXPECT_EQ(reports::doctor::exit_code(e, v), 0);
  const std::string text = reports::doctor::render_doctor_text(e, v);
  EXPECT_EQ(text.rfind("commtool doctor: PASS", 0), 0u) << text;
  EXPECT_NE(text.find("Not available (never counted as a pass)"), std::string::npos);

  e = evidence_with_log(fixture("public_xid_lines.txt"));
  e.allreduce_step = {true, "", false, ExitCode::kTimeout, "allreduce #3 did not complete", 5};
  v = reports::doctor::judge(e);
  EXPECT_EQ(v.overall, Severity::kFail);
  EXPECT_EQ(reports::doctor::exit_code(e, v), reports::doctor::kExitFail);
  const nlohmann::json j = reports::doctor::doctor_to_json(e, v);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["steps"]["allreduce"]["exit_code"], 5);
  bool hung = false;
  for (const auto& c : j["checks"])
    hung = hung || (c["area"] == "all-reduce" && c["severity"] == "FAIL" &&
                    c["advice"].get<std::string>().find("hung") != std::string::npos);
  EXPECT_TRUE(hung) << j.dump(2);
}

TEST(DoctorVerdict, NoGpuIsExit3) {
  commtool::doctor::Evidence e;
  e.no_gpu = "no NVIDIA GPU found";
  const reports::doctor::Verdict v = reports::doctor::judge(e);
  EXPECT_EQ(v.overall, Severity::kFail);
  EXPECT_EQ(reports::doctor::exit_code(e, v), 3);
}

}  // namespace

namespace {

using commtool::reports::doctor::figures_for;
using commtool::reports::doctor::model_figures;

TEST(ExpectedFigures, EveryRowSaysWhereItsFiguresComeFrom) {
  ASSERT_GE(model_figures().size(), 7u);
  for (const auto& m : model_figures()) {
    EXPECT_NE(m.pcie_source, "") << m.model;
    EXPECT_NE(m.nvlink_source, "") << m.model;
    EXPECT_NE(m.allreduce_source, "") << m.model;
    if (m.allreduce_busbw_8 == 0) {
      EXPECT_EQ(m.allreduce_source.rfind("not given", 0), 0u) << m.model;
    }
    EXPECT_LE(m.allreduce_busbw_8, 1.1 * 2 * m.nvlink_gbps_per_direction) << m.model;
  }
}

TEST(ExpectedFigures, NvmlNamesFindTheirModelPcieFormsBeforeTheirSxmKin) {
  EXPECT_EQ(figures_for("NVIDIA H100 80GB HBM3")->model, "H100 SXM");
  EXPECT_EQ(figures_for("NVIDIA H100 PCIe")->model, "H100 PCIe");
  EXPECT_EQ(figures_for("NVIDIA H100 NVL")->model, "H100 NVL");
  EXPECT_EQ(figures_for("NVIDIA H200")->model, "H200");
  EXPECT_EQ(figures_for("NVIDIA H200 NVL")->model, "H200 NVL");
  EXPECT_EQ(figures_for("NVIDIA A100-SXM4-80GB")->model, "A100 SXM4");
  EXPECT_EQ(figures_for("NVIDIA B200")->model, "B200");
  EXPECT_EQ(figures_for("NVIDIA L40S")->model, "L40S");
  EXPECT_EQ(figures_for("Tesla T4"), nullptr);
}

TEST(DoctorRules, TheModelsLinkAndNvLinksAreCompared) {
  topo::Gpu g = h100();
  EXPECT_EQ(reports::doctor::judge_model(g, true).severity, Severity::kUnavailable);  // VM
  const Check bare = reports::doctor::judge_model(g, false);
  EXPECT_EQ(bare.severity, Severity::kWarn);
  EXPECT_NE(bare.evidence.find("18 NVLinks expected"), std::string::npos) << bare.evidence;
  for (int l = 0; l < 18; ++l)
    g.nvlinks.push_back({l, true, 4, 4, topo::NvLinkPeer::kNvSwitch, ""});
  EXPECT_EQ(reports::doctor::judge_model(g, false).severity, Severity::kPass);
  g.pcie = {4, 16, 5, 16, 4, 16};  // a Gen4 slot under a Gen5 GPU
  const Check slot = reports::doctor::judge_model(g, false);
  EXPECT_EQ(slot.severity, Severity::kWarn);
  EXPECT_NE(slot.evidence.find("can train at Gen4 x16"), std::string::npos) << slot.evidence;
  g.name = "Tesla T4";
  EXPECT_EQ(reports::doctor::judge_model(g, false).severity, Severity::kUnavailable);
}

commtool::doctor::Evidence eight_h100(uint64_t bytes, double busbw) {
  commtool::doctor::Evidence e;
  for (int i = 0; i < 8; ++i) {
    topo::Gpu g = h100();
    g.index = i;
    e.topology.gpus.push_back(g);
  }
  e.allreduce_request.devices = {0, 1, 2, 3, 4, 5, 6, 7};
  e.allreduce_step = {true, "", true, ExitCode::kOk, "", 3};
  tracing::TraceReport r;
  tracing::SizeRow row;
  row.bytes = bytes;
  row.busbw_gbps = busbw;
  r.sizes = {row};
  e.allreduce = r;
  return e;
}

TEST(DoctorRules, EightGpusAllReduceIsSetBesideTheirModelsFigureAtLargeSizes) {
  const Check low = reports::doctor::judge_allreduce(eight_h100(1ull << 30, 300)).at(0);
  EXPECT_EQ(low.severity, Severity::kWarn);
  EXPECT_NE(low.evidence.find("LOW: 62% of the 480 GB/s of 8 H100 SXM"), std::string::npos)
      << low.evidence;
  const Check fine = reports::doctor::judge_allreduce(eight_h100(1ull << 30, 400)).at(0);
  EXPECT_EQ(fine.severity, Severity::kPass);
  EXPECT_NE(fine.evidence.find("83% of the 480 GB/s"), std::string::npos) << fine.evidence;
  const Check small = reports::doctor::judge_allreduce(eight_h100(64ull << 20, 100)).at(0);
  EXPECT_EQ(small.severity, Severity::kPass);
  EXPECT_NE(small.evidence.find("--level long reaches it"), std::string::npos) << small.evidence;
}

}  // namespace

namespace {

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

}  // namespace

namespace {

TEST(DoctorPage, ProblemsFirstThenOnePassLinePerSubject) {
  commtool::doctor::Evidence e = evidence_with_log(fixture("public_xid_lines.txt"));
  health::RdmaPort port{"mlx5_0", 1, "ACTIVE", "LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand", {}};
  port.counters.push_back({"symbol_error", Count{true, 0, ""}});
  e.rdma_ports = {port, port};
  e.rdma_ports[1].device = "mlx5_1";
  const reports::doctor::Verdict v = reports::doctor::judge(e);
  const std::string text = reports::doctor::render_doctor_text(e, v);
  const size_t problems = text.find("\nProblems\n"), passed = text.find("\nPassed\n");
  ASSERT_NE(problems, std::string::npos) << text;
  ASSERT_NE(passed, std::string::npos) << text;
  EXPECT_LT(problems, passed);
  EXPECT_NE(text.find("  FAIL  GPU0 0000:91:00.0  Xid: Xid 79"), std::string::npos) << text;
  EXPECT_NE(text.find("  NIC mlx5_0 port 1: port\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  NIC mlx5_1 port 1: port\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  GPU2 0000:17:00.0: Xid\n"), std::string::npos) << text;
  // Every FAIL comes before every WARN.
  EXPECT_LT(text.rfind("  FAIL  "), text.find("  WARN  ")) << text;
  if (std::getenv("COMMTOOL_SHOW_PAGE")) std::cout << text;
}

}  // namespace

namespace {

using commtool::reports::doctor::Baseline;
using commtool::reports::doctor::compare_with_baseline;
using commtool::reports::doctor::parse_baseline;

// A one-GPU node's evidence with an H2D copy and an all-reduce measured.
commtool::doctor::Evidence measured(double h2d, double busbw) {
  commtool::doctor::Evidence e = eight_h100(64ull << 20, busbw);
  e.topology.gpus.resize(1);
  e.topology.in_vm = true;
  e.allreduce_request.devices = {0, 0};
  e.ranks_share_gpu = true;
  probe::ProbeReport p;
  probe::Measurement m =
      probe::make_measurement("h2d", "H2D", probe::Engine::kCopyEngine, probe::kHost, 0, false,
                              64ull << 20, 5, "GB/s", {h2d, h2d, h2d});
  m.expected = 57.2;
  m.expected_basis = "PCIe Gen5 x16 payload";
  p.measurements = {m};
  e.probe = p;
  e.probe_step = {true, "", true, ExitCode::kOk, "", 1};
  return e;
}

TEST(DoctorBaseline, AGoodNodesJsonIsTheBarForTheSameFigures) {
  const commtool::doctor::Evidence good = measured(55, 100);
  const std::string saved =
      reports::doctor::doctor_to_json(good, reports::doctor::judge(good)).dump(2);
  const Baseline b = parse_baseline(saved, "good.json");
  ASSERT_EQ(b.figures.size(), 2u);

  commtool::doctor::Evidence slow = measured(48, 100);  // 87% of the good node's H2D
  reports::doctor::Verdict v = reports::doctor::judge(slow);
  ASSERT_EQ(v.overall, Severity::kPass);  // 84% of the link's rate: probe's own rule passes it
  compare_with_baseline(v, b);
  EXPECT_EQ(v.overall, Severity::kWarn);
  bool low = false, same = false;
  for (const Check& c : v.checks) {
    if (c.area == "H2D") {
      low = c.severity == Severity::kWarn &&
            c.evidence.find("LOW against the baseline") != std::string::npos &&
            c.evidence.find("87% of its 55.0 GB/s") != std::string::npos;
    }
    if (c.area == "all-reduce") {
      same = c.severity == Severity::kPass &&
             c.evidence.find("100% of the baseline") != std::string::npos;
    }
  }
  EXPECT_TRUE(low);
  EXPECT_TRUE(same);
  // Another size is another figure: not compared.
  commtool::doctor::Evidence other = measured(20, 10);
  other.probe->measurements[0].bytes = 256ull << 20;
  other.allreduce->sizes[0].bytes = 256ull << 20;
  reports::doctor::Verdict w = reports::doctor::judge(other);
  const Severity before = w.overall;
  compare_with_baseline(w, b);
  EXPECT_EQ(w.overall, before);
}

TEST(DoctorBaseline, AFileThatIsNoDoctorJsonIsExit2NamingTheField) {
  const auto error_of = [](const std::string& text) {
    try {
      parse_baseline(text, "good.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("{\"command\": \"probe\", \"schema_version\": 1}"),
            "good.json: not a doctor --json document (command \"probe\")");
  EXPECT_EQ(error_of("{\"command\": \"doctor\", \"schema_version\": 2, \"checks\": []}"),
            "good.json: schema_version 2: this commtool reads 1");
  EXPECT_EQ(error_of("{\"command\": \"doctor\", \"schema_version\": 1, \"checks\": [{\"area\": "
                     "\"H2D\", \"gpu\": 0, \"figure\": {\"gbps\": \"fast\", \"bytes\": 1}}]}"),
            "good.json: checks[0].figure.gbps: not a non-negative number");
  EXPECT_NE(error_of("[1, 2").find("good.json: not JSON"), std::string::npos);
  EXPECT_EQ(error_of("{\"command\": \"doctor\", \"schema_version\": 1, \"checks\": []}"),
            "no error");
}

}  // namespace

namespace {

TEST(DoctorVerdict, TheSearchByHalvesNamesTheGpuAtFault) {
  commtool::doctor::Evidence e = eight_h100(64ull << 20, 0);
  e.allreduce_step = {true, "", false, ExitCode::kTimeout, "allreduce #3 did not complete", 10};
  e.allreduce.reset();
  commtool::doctor::Isolation iso;
  iso.runs = 6;
  iso.log = {"GPUs 0-3: 400.0 GB/s", "GPUs 4-7: failed: hung"};
  iso.suspects = {{{5}, false, "bad beside GPU 7 where GPU 4 is not"},
                  {{2, 3}, true, "each is fine beside GPU 0; together they are bad"}};
  e.isolation = iso;
  const reports::doctor::Verdict v = reports::doctor::judge(e);
  int named = 0;
  for (const Check& c : v.checks) {
    if (c.area != "isolation") continue;
    ++named;
    EXPECT_EQ(c.severity, Severity::kFail);
    if (c.gpu == 5) {
      EXPECT_NE(c.evidence.find("slows GPU5: bad beside GPU 7"), std::string::npos) << c.evidence;
      EXPECT_NE(c.advice.find("nvidia-smi -r -i 5"), std::string::npos);
    } else {
      EXPECT_NE(c.evidence.find("between GPU 2 and GPU 3"), std::string::npos) << c.evidence;
      EXPECT_NE(c.advice.find("--devices 2,3"), std::string::npos);
    }
  }
  EXPECT_EQ(named, 2);
}

}  // namespace

namespace {

TEST(DoctorRules, TheTransportNcclChoseIsEvidenceAndAFallbackWithinTheNodeAWarn) {
  commtool::doctor::Evidence e = eight_h100(64ull << 20, 300);
  e.nccl_transports = {{"P2P/CUMEM/read", 16}};
  Check c = reports::doctor::judge_allreduce(e).at(0);
  EXPECT_EQ(c.severity, Severity::kPass);
  EXPECT_NE(c.evidence.find("NCCL connected the ranks via P2P/CUMEM/read (16 channel "
                            "connections)"),
            std::string::npos)
      << c.evidence;
  e.nccl_transports = {{"NET/Socket", 16}};
  c = reports::doctor::judge_allreduce(e).at(0);
  EXPECT_EQ(c.severity, Severity::kWarn);
  EXPECT_NE(c.evidence.find("through the network stack"), std::string::npos) << c.evidence;
  // Ranks on one GPU go by sockets because commtool gives each its own host (NCCL_HOSTID).
  e.ranks_share_gpu = true;
  EXPECT_EQ(reports::doctor::judge_allreduce(e).at(0).severity, Severity::kPass);
  e.ranks_share_gpu = false;
  e.nccl_transports = {{"SHM/direct/direct", 16}};
  e.analysis.p2p = {{0, 1, true, true, 0, false, ""}};
  EXPECT_EQ(reports::doctor::judge_allreduce(e).at(0).severity, Severity::kWarn);
  e.analysis.p2p[0].can_access = false;
  EXPECT_EQ(reports::doctor::judge_allreduce(e).at(0).severity, Severity::kPass);
  e.nccl_transports.clear();
  e.nccl_log_why = "NCCL_DEBUG_FILE is set: NCCL's log goes where it says";
  EXPECT_NE(reports::doctor::judge_allreduce(e).at(0).evidence.find("not known: NCCL_DEBUG_FILE"),
            std::string::npos);
}

}  // namespace

namespace {

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

TEST(DoctorRules, AcsRedirectAboveTheGpusIsAWarnAndUnreadableIsNotAPass) {
  topo::Topology t;
  t.gpus = {h100()};
  topo::PciNode gpu, port, up;
  gpu.bdf = "0000:91:00.0";
  gpu.parent_bdf = "0000:90:02.0";
  port.bdf = "0000:90:02.0";
  port.parent_bdf = "0000:8f:00.0";
  port.acs_p2p_redirect = 1;
  up.bdf = "0000:8f:00.0";
  up.acs_p2p_redirect = 0;
  t.pci = {gpu, port, up};
  t.reindex();
  std::optional<Check> c = reports::doctor::judge_acs(t);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->severity, Severity::kWarn);
  EXPECT_NE(c->evidence.find("1 of the 2 bridges above the GPUs and NICs: 0000:90:02.0"),
            std::string::npos)
      << c->evidence;
  t.pci[1].acs_p2p_redirect = -1;
  t.pci[2].acs_p2p_redirect = -1;
  t.reindex();
  EXPECT_EQ(reports::doctor::judge_acs(t)->severity, Severity::kUnavailable);
  t.pci[1].acs_p2p_redirect = 0;
  t.reindex();
  EXPECT_EQ(reports::doctor::judge_acs(t)->severity, Severity::kPass);
  t.pci.resize(1);
  t.pci[0].parent_bdf.clear();  // on a root port: no bridge, no check
  t.reindex();
  EXPECT_FALSE(reports::doctor::judge_acs(t));
}

}  // namespace

namespace {

TEST(DoctorRules, AnNvSwitchFabricThatIsNotReadyFails) {
  const auto fabric = [](const std::string& answers) -> std::optional<Check> {
    const GpuCounters g = counters(answers);
    for (const Check& c : reports::doctor::judge_counters(h100(), g, &g, 20, Thresholds{}))
      if (c.area == "fabric") return c;
    return std::nullopt;
  };
  EXPECT_FALSE(fabric(""));  // Not Supported, as on the H100 VM: no line
  EXPECT_FALSE(fabric("fabric_state=0"));
  EXPECT_EQ(fabric("fabric_state=3")->severity, Severity::kPass);
  const std::optional<Check> started = fabric("fabric_state=1");
  ASSERT_TRUE(started);
  EXPECT_EQ(started->severity, Severity::kFail);
  EXPECT_NE(started->advice.find("nvidia-fabricmanager"), std::string::npos);
  const std::optional<Check> failed = fabric("fabric_state=3;fabric_status=15");
  EXPECT_EQ(failed->severity, Severity::kFail);
  EXPECT_NE(failed->evidence.find("GPU is lost"), std::string::npos) << failed->evidence;
}

}  // namespace
