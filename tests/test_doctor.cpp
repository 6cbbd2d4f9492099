// doctor's judgement on the CPU: every rule of reports/doctor, the page, the baseline and the
// search by halves' verdict, on evidence built from a fake libnvidia-ml (tests/fake_nvml.cpp),
// sysfs trees and the real kernel-log lines of tests/fixtures/kernel_log. The evidence layer's
// own tests are in test_health.cpp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "doctor_test_support.hpp"
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
using namespace doctor_test;

// --- the rules ---

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
  e.counters_before.unavailable =
      "cannot load libnvidia-ml.so.1 (libnvidia-ml.so.1: cannot open shared object file)";
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
  // The page of doctor under MPI is the job's, not a node's.
  std::ifstream cluster(std::string(COMMTOOL_SOURCE_DIR) +
                        "/tests/fixtures/doctor/h100_mpirun_2ranks.json");
  std::stringstream page;
  page << cluster.rdbuf();
  EXPECT_NE(error_of(page.str()).find("good.json: a page of doctor under MPI (cluster: true)"),
            std::string::npos);
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
