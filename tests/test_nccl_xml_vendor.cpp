// A vendor's NCCL_TOPO_FILE (tests/fixtures/nccl_xml/vendor_pci_only.xml): two GPUs (one with a
// 4-digit class, neither with a vendor) and an InfiniBand and an Ethernet function, none with a
// <gpu> or <nic> inside, as cloud vendors publish them. Read as NCCL reads them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "probes/topo/classify.hpp"
#include "probes/topo/nccl_xml.hpp"

namespace commtool::topo {
namespace {

Topology load_vendor_file() {
  return read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/vendor_pci_only.xml");
}

bool mentions(const Topology& t, const std::string& what_part) {
  return std::any_of(t.missing.begin(), t.missing.end(),
                     [&](const Missing& m) { return m.what.find(what_part) != std::string::npos; });
}

TEST(NcclXmlVendorFile, DisplayClassFunctionsAreGpus) {
  Topology t = load_vendor_file();
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].bdf, "0001:00:00.0");
  EXPECT_EQ(t.gpus[1].bdf, "0002:00:00.0");
  EXPECT_EQ(t.gpus[0].pcie.max_gen, 4);
  EXPECT_EQ(t.gpus[0].numa_node, 0);
}

TEST(NcclXmlVendorFile, ShortClassCodesAreWidened) {
  Topology t = load_vendor_file();
  EXPECT_EQ(t.find_pci("0001:00:00.0")->class_code, 0x030200u);
  EXPECT_EQ(t.find_pci("0101:00:00.0")->class_code, 0x020700u);
}

TEST(NcclXmlVendorFile, NetworkClassFunctionsAreNicsOfTheirClass) {
  Topology t = load_vendor_file();
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_EQ(t.nics[0].bdf, "0101:00:00.0");
  EXPECT_EQ(t.nics[0].kind, NicKind::kInfiniBand);
  EXPECT_EQ(t.nics[1].kind, NicKind::kEthernet);
  EXPECT_EQ(t.nics[0].name, "");
}

TEST(NcclXmlVendorFile, SaysWhatTheFileCannotTell) {
  Topology t = load_vendor_file();
  EXPECT_FALSE(t.gpus[0].nvlinks_known);
  EXPECT_EQ(t.gpus[0].name, "");
  EXPECT_TRUE(mentions(t, "NVLinks of 2 GPU(s)"));
  EXPECT_TRUE(mentions(t, "of 2 NIC(s)"));
}

TEST(NcclXmlVendorFile, GpusAreFoundSoTheFindingsAreNotEmpty) {
  Topology t = load_vendor_file();
  Analysis a = analyze(t);
  EXPECT_EQ(a.matrix.labels.size(), 4u);  // 2 GPUs, 2 NICs
  EXPECT_EQ(label(a.nic_pairing[0].path), "PIX");
}

}  // namespace
}  // namespace commtool::topo
