// The findings an on-call engineer reads first: a GPU the driver does not hold, one that is
// worse than its peers, NVLink counts that disagree, NUMA and network notes that say only what
// is true. Topologies are built by hand or from small NCCL files.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "probes/topo/classify.hpp"
#include "probes/topo/findings.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "reports/topo/topo_report.hpp"

using namespace commtool::topo;

namespace {

const Finding* find(const Analysis& a, const std::string& code) {
  auto it = std::find_if(a.findings.begin(), a.findings.end(),
                         [&](const Finding& f) { return f.code == code; });
  return it == a.findings.end() ? nullptr : &*it;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Two GPUs of one model on one live machine's root bus.
Topology live_pair() {
  Topology t;
  t.source = "sysfs:/sys";
  t.root_complexes = {{"pci0000:00", 0, "0-7"}};
  for (int i = 0; i < 2; ++i) {
    std::string bdf = "0000:0" + std::to_string(i + 1) + ":00.0";
    t.pci.push_back({bdf, 0x030200, kVendorNvidia, 0x2335, "", "pci0000:00", 0, {}, -1});
    Gpu g;
    g.index = i;
    g.bdf = bdf;
    g.numa_node = 0;
    g.name = "NVIDIA H200";
    g.kernel_driver = "nvidia";
    g.pcie = {5, 16, 5, 16, 5, 16};
    t.gpus.push_back(g);
  }
  t.nvml_available = true;
  t.numa_node_count = 1;
  t.reindex();
  return t;
}

// A file around the given <cpu> body.
Topology xml(const std::string& cpu_body) {
  return parse_nccl_xml("<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"0000ffff\">\n" +
                            cpu_body + "  </cpu>\n</system>\n",
                        "topo.xml");
}

std::string gpu(const std::string& busid, const std::string& width, const std::string& links) {
  return "    <pci busid=\"" + busid +
         "\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" link_speed=\"32.0 GT/s "
         "PCIe\" link_width=\"" +
         width + "\">\n      <gpu dev=\"0\" sm=\"90\">\n" + links + "      </gpu>\n    </pci>\n";
}

std::string nvlink(const std::string& target, int count) {
  return "        <nvlink target=\"" + target + "\" count=\"" + std::to_string(count) +
         "\" tclass=\"0x030200\"/>\n";
}

}  // namespace

// --- A broken driver is the first thing to say ---

TEST(DriverFindings, GpuBoundToNoDriverIsAWarningNamingItAndTheAdvice) {
  Topology t = live_pair();
  t.gpus[1].kernel_driver = "";
  Analysis a = analyze(t);
  const Finding* f = find(a, "gpu-driver-not-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_TRUE(contains(f->message, "GPU1")) << f->message;
  EXPECT_FALSE(contains(f->message, "GPU0")) << f->message;
  EXPECT_TRUE(contains(f->advice, "modprobe nvidia")) << f->advice;
  ASSERT_TRUE(unusable_driver(t).has_value());
  EXPECT_TRUE(contains(*unusable_driver(t), "GPU 1 (0000:02:00.0)")) << *unusable_driver(t);
}

TEST(DriverFindings, GpuHeldByVfioIsNamedWithItsDriver) {
  Topology t = live_pair();
  t.gpus[0].kernel_driver = "vfio-pci";
  Analysis a = analyze(t);
  const Finding* f = find(a, "gpu-driver-not-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "vfio-pci")) << f->message;
  EXPECT_TRUE(contains(f->evidence, "0000:01:00.0/driver -> vfio-pci")) << f->evidence;
}

TEST(DriverFindings, HealthyGpusGiveNoDriverFinding) {
  Topology t = live_pair();
  Analysis a = analyze(t);
  EXPECT_EQ(find(a, "gpu-driver-not-bound"), nullptr);
  EXPECT_EQ(find(a, "nvml-unusable"), nullptr);
  EXPECT_FALSE(unusable_driver(t).has_value());
}

TEST(DriverFindings, NvmlFailingWithGpusPresentIsAWarningWithItsError) {
  Topology t = live_pair();
  t.nvml_available = false;
  t.nvml_error = "nvmlInit failed: Driver Not Loaded";
  Analysis a = analyze(t);
  const Finding* f = find(a, "nvml-unusable");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_TRUE(contains(f->evidence, "Driver Not Loaded")) << f->evidence;
}

TEST(DriverFindings, CudaFailingWithGpusPresentIsAWarningWithItsError) {
  Topology t = live_pair();
  t.cuda_queried = true;
  t.cuda_error = "cudaGetDeviceCount: no CUDA-capable device is detected";
  Analysis a = analyze(t);
  const Finding* f = find(a, "cuda-unusable");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->evidence, "no CUDA-capable device")) << f->evidence;
}

TEST(DriverFindings, EmptyFileSaysItListsNoGpu) {
  Topology t = xml("");
  Analysis a = analyze(t);
  const Finding* f = find(a, "no-gpu");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "file")) << f->message;
}

// --- Like against like ---

TEST(PeerFindings, GpuInANarrowerSlotThanItsPeersIsAWarning) {
  Topology t = live_pair();
  t.gpus[1].pcie.port_max_width = 8;  // the slot: x8 among x16
  Analysis a = analyze(t);
  const Finding* f = find(a, "pcie-link-below-peers");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "GPU1")) << f->message;
  EXPECT_TRUE(contains(f->message, "Gen5 x8")) << f->message;
  EXPECT_TRUE(contains(f->message, "Gen5 x16")) << f->message;
  EXPECT_TRUE(contains(f->evidence, "slot max Gen5 x8")) << f->evidence;
}

TEST(PeerFindings, NarrowerLinkInAFileIsFound) {
  Topology t = xml(gpu("0000:01:00.0", "16", "") + gpu("0000:02:00.0", "8", "") +
                   gpu("0000:03:00.0", "16", ""));
  Analysis a = analyze(t);
  const Finding* f = find(a, "pcie-link-below-peers");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "GPU1 (0000:02:00.0)")) << f->message;
  EXPECT_TRUE(contains(f->message, "GPU0,GPU2")) << f->message;
}

TEST(PeerFindings, GpusOfDifferentModelsAreNotCompared) {
  Topology t = live_pair();
  t.gpus[1].pcie.port_max_width = 8;
  t.pci[1].device = 0x2330;  // another model
  EXPECT_EQ(find(analyze(t), "pcie-link-below-peers"), nullptr);
}

TEST(PeerFindings, FewerNvLinksThanPeersIsAWarning) {
  Topology t = xml(gpu("0000:01:00.0", "16", nvlink("0000:aa:00.0", 18)) +
                   gpu("0000:02:00.0", "16", nvlink("0000:aa:00.0", 12)) +
                   gpu("0000:03:00.0", "16", nvlink("0000:aa:00.0", 18)));
  Analysis a = analyze(t);
  const Finding* f = find(a, "nvlink-below-peers");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "GPU1 (0000:02:00.0) has 12")) << f->message;
  EXPECT_TRUE(contains(f->message, "have 18")) << f->message;
}

TEST(PeerFindings, GpuWithoutACloseNicWhereItsPeersHaveOneIsAWarning) {
  Topology t =
      xml("    <pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" "
          "link_width=\"16\">\n" +
          gpu("0000:11:00.0", "16", "") +
          "      <pci busid=\"0000:12:00.0\" class=\"0x020700\" link_speed=\"32.0 GT/s PCIe\" "
          "link_width=\"16\"/>\n    </pci>\n" +
          gpu("0000:20:00.0", "16", ""));
  Analysis a = analyze(t);
  const Finding* f = find(a, "nic-farther-than-peers");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "GPU1 has no NIC closer")) << f->message;
  EXPECT_TRUE(contains(f->evidence, "GPU1-NIC0 PHB")) << f->evidence;
  EXPECT_EQ(find(a, "nic-behind-cpu"), nullptr);  // said once, by the stronger finding
}

// A PCIe switch holding the given GPUs and one RDMA NIC of `gbps`, the NIC named `name`.
std::string switch_with(const std::string& bus, const std::vector<std::string>& gpu_buses,
                        const std::string& name, int gbps) {
  std::string body = "    <pci busid=\"0000:" + bus +
                     ":00.0\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" "
                     "link_width=\"16\">\n";
  for (const std::string& g : gpu_buses)
    body += gpu("0000:" + g + ":00.0", "16", "");
  body += "      <pci busid=\"0000:" + bus.substr(0, 1) +
          "f:00.0\" class=\"0x020700\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
          "        <nic>\n          <net name=\"" +
          name + "\" dev=\"0\" speed=\"" + std::to_string(gbps * 1000) +
          "\" gdr=\"1\"/>\n        </nic>\n      </pci>\n    </pci>\n";
  return body;
}

TEST(PeerFindings, TwoGpusSharingANicWhereTheOthersHaveTheirOwnIsAWarningWithTheirRates) {
  Topology t =
      xml(switch_with("10", {"11", "12"}, "mlx5_0", 400) +
          switch_with("20", {"21"}, "mlx5_1", 400) + switch_with("30", {"31"}, "mlx5_2", 400));
  Analysis a = analyze(t);
  const Finding* f = find(a, "nic-shared-unevenly");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_TRUE(contains(f->message,
                       "GPU0,GPU1 share their nearest NIC, 2 GPUs to one, while "
                       "GPU2,GPU3 have one each"))
      << f->message;
  EXPECT_TRUE(contains(f->message,
                       "200 Gbit/s (25.0 GB/s) across nodes, against 400 Gbit/s "
                       "(50.0 GB/s) for the others"))
      << f->message;
  EXPECT_TRUE(contains(f->evidence, "mlx5_0 (400 Gbit/s): GPU0,GPU1")) << f->evidence;
  // One NIC per GPU, or one NIC for all: nothing uneven to say.
  EXPECT_EQ(find(analyze(xml(switch_with("10", {"11"}, "mlx5_0", 400) +
                             switch_with("20", {"21"}, "mlx5_1", 400))),
                 "nic-shared-unevenly"),
            nullptr);
  EXPECT_EQ(
      find(analyze(xml(switch_with("10", {"11", "12"}, "mlx5_0", 400))), "nic-shared-unevenly"),
      nullptr);
  EXPECT_EQ(find(analyze(xml(switch_with("10", {"11", "12"}, "mlx5_0", 400) +
                             switch_with("20", {"21", "22"}, "mlx5_1", 400))),
                 "nic-shared-unevenly"),
            nullptr);
}

TEST(PeerFindings, UnevenSharingOfNicsOfUnknownRateSaysTheFraction) {
  Topology t = xml(switch_with("10", {"11", "12", "13"}, "mlx5_0", 0) +
                   switch_with("20", {"21"}, "mlx5_1", 0));
  const Analysis a = analyze(t);  // kept: the finding points into it
  const Finding* f = find(a, "nic-shared-unevenly");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "GPU3 has one of its own")) << f->message;
  EXPECT_TRUE(contains(f->message, "1/3 of its NIC's bandwidth")) << f->message;
}

// --- NVLink counts that disagree ---

TEST(NvLinkSymmetry, LinksToAGpuTheFileLacksAreAWarning) {
  Topology t = xml(gpu("0000:01:00.0", "16", nvlink("0000:99:00.0", 4)));
  Analysis a = analyze(t);
  const Finding* f = find(a, "nvlink-peer-missing");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "4 NVLink(s) to 0000:99:00.0")) << f->message;
}

TEST(NvLinkSymmetry, PairCountingDifferentLinksIsAWarning) {
  Topology t = xml(gpu("0000:01:00.0", "16", nvlink("0000:02:00.0", 12)) +
                   gpu("0000:02:00.0", "16", nvlink("0000:01:00.0", 8)));
  Analysis a = analyze(t);
  const Finding* f = find(a, "nvlink-asymmetric");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "counts 12 NVLink(s) to GPU1, but GPU1 counts 8")) << f->message;
  EXPECT_EQ(std::count_if(a.findings.begin(), a.findings.end(),
                          [](const Finding& x) { return x.code == "nvlink-asymmetric"; }),
            1);
}

TEST(NvLinkSymmetry, LinksAtOneEndOnlyAreFoundWhicheverEndHasThem) {
  Topology t =
      xml(gpu("0000:01:00.0", "16", "") + gpu("0000:02:00.0", "16", nvlink("0000:01:00.0", 4)));
  EXPECT_NE(find(analyze(t), "nvlink-asymmetric"), nullptr);
}

TEST(NvLinkSymmetry, ASymmetricPairIsQuiet) {
  Topology t = xml(gpu("0000:01:00.0", "16", nvlink("0000:02:00.0", 12)) +
                   gpu("0000:02:00.0", "16", nvlink("0000:01:00.0", 12)));
  Analysis a = analyze(t);
  EXPECT_EQ(find(a, "nvlink-asymmetric"), nullptr);
  EXPECT_EQ(find(a, "nvlink-peer-missing"), nullptr);
}

// --- NUMA and network notes say only what is true ---

TEST(NumaUnknown, OneNodeMachineSaysThereIsNothingToPlace) {
  Topology t = live_pair();
  t.gpus[0].numa_node = kUnknownNuma;
  Analysis a = analyze(t);
  const Finding* f = find(a, "numa-unknown");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kNote);
  EXPECT_TRUE(contains(f->message, "no placement to get wrong")) << f->message;
  EXPECT_FALSE(contains(f->message, "cannot be placed")) << f->message;
}

TEST(NumaUnknown, UnknownNodeCountDoesNotClaimOneNode) {
  Topology t = live_pair();
  t.numa_node_count = 0;
  t.gpus[0].numa_node = kUnknownNuma;
  Analysis a = analyze(t);
  const Finding* f = find(a, "numa-unknown");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(contains(f->message, "unknown too")) << f->message;
  EXPECT_FALSE(contains(f->message, "one NUMA node")) << f->message;
  EXPECT_TRUE(contains(f->evidence, "NUMA nodes on the machine: unknown")) << f->evidence;
}

TEST(NumaUnknown, SeveralNodesMakeItAWarning) {
  Topology t = live_pair();
  t.numa_node_count = 2;
  t.gpus[0].numa_node = kUnknownNuma;
  Analysis a = analyze(t);
  const Finding* f = find(a, "numa-unknown");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_TRUE(contains(f->message, "cannot be placed")) << f->message;
}

TEST(NetworkFindings, NoGpuDirectAdviceForASocketNic) {
  Topology t = read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/nvlink_pair.xml");
  Analysis a = analyze(t);
  EXPECT_EQ(find(a, "nic-behind-cpu"), nullptr);
  for (const Finding& f : a.findings)
    EXPECT_FALSE(contains(f.advice, "NCCL_NET_GDR_LEVEL")) << f.code;
  EXPECT_NE(find(a, "no-rdma-nic"), nullptr);
}

// --- The report leads with the verdict; unknown is null, not 0 ---

TEST(TopoText, VerdictAndFindingsComeBeforeTheDetail) {
  Topology t = live_pair();
  t.gpus[1].kernel_driver = "";
  std::string text = commtool::reports::render_topo_text(t, analyze(t));
  size_t verdict = text.find("Verdict: ");
  size_t finding = text.find("[gpu-driver-not-bound]");
  size_t gpus = text.find("\nGPUs\n");
  ASSERT_NE(verdict, std::string::npos) << text;
  EXPECT_LT(verdict, finding);
  EXPECT_LT(finding, gpus);
  EXPECT_EQ(text.find('\n'), verdict - 1) << text;  // the line right after the title
}

TEST(TopoText, VerdictCountsWarningsAndNotes) {
  Topology t = live_pair();
  t.gpus[1].kernel_driver = "";
  t.gpus[0].numa_node = kUnknownNuma;
  std::string text = commtool::reports::render_topo_text(t, analyze(t));
  EXPECT_TRUE(contains(text, "Verdict: 1 warning, 2 notes")) << text;
}

TEST(TopoJson, UnknownLinkRatesAndNvLinksAreNull) {
  Topology t = parse_nccl_xml(
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" "
      "class=\"0x0302\"/>\n  </cpu>\n</system>\n",
      "vendor.xml");
  auto doc = commtool::reports::topo_to_json(t, analyze(t));
  const auto& expected = doc["gpus"][0]["expected"];
  EXPECT_TRUE(expected["nvlink_active"].is_null()) << expected;
  EXPECT_TRUE(expected["nvlink_gbps"].is_null()) << expected;
  EXPECT_TRUE(expected["pcie_payload_gbps"].is_null()) << expected;
  EXPECT_TRUE(doc["gpus"][0]["nvlinks"].is_null());
  EXPECT_TRUE(doc["gpus"][0]["name"].is_null());
}

TEST(TopoJson, KnownZeroNvLinksStayZero) {
  Topology t = live_pair();
  auto doc = commtool::reports::topo_to_json(t, analyze(t));
  EXPECT_EQ(doc["gpus"][0]["expected"]["nvlink_active"], 0);
  EXPECT_EQ(doc["gpus"][0]["kernel_driver"], "nvidia");
}
