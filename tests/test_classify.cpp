#include <gtest/gtest.h>

#include <algorithm>

#include "probes/topo/classify.hpp"
#include "probes/topo/findings.hpp"
#include "probes/topo/nccl_xml.hpp"

using namespace commtool::topo;

namespace {

std::string fixture(const std::string& name) {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/" + name;
}

const Finding* find(const Analysis& a, const std::string& code) {
  auto it = std::find_if(a.findings.begin(), a.findings.end(),
                         [&](const Finding& f) { return f.code == code; });
  return it == a.findings.end() ? nullptr : &*it;
}

// Two GPUs under one switch (collapsed tree, as from NCCL XML), with CUDA's P2P answers.
Topology two_gpus_under_switch(bool p2p) {
  Topology t;
  t.pci_hops_collapsed = true;
  t.root_complexes = {{"cpu0", 0, "0-7"}};
  t.pci = {{"0000:10:00.0", kClassBridgePci, 0, 0, "", "cpu0", 0, {}, -1},
           {"0000:11:00.0", 0x030200, kVendorNvidia, 0, "0000:10:00.0", "cpu0", 0, {}, -1},
           {"0000:12:00.0", 0x030200, kVendorNvidia, 0, "0000:10:00.0", "cpu0", 0, {}, -1}};
  t.gpus.resize(2);
  t.gpus[0].index = 0;
  t.gpus[0].bdf = "0000:11:00.0";
  t.gpus[0].numa_node = 0;
  t.gpus[1].index = 1;
  t.gpus[1].bdf = "0000:12:00.0";
  t.gpus[1].numa_node = 0;
  t.p2p_queried = true;
  t.p2p = {{0, 1, p2p, p2p ? 0 : -1, p2p}, {1, 0, p2p, p2p ? 0 : -1, p2p}};
  return t;
}

void add_links(Gpu& g, NvLinkPeer peer, const std::string& peer_bdf, int count,
               bool active = true) {
  for (int i = 0; i < count; ++i) {
    g.nvlinks.push_back({static_cast<int>(g.nvlinks.size()), active, 0, 4, peer, peer_bdf});
  }
}

}  // namespace

TEST(Classify, LabelsMatchNvidiaSmiVocabulary) {
  EXPECT_EQ(label(Connection{PathClass::kNvLink, 18, false}), "NV18");
  EXPECT_EQ(label(Connection{PathClass::kPix, 0, false}), "PIX");
  EXPECT_EQ(label(PathClass::kSys), "SYS");
  EXPECT_EQ(label(PathClass::kSelf), "X");
}

TEST(Classify, SiblingsUnderOneSwitchArePix) {
  Topology t = two_gpus_under_switch(true);
  EXPECT_EQ(classify_pcie(t, "0000:11:00.0", "0000:12:00.0").path, PathClass::kPix);
}

TEST(Classify, DirectNvLinksCountPerPeer) {
  Topology t = two_gpus_under_switch(true);
  add_links(t.gpus[0], NvLinkPeer::kGpu, t.gpus[1].bdf, 4);
  add_links(t.gpus[1], NvLinkPeer::kGpu, t.gpus[0].bdf, 4);
  EXPECT_EQ(label(classify_gpus(t, t.gpus[0], t.gpus[1])), "NV4");
}

TEST(Classify, InactiveNvLinksFallBackToPcie) {
  Topology t = two_gpus_under_switch(true);
  add_links(t.gpus[0], NvLinkPeer::kGpu, t.gpus[1].bdf, 4, false);
  EXPECT_EQ(label(classify_gpus(t, t.gpus[0], t.gpus[1])), "PIX");
}

TEST(Classify, NvSwitchPairTakesTheSmallerLinkCount) {
  Topology t = two_gpus_under_switch(true);
  add_links(t.gpus[0], NvLinkPeer::kNvSwitch, "0000:05:00.0", 18);
  add_links(t.gpus[1], NvLinkPeer::kNvSwitch, "0000:05:00.0", 12);
  EXPECT_EQ(label(classify_gpus(t, t.gpus[0], t.gpus[1])), "NV12");
}

TEST(Classify, PartlyDownNvLinksAreAWarning) {
  Topology t = two_gpus_under_switch(true);
  add_links(t.gpus[0], NvLinkPeer::kNvSwitch, "0000:05:00.0", 17);
  add_links(t.gpus[0], NvLinkPeer::kNvSwitch, "0000:05:00.0", 1, false);
  add_links(t.gpus[1], NvLinkPeer::kNvSwitch, "0000:05:00.0", 18);
  Analysis a = analyze(t);
  const Finding* f = find(a, "nvlink-inactive");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("17 of 18"), std::string::npos);
  EXPECT_NE(f->evidence.find("17"), std::string::npos);  // the down link's index
}

TEST(Classify, UnknownNumaAcrossRootComplexesIsAnAssumedNode) {
  Topology t = two_gpus_under_switch(true);
  t.pci_hops_collapsed = false;
  t.pci[2].root_complex = "pci0000:80";
  t.pci[2].parent_bdf = "";
  t.root_complexes = {{"pci0000:00", kUnknownNuma, ""}, {"pci0000:80", kUnknownNuma, ""}};
  for (auto& n : t.pci)
    n.numa_node = kUnknownNuma;
  t.pci[0].root_complex = t.pci[1].root_complex = "pci0000:00";
  Connection c = classify_pcie(t, "0000:11:00.0", "0000:12:00.0");
  EXPECT_EQ(c.path, PathClass::kNode);
  EXPECT_TRUE(c.numa_assumed);
}

TEST(Classify, DeviceOutsideTheTreeIsTreatedAsSys) {
  Topology t = two_gpus_under_switch(true);
  EXPECT_EQ(classify_pcie(t, "0000:11:00.0", "0000:99:00.0").path, PathClass::kSys);
}

TEST(P2pVerdicts, BothDirectionsMustAllowAccess) {
  Topology t = two_gpus_under_switch(true);
  t.p2p[1].can_access = false;
  Analysis a = analyze(t);
  ASSERT_EQ(a.p2p.size(), 1u);
  EXPECT_TRUE(a.p2p[0].known);
  EXPECT_FALSE(a.p2p[0].can_access);
}

TEST(P2pVerdicts, UsablePairKeepsRankAndAtomics) {
  Analysis a = analyze(two_gpus_under_switch(true));
  ASSERT_EQ(a.p2p.size(), 1u);
  EXPECT_TRUE(a.p2p[0].can_access);
  EXPECT_EQ(a.p2p[0].performance_rank, 0);
  EXPECT_TRUE(a.p2p[0].native_atomics);
  EXPECT_EQ(find(a, "p2p-unavailable"), nullptr);
}

TEST(P2pVerdicts, AcsRedirectOnTheSwitchIsNamed) {
  Topology t = two_gpus_under_switch(false);
  t.pci[0].acs_p2p_redirect = 1;
  Analysis a = analyze(t);
  EXPECT_NE(a.p2p[0].reason.find("ACS"), std::string::npos);
  EXPECT_NE(a.p2p[0].reason.find("0000:10:00.0"), std::string::npos);
  ASSERT_NE(find(a, "p2p-unavailable"), nullptr);
}

TEST(P2pVerdicts, VirtualMachineIsTheReasonWhenNoAcs) {
  Topology t = two_gpus_under_switch(false);
  t.in_vm = true;
  EXPECT_NE(analyze(t).p2p[0].reason.find("virtual machine"), std::string::npos);
}

TEST(P2pVerdicts, IommuIsTheReasonOnBareMetal) {
  Topology t = two_gpus_under_switch(false);
  t.iommu_groups = 40;
  EXPECT_NE(analyze(t).p2p[0].reason.find("IOMMU"), std::string::npos);
}

TEST(P2pVerdicts, SocketsApartIsTheReasonForSys) {
  Topology t = two_gpus_under_switch(false);
  t.in_vm = true;  // the path outranks the VM guess
  EXPECT_NE(p2p_refusal_reason(t, t.gpus[0], t.gpus[1], Connection{PathClass::kSys, 0, false})
                .find("different CPU sockets"),
            std::string::npos);
}

TEST(P2pVerdicts, NotQueriedSaysSo) {
  Topology t = two_gpus_under_switch(true);
  t.p2p.clear();
  t.p2p_queried = false;
  Analysis a = analyze(t);
  // Unasked, no pair is listed (n^2 "unknown" rows on a big file): the summary says it once.
  EXPECT_TRUE(a.p2p.empty());
  EXPECT_NE(a.p2p_summary.find("unknown"), std::string::npos);
}

TEST(NcclXmlClassify, DgxGpusAreNv18AndPairWithTheirSwitchNics) {
  Topology t = read_nccl_xml_file(fixture("dgx_h100.xml"));
  Analysis a = analyze(t);
  const size_t gpus = t.gpus.size();
  ASSERT_EQ(gpus, 8u);
  for (size_t i = 0; i < gpus; ++i) {
    for (size_t j = 0; j < gpus; ++j) {
      if (i != j) {
        EXPECT_EQ(label(a.matrix.cells[i][j]), "NV18") << i << "," << j;
      }
    }
  }
  for (const NicPairing& p : a.nic_pairing) {
    EXPECT_EQ(p.path.path, PathClass::kPix) << "GPU" << p.gpu;
  }
  // Two GPUs share a switch with two NICs: one NIC each, not both on the first.
  EXPECT_NE(a.nic_pairing[0].nic, a.nic_pairing[1].nic);
  EXPECT_EQ(a.rates[0].nvlink_gbps, 450.0);
  EXPECT_EQ(find(a, "mixed-link-types"), nullptr);
}

TEST(NcclXmlClassify, PcieServerMixesPixPhbAndSys) {
  Topology t = read_nccl_xml_file(fixture("pcie_4gpu_2socket.xml"));
  Analysis a = analyze(t);
  // Sorted by bus id: 17 (under cpu0 directly), 3b, 3c (switch), af (cpu1).
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_EQ(t.gpus[0].bdf, "0000:17:00.0");
  EXPECT_EQ(label(a.matrix.cells[1][2]), "PIX");
  EXPECT_EQ(label(a.matrix.cells[0][1]), "PHB");
  EXPECT_EQ(label(a.matrix.cells[0][3]), "SYS");
  EXPECT_EQ(label(a.nic_pairing[3].path), "SYS");
  EXPECT_NE(find(a, "nic-numa-mismatch"), nullptr);
  EXPECT_NE(find(a, "nic-farther-than-peers"), nullptr);  // GPU0 PHB, GPU1-2 PIX
  EXPECT_NE(find(a, "different-root-complexes"), nullptr);
}

TEST(NcclXmlClassify, NvlinkPairIsNv12AndTheSocketNicIsPhb) {
  Topology t = read_nccl_xml_file(fixture("nvlink_pair.xml"));
  Analysis a = analyze(t);
  EXPECT_EQ(label(a.matrix.cells[0][1]), "NV12");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(label(a.nic_pairing[0].path), "PHB");
  // A socket NIC: GPUDirect RDMA is not a question, so no "behind the CPU" note.
  EXPECT_EQ(find(a, "nic-behind-cpu"), nullptr);
  EXPECT_DOUBLE_EQ(a.rates[0].nvlink_gbps, 12 * 25.0);
}

TEST(Findings, WarningsComeBeforeNotes) {
  Topology t = read_nccl_xml_file(fixture("pcie_4gpu_2socket.xml"));
  Analysis a = analyze(t);
  bool seen_note = false;
  for (const Finding& f : a.findings) {
    if (f.severity == Severity::kNote) seen_note = true;
    if (f.severity == Severity::kWarning) {
      EXPECT_FALSE(seen_note) << f.code;
    }
  }
}
