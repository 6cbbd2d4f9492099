// Reading NCCL's XML topology files into the Topology model: the three fixtures in
// tests/fixtures/nccl_xml are NCCL dumps of a DGX H100, a two-socket PCIe box and an A100 pair
// with an NVLink bridge; the malformed ones must fail with the line and the field named.
#include "probes/topo/nccl_xml.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <string_view>

#include "probes/base/error.hpp"

namespace commtool::topo {
namespace {

std::string fixture_path(const std::string& name) {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/" + name;
}

Topology load(const std::string& name) {
  return read_nccl_xml_file(fixture_path(name));
}

Error read_error(const std::string& path) {
  try {
    read_nccl_xml_file(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "read_nccl_xml_file accepted " << path;
  return Error(ExitCode::kOk, "");
}

Error parse_error(std::string_view text) {
  try {
    parse_nccl_xml(text, "topo.xml");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "parse_nccl_xml accepted:\n" << text;
  return Error(ExitCode::kOk, "");
}

// A one-socket file around `body`, which starts on line 3.
std::string in_cpu(const std::string& body) {
  return "<system version=\"1\">\n"
         "  <cpu numaid=\"0\" affinity=\"0000ffff\" arch=\"x86_64\">\n" +
         body +
         "  </cpu>\n"
         "</system>\n";
}

// A GPU function with `gpu_children` inside its <gpu> element.
std::string gpu_pci(const std::string& busid, const std::string& gpu_attrs,
                    const std::string& gpu_children = "") {
  return "    <pci busid=\"" + busid +
         "\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" "
         "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
         "      <gpu " +
         gpu_attrs + ">\n" + gpu_children +
         "      </gpu>\n"
         "    </pci>\n";
}

std::map<std::string, int> links_per_peer(const Gpu& gpu) {
  std::map<std::string, int> counts;
  for (const NvLink& link : gpu.nvlinks)
    ++counts[link.peer_bdf];
  return counts;
}

// --- DGX H100: 2 sockets, 4 PCIe switches, 8 GPUs on 4 NVSwitches, 8 InfiniBand NICs ---

TEST(NcclXmlDgxH100, HasEveryDeviceOfTheFile) {
  Topology topo = load("dgx_h100.xml");
  EXPECT_EQ(topo.gpus.size(), 8u);
  EXPECT_EQ(topo.nics.size(), 8u);
  EXPECT_EQ(topo.nvswitches.size(), 4u);
  EXPECT_EQ(topo.root_complexes.size(), 2u);
  EXPECT_EQ(topo.pci.size(), 20u);  // 4 switches + 8 GPU functions + 8 NIC functions
}

TEST(NcclXmlDgxH100, EveryGpuHasEighteenNvLinksSplitOverFourNvSwitches) {
  Topology topo = load("dgx_h100.xml");
  std::map<std::string, int> expected = {
      {"0000:05:00.0", 5}, {"0000:06:00.0", 4}, {"0000:07:00.0", 4}, {"0000:08:00.0", 5}};
  for (const Gpu& gpu : topo.gpus) {
    EXPECT_EQ(gpu.nvlinks.size(), 18u) << gpu.bdf;
    EXPECT_EQ(links_per_peer(gpu), expected) << gpu.bdf;
    for (const NvLink& link : gpu.nvlinks)
      EXPECT_EQ(link.peer, NvLinkPeer::kNvSwitch);
  }
}

TEST(NcclXmlDgxH100, NvLinkIndicesContinueAcrossNvlinkElements) {
  Topology topo = load("dgx_h100.xml");
  const Gpu& gpu = topo.gpus[0];
  for (size_t i = 0; i < gpu.nvlinks.size(); ++i) {
    EXPECT_EQ(gpu.nvlinks[i].link, static_cast<int>(i));
    EXPECT_TRUE(gpu.nvlinks[i].active);
  }
}

TEST(NcclXmlDgxH100, Sm90GpusSpeakNvLink4) {
  Topology topo = load("dgx_h100.xml");
  for (const NvLink& link : topo.gpus[3].nvlinks)
    EXPECT_EQ(link.generation, 4);
}

TEST(NcclXmlDgxH100, NvSwitchesAreTheNvLinkTargets) {
  Topology topo = load("dgx_h100.xml");
  ASSERT_EQ(topo.nvswitches.size(), 4u);
  EXPECT_EQ(topo.nvswitches[0].bdf, "0000:05:00.0");
  EXPECT_EQ(topo.nvswitches[3].bdf, "0000:08:00.0");
}

TEST(NcclXmlDgxH100, NicsOnInfiniBandFunctionsAreInfiniBandAt400Gbps) {
  Topology topo = load("dgx_h100.xml");
  for (const Nic& nic : topo.nics) {
    EXPECT_EQ(nic.kind, NicKind::kInfiniBand) << nic.name;
    EXPECT_DOUBLE_EQ(nic.port_rate_gbps, 400.0) << nic.name;
  }
}

TEST(NcclXmlDgxH100, NicsAreNumberedInOrderOfAppearance) {
  Topology topo = load("dgx_h100.xml");
  for (size_t i = 0; i < topo.nics.size(); ++i) {
    EXPECT_EQ(topo.nics[i].index, static_cast<int>(i));
    EXPECT_EQ(topo.nics[i].name, "mlx5_" + std::to_string(i));
  }
}

TEST(NcclXmlDgxH100, NicSitsOnItsPciFunctionWithItsLink) {
  Topology topo = load("dgx_h100.xml");
  const Nic& nic = topo.nics[0];
  EXPECT_EQ(nic.bdf, "0000:18:00.0");
  EXPECT_EQ(nic.numa_node, 0);
  EXPECT_EQ(nic.pcie.max_gen, 5);
  EXPECT_EQ(nic.pcie.max_width, 16);
}

TEST(NcclXmlDgxH100, GpusTakeNumaNodeAndAffinityFromTheirCpu) {
  Topology topo = load("dgx_h100.xml");
  EXPECT_EQ(topo.gpus[0].numa_node, 0);
  EXPECT_EQ(topo.gpus[0].cpu_affinity, "0-55,112-167");
  EXPECT_EQ(topo.gpus[7].numa_node, 1);
  EXPECT_EQ(topo.gpus[7].cpu_affinity, "56-111,168-223");
}

TEST(NcclXmlDgxH100, RootComplexesAreTheCpusByNumaId) {
  Topology topo = load("dgx_h100.xml");
  ASSERT_EQ(topo.root_complexes.size(), 2u);
  EXPECT_EQ(topo.root_complexes[0].id, "cpu0");
  EXPECT_EQ(topo.root_complexes[0].numa_node, 0);
  EXPECT_EQ(topo.root_complexes[1].id, "cpu1");
  EXPECT_EQ(topo.root_complexes[1].cpu_affinity, "56-111,168-223");
}

TEST(NcclXmlDgxH100, PciParentIsTheEnclosingPciElement) {
  Topology topo = load("dgx_h100.xml");
  const PciNode* gpu = topo.find_pci("0000:1b:00.0");
  const PciNode* sw = topo.find_pci("0000:15:00.0");
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(sw, nullptr);
  EXPECT_EQ(gpu->parent_bdf, "0000:15:00.0");
  EXPECT_EQ(gpu->root_complex, "cpu0");
  EXPECT_EQ(sw->parent_bdf, "");
  EXPECT_EQ(sw->class_code, kClassBridgePci);
  EXPECT_EQ(sw->vendor, 0x1000);
  EXPECT_EQ(sw->device, 0xc030);
}

TEST(NcclXmlDgxH100, GpuLinkIsTheMaximumStateOnly) {
  Topology topo = load("dgx_h100.xml");
  const PcieLink& link = topo.gpus[0].pcie;
  EXPECT_EQ(link.max_gen, 5);
  EXPECT_EQ(link.max_width, 16);
  EXPECT_EQ(link.current_gen, 0);
  EXPECT_EQ(link.current_width, 0);
}

TEST(NcclXmlDgxH100, GpuCarriesItsCudaDeviceAndSm) {
  Topology topo = load("dgx_h100.xml");
  EXPECT_EQ(topo.gpus[5].cuda_ordinal, 5);
  EXPECT_EQ(topo.gpus[5].sm, 90);
  EXPECT_EQ(topo.gpus[5].name, "NVIDIA device 2330");  // the PCI id: the file has no names
}

TEST(NcclXmlDgxH100, SourceNamesTheFileAndEveryBridgeIsAHop) {
  Topology topo = load("dgx_h100.xml");
  EXPECT_EQ(topo.source, "nccl-xml:" + fixture_path("dgx_h100.xml"));
  EXPECT_TRUE(topo.pci_hops_collapsed);
}

TEST(NcclXmlDgxH100, ReportsWhatTheFileCannotTell) {
  Topology topo = load("dgx_h100.xml");
  ASSERT_EQ(topo.missing.size(), 3u);
  EXPECT_EQ(topo.missing[0].what, "current PCIe link state");
  EXPECT_EQ(topo.missing[1].what, "P2P capability from CUDA");
  EXPECT_EQ(topo.missing[2].what, "GPU names");
}

// --- Two sockets, PCIe only: a switch with 2 GPUs and a RoCE NIC, 2 GPUs on the CPUs ---

TEST(NcclXmlPcie4Gpu, HasEveryDeviceOfTheFile) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  EXPECT_EQ(topo.gpus.size(), 4u);
  EXPECT_EQ(topo.nics.size(), 1u);
  EXPECT_EQ(topo.nvswitches.size(), 0u);
  EXPECT_EQ(topo.root_complexes.size(), 2u);
  EXPECT_EQ(topo.pci.size(), 6u);
}

TEST(NcclXmlPcie4Gpu, GpusAreSortedByBusIdAndIndexedInThatOrder) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  ASSERT_EQ(topo.gpus.size(), 4u);
  const char* bdfs[] = {"0000:17:00.0", "0000:3b:00.0", "0000:3c:00.0", "0000:af:00.0"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(topo.gpus[i].bdf, bdfs[i]);
    EXPECT_EQ(topo.gpus[i].index, i);
  }
}

TEST(NcclXmlPcie4Gpu, CudaOrdinalIsTheDevAttributeNotThePosition) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  EXPECT_EQ(topo.gpus[0].cuda_ordinal, 2);  // 0000:17:00.0 is dev 2 in the file
  EXPECT_EQ(topo.gpus[1].cuda_ordinal, 0);
}

TEST(NcclXmlPcie4Gpu, GpuDirectlyUnderTheCpuHasNoParentBridge) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  const PciNode* gpu = topo.find_pci("0000:af:00.0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->parent_bdf, "");
  EXPECT_EQ(gpu->root_complex, "cpu1");
  EXPECT_EQ(gpu->numa_node, 1);
}

TEST(NcclXmlPcie4Gpu, EthernetFunctionWithAGuidIsRoceAt100Gbps) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  ASSERT_EQ(topo.nics.size(), 1u);
  EXPECT_EQ(topo.nics[0].kind, NicKind::kRoce);
  EXPECT_DOUBLE_EQ(topo.nics[0].port_rate_gbps, 100.0);
  EXPECT_EQ(topo.nics[0].bdf, "0000:3d:00.0");
}

TEST(NcclXmlPcie4Gpu, GpusHaveNoNvLinks) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  for (const Gpu& gpu : topo.gpus)
    EXPECT_TRUE(gpu.nvlinks.empty()) << gpu.bdf;
}

TEST(NcclXmlPcie4Gpu, SecondSocketGpuTakesTheSecondCpusAffinity) {
  Topology topo = load("pcie_4gpu_2socket.xml");
  EXPECT_EQ(topo.gpus[3].numa_node, 1);
  EXPECT_EQ(topo.gpus[3].cpu_affinity, "16-31,48-63");
}

// --- Two A100s joined by an NVLink bridge, a plain socket NIC ---

TEST(NcclXmlNvLinkPair, HasEveryDeviceOfTheFile) {
  Topology topo = load("nvlink_pair.xml");
  EXPECT_EQ(topo.gpus.size(), 2u);
  EXPECT_EQ(topo.nics.size(), 1u);
  EXPECT_EQ(topo.nvswitches.size(), 0u);
  EXPECT_EQ(topo.root_complexes.size(), 1u);
  EXPECT_EQ(topo.pci.size(), 2u);
}

TEST(NcclXmlNvLinkPair, EachGpuHasTwelveNvLinksToTheOther) {
  Topology topo = load("nvlink_pair.xml");
  ASSERT_EQ(topo.gpus.size(), 2u);
  EXPECT_EQ(links_per_peer(topo.gpus[0]), (std::map<std::string, int>{{"0000:61:00.0", 12}}));
  EXPECT_EQ(links_per_peer(topo.gpus[1]), (std::map<std::string, int>{{"0000:41:00.0", 12}}));
  for (const NvLink& link : topo.gpus[0].nvlinks)
    EXPECT_EQ(link.peer, NvLinkPeer::kGpu);
}

TEST(NcclXmlNvLinkPair, Sm80GpusSpeakNvLink3) {
  Topology topo = load("nvlink_pair.xml");
  for (const NvLink& link : topo.gpus[1].nvlinks)
    EXPECT_EQ(link.generation, 3);
}

TEST(NcclXmlNvLinkPair, SocketNicUnderTheCpuIsEthernetOnThatCpu) {
  Topology topo = load("nvlink_pair.xml");
  ASSERT_EQ(topo.nics.size(), 1u);
  const Nic& nic = topo.nics[0];
  EXPECT_EQ(nic.name, "eth0");
  EXPECT_EQ(nic.kind, NicKind::kEthernet);
  EXPECT_EQ(nic.bdf, "");
  EXPECT_EQ(nic.root_complex, "cpu0");
  EXPECT_EQ(nic.numa_node, 0);
  EXPECT_DOUBLE_EQ(nic.port_rate_gbps, 25.0);
}

TEST(NcclXmlNvLinkPair, AffinityOfAllSixtyFourCpusIsOneRange) {
  Topology topo = load("nvlink_pair.xml");
  EXPECT_EQ(topo.gpus[0].cpu_affinity, "0-63");
}

// --- Mapping rules, on small inline files ---

TEST(NcclXml, DisplayFunctionWithoutGpuChildIsOnlyAPciNode) {
  Topology topo = parse_nccl_xml(
      in_cpu("    <pci busid=\"0000:03:00.0\" class=\"0x030000\" vendor=\"0x102b\"/>\n"),
      "topo.xml");
  EXPECT_TRUE(topo.gpus.empty());
  EXPECT_EQ(topo.pci.size(), 1u);
}

TEST(NcclXml, NvLinkToABridgeClassIsACpuPeer) {
  Topology topo = parse_nccl_xml(
      in_cpu(
          gpu_pci("0000:04:00.0", "dev=\"0\" sm=\"70\"",
                  "        <nvlink target=\"0000:00:00.0\" count=\"3\" tclass=\"0x060400\"/>\n")),
      "topo.xml");
  ASSERT_EQ(topo.gpus[0].nvlinks.size(), 3u);
  EXPECT_EQ(topo.gpus[0].nvlinks[0].peer, NvLinkPeer::kCpu);
  EXPECT_EQ(topo.gpus[0].nvlinks[0].generation, 2);
}

TEST(NcclXml, NvSwitchPciFunctionIsListedAsAnNvSwitch) {
  Topology topo = parse_nccl_xml(
      in_cpu("    <pci busid=\"0000:05:00.0\" class=\"0x068000\" vendor=\"0x10de\"/>\n"),
      "topo.xml");
  ASSERT_EQ(topo.nvswitches.size(), 1u);
  EXPECT_EQ(topo.nvswitches[0].bdf, "0000:05:00.0");
}

TEST(NcclXml, BusIdIsCanonicalised) {
  Topology topo =
      parse_nccl_xml(in_cpu("    <pci busid=\"0000:1B:00.0\" class=\"0x060400\"/>\n"), "topo.xml");
  EXPECT_EQ(topo.pci[0].bdf, "0000:1b:00.0");
}

TEST(NcclXml, CpuWithoutNumaIdIsUnknownAndNamedByPosition) {
  Topology topo = parse_nccl_xml("<system version=\"1\"><cpu/></system>", "topo.xml");
  ASSERT_EQ(topo.root_complexes.size(), 1u);
  EXPECT_EQ(topo.root_complexes[0].id, "cpu?0");
  EXPECT_EQ(topo.root_complexes[0].numa_node, kUnknownNuma);
}

TEST(NcclXml, NumaIdMinusOneMeansUnknown) {
  Topology topo = parse_nccl_xml("<system version=\"1\"><cpu numaid=\"-1\"/></system>", "topo.xml");
  EXPECT_EQ(topo.root_complexes[0].numa_node, kUnknownNuma);
}

TEST(NcclXml, UnknownLinkSpeedAndMissingIdsReadAsZero) {
  Topology topo = parse_nccl_xml(
      in_cpu("    <pci busid=\"0000:17:00.0\" class=\"0x060400\" link_speed=\"Unknown\"/>\n"),
      "topo.xml");
  EXPECT_EQ(topo.pci[0].link.max_gen, 0);
  EXPECT_EQ(topo.pci[0].link.max_width, 0);
  EXPECT_EQ(topo.pci[0].vendor, 0);
  EXPECT_EQ(topo.pci[0].device, 0);
}

TEST(NcclXml, UnknownElementsAndAttributesAreIgnored) {
  Topology topo =
      parse_nccl_xml(in_cpu(gpu_pci("0000:04:00.0", "dev=\"0\" sm=\"90\" future=\"yes\"",
                                    "        <c2c bw=\"40\" count=\"10\"/>\n")),
                     "topo.xml");
  EXPECT_EQ(topo.gpus.size(), 1u);
  EXPECT_TRUE(topo.gpus[0].nvlinks.empty());
}

TEST(NcclXml, GpuWithoutDevIsNotVisibleToCuda) {
  Topology topo = parse_nccl_xml(in_cpu(gpu_pci("0000:04:00.0", "sm=\"90\"")), "topo.xml");
  EXPECT_EQ(topo.gpus[0].cuda_ordinal, -1);
}

// --- Bad input: the line and the field are named, the exit code is 2 ---

TEST(NcclXmlErrors, MalformedClassNamesLineAndValue) {
  Error e = read_error(fixture_path("malformed_class.xml"));
  EXPECT_EQ(e.code(), ExitCode::kUsage);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "malformed_class.xml:8: <pci busid=\"0000:17:00.0\"> class=\"bridge\": "
                      "expected a hex PCI class of 2, 4 or 6 digits such as 0x060400 or 0x0302",
                      e.what());
}

TEST(NcclXmlErrors, MalformedLinkWidthNamesLineAndValue) {
  Error e = read_error(fixture_path("malformed_width.xml"));
  EXPECT_EQ(e.code(), ExitCode::kUsage);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "malformed_width.xml:7: <pci busid=\"0000:3c:00.0\"> link_width=\"x16\": "
                      "expected a number of lanes such as 16",
                      e.what());
}

TEST(NcclXmlErrors, TruncatedFileNamesTheUnclosedTag) {
  Error e = read_error(fixture_path("malformed_truncated.xml"));
  EXPECT_EQ(e.code(), ExitCode::kUsage);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "malformed_truncated.xml:10: unexpected end of file: the <nvlink> tag "
                      "opened at line 10 is not closed",
                      e.what());
}

TEST(NcclXmlErrors, MissingFileNamesThePathAndTheReason) {
  std::string path = fixture_path("no_such_file.xml");
  Error e = read_error(path);
  EXPECT_EQ(e.code(), ExitCode::kUsage);
  EXPECT_PRED_FORMAT2(testing::IsSubstring, path, e.what());
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "No such file or directory", e.what());
}

TEST(NcclXmlErrors, DirectoryIsNotAFile) {
  Error e = read_error(fixture_path(""));
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "is a directory", e.what());
}

TEST(NcclXmlErrors, RootOtherThanSystemIsRejected) {
  Error e = parse_error("<topology/>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:1: expected <system> as the root element",
                      e.what());
}

TEST(NcclXmlErrors, InvalidBusIdNamesLineAndValue) {
  Error e = parse_error(in_cpu("    <pci busid=\"17:00\" class=\"0x060400\"/>\n"));
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:3: <pci> busid=\"17:00\": expected a PCI address", e.what());
}

TEST(NcclXmlErrors, PciWithoutBusIdIsRejected) {
  Error e = parse_error(in_cpu("    <pci class=\"0x060400\"/>\n"));
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "topo.xml:3: <pci> has no busid", e.what());
}

TEST(NcclXmlErrors, RepeatedBusIdIsRejected) {
  Error e =
      parse_error(in_cpu("    <pci busid=\"0000:17:00.0\" class=\"0x060400\"/>\n"
                         "    <pci busid=\"0000:17:00.0\" class=\"0x060400\"/>\n"));
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:4: busid \"0000:17:00.0\" appears twice (first at line 3)",
                      e.what());
}

TEST(NcclXmlErrors, UnparseableLinkSpeedNamesTheValue) {
  Error e = parse_error(
      in_cpu("    <pci busid=\"0000:17:00.0\" class=\"0x060400\" link_speed=\"fast\"/>\n"));
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:3: <pci busid=\"0000:17:00.0\"> "
                      "link_speed=\"fast\": expected a PCIe rate",
                      e.what());
}

TEST(NcclXmlErrors, LinkWidthAboveThirtyTwoIsRejected) {
  Error e = parse_error(
      in_cpu("    <pci busid=\"0000:17:00.0\" class=\"0x060400\" link_width=\"64\"/>\n"));
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "link_width=\"64\": expected a number of lanes",
                      e.what());
}

TEST(NcclXmlErrors, MalformedVendorNamesTheValue) {
  Error e = parse_error(
      in_cpu("    <pci busid=\"0000:17:00.0\" class=\"0x060400\" vendor=\"nvidia\"/>\n"));
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:3: <pci busid=\"0000:17:00.0\"> vendor=\"nvidia\": expected a hex "
                      "PCI vendor ID",
                      e.what());
}

TEST(NcclXmlErrors, NonNumericSmNamesTheValue) {
  Error e = parse_error(in_cpu(gpu_pci("0000:04:00.0", "dev=\"0\" sm=\"hopper\"")));
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:4: <gpu dev=\"0\"> sm=\"hopper\": expected a compute capability",
                      e.what());
}

TEST(NcclXmlErrors, NvLinkCountMustBePositive) {
  Error e = parse_error(in_cpu(
      gpu_pci("0000:04:00.0", "dev=\"0\" sm=\"90\"",
              "        <nvlink target=\"0000:05:00.0\" count=\"0\" tclass=\"0x068000\"/>\n")));
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:5: <nvlink target=\"0000:05:00.0\"> count=\"0\": expected a "
                      "positive number of links",
                      e.what());
}

TEST(NcclXmlErrors, MalformedAffinityNamesTheValue) {
  Error e = parse_error("<system version=\"1\">\n<cpu numaid=\"0\" affinity=\"0-15\"/>\n</system>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:2: <cpu numaid=\"0\"> affinity=\"0-15\": expected comma-separated "
                      "32-bit hex words",
                      e.what());
}

TEST(NcclXmlErrors, PciOutsideACpuIsRejected) {
  Error e = parse_error("<system version=\"1\">\n<pci busid=\"0000:17:00.0\"/>\n</system>");
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "topo.xml:2: <pci busid=\"0000:17:00.0\"> must be inside a <cpu>", e.what());
}

// --- cpumask_to_cpulist: the kernel's cpumask format, most significant word first ---

TEST(CpumaskToCpulist, SingleWordIsOneRange) {
  EXPECT_EQ(cpumask_to_cpulist("0000ffff"), "0-15");
}

TEST(CpumaskToCpulist, LastWordHoldsTheLowestCpus) {
  EXPECT_EQ(cpumask_to_cpulist("0000ffff,0000ffff"), "0-15,32-47");
}

TEST(CpumaskToCpulist, ScatteredBitsAreListedOneByOne) {
  EXPECT_EQ(cpumask_to_cpulist("80000000,00000015"), "0,2,4,63");
}

TEST(CpumaskToCpulist, PairOfCpusIsARange) {
  EXPECT_EQ(cpumask_to_cpulist("00000003"), "0-1");
}

TEST(CpumaskToCpulist, WideMaskOfTwoSocketHost) {
  EXPECT_EQ(cpumask_to_cpulist("00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff"),
            "0-55,112-167");
}

TEST(CpumaskToCpulist, RangeMayCrossAWordBoundary) {
  EXPECT_EQ(cpumask_to_cpulist("0000000f,f0000000"), "28-35");
}

TEST(CpumaskToCpulist, EmptyMaskIsEmpty) {
  EXPECT_EQ(cpumask_to_cpulist(""), "");
}

TEST(CpumaskToCpulist, AllZeroMaskIsEmpty) {
  EXPECT_EQ(cpumask_to_cpulist("00000000,00000000"), "");
}

TEST(CpumaskToCpulist, NonHexWordIsAUsageError) {
  try {
    cpumask_to_cpulist("0000ffff,xyz");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_PRED_FORMAT2(testing::IsSubstring, "\"0000ffff,xyz\"", e.what());
  }
}

TEST(CpumaskToCpulist, WordOfMoreThan32BitsIsRejected) {
  EXPECT_THROW(cpumask_to_cpulist("1ffffffff"), Error);
}

TEST(CpumaskToCpulist, EmptyWordIsRejected) {
  EXPECT_THROW(cpumask_to_cpulist("ffff,,ffff"), Error);
}

}  // namespace
}  // namespace commtool::topo

// --- Class codes and NIC kinds as vendors' files and NCCL's socket transport write them ---

namespace commtool::topo {
namespace {

TEST(NcclXmlClass, OddLengthClassIsRejected) {
  Error e = parse_error(in_cpu("    <pci busid=\"0000:03:00.0\" class=\"0x302\"/>\n"));
  EXPECT_NE(std::string(e.what()).find("class=\"0x302\""), std::string::npos) << e.what();
}

TEST(NcclXmlNics, SocketNicWithItsDeviceNumberAsGuidIsEthernet) {
  // NCCL's own dump on the H200 VM: the socket transport writes guid="0x0" gdr="0".
  Topology t = load("h200_vm_nccl_dump.xml");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].kind, NicKind::kEthernet);
}

TEST(NcclXmlNics, RdmaNetOutsideAnyPciIsRdmaOfUnknownLinkLayer) {
  Topology t = parse_nccl_xml(in_cpu("    <nic>\n      <net name=\"mlx5_0\" dev=\"0\" "
                                     "guid=\"0x946dae0300d2a110\" gdr=\"1\"/>\n    </nic>\n"),
                              "topo.xml");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].kind, NicKind::kRdma);
}

TEST(NcclXmlNics, ControlCharactersInNamesAreEscaped) {
  Topology t = parse_nccl_xml(
      in_cpu("    <nic>\n      <net name=\"eth0\x1b[31m\" dev=\"0\"/>\n    </nic>\n"), "topo.xml");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name.find('\x1b'), std::string::npos);
  EXPECT_NE(t.nics[0].name.find("\\x1b"), std::string::npos) << t.nics[0].name;
}

}  // namespace
}  // namespace commtool::topo
