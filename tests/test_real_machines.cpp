// Topologies read back from the GPU machine itself (2026-12-02): a sysfs capture made by
// scripts/capture-sysfs.sh and the file NCCL 2.28.9 wrote with NCCL_TOPO_DUMP_FILE there.
#include <gtest/gtest.h>

#include "probes/topo/classify.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "probes/topo/sysfs_reader.hpp"

using namespace commtool::topo;

namespace {

const std::string kFixtures = COMMTOOL_FIXTURES_DIR;

Topology h200_sysfs() {
  return read_sysfs({kFixtures + "/sysfs/h200_vm", true, ""});
}
Topology h200_nccl() {
  return read_nccl_xml_file(kFixtures + "/nccl_xml/h200_vm_nccl_dump.xml");
}

}  // namespace

TEST(RealH200Sysfs, OneH200OnTheRootBusAtGen5x16) {
  Topology t = h200_sysfs();
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].bdf, "0000:00:06.0");
  EXPECT_EQ(t.gpus[0].name, "NVIDIA device 2335");  // no NVML for a capture: the PCI id
  EXPECT_EQ(t.gpus[0].pcie.max_gen, 5);
  EXPECT_EQ(t.gpus[0].pcie.max_width, 16);
  EXPECT_EQ(t.gpus[0].numa_node, kUnknownNuma);
  EXPECT_EQ(t.gpus[0].cpu_affinity, "0-15");
  EXPECT_EQ(t.gpus[0].pcie.port_max_gen, 0);
}

TEST(RealH200Sysfs, VirtioNicIsTheOnlyNicAndSharesTheRootBus) {
  Topology t = h200_sysfs();
  ASSERT_EQ(t.nics.size(), 1u);  // lo, ifb0 and ifb1 have no device
  EXPECT_EQ(t.nics[0].name, "eth0");
  EXPECT_EQ(t.nics[0].bdf, "0000:00:03.0");
  Analysis a = analyze(t);
  EXPECT_EQ(label(a.matrix.cells[0][1]), "PHB");
}

TEST(RealH200Sysfs, MissingParentBridgeAndNumaAreNotedNotFatal) {
  Topology t = h200_sysfs();
  EXPECT_EQ(t.numa_node_count, 1);  // node0 exists, yet the GPU's numa_node reads -1
  bool port_noted = false;
  for (const Missing& m : t.missing)
    port_noted |= m.what == "upstream port of 0000:00:06.0";
  EXPECT_TRUE(port_noted);
  Analysis a = analyze(t);
  EXPECT_NEAR(a.rates[0].pcie_payload_gbps, 57.2, 0.05);
}

TEST(RealH200NcclDump, ReadsNcclsOwnFile) {
  Topology t = h200_nccl();
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].bdf, "0000:00:06.0");
  EXPECT_EQ(t.gpus[0].sm, 90);
  EXPECT_EQ(t.gpus[0].pcie.max_gen, 5);
  EXPECT_EQ(t.gpus[0].pcie.max_width, 0);  // NCCL wrote link_width="0" in the VM: unknown
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name, "eth0");
  EXPECT_TRUE(t.nics[0].bdf.empty());
  EXPECT_DOUBLE_EQ(t.nics[0].port_rate_gbps, 10.0);
}

TEST(RealH200NcclDump, NicUnderTheCpuIsPhbFromTheGpu) {
  Topology t = h200_nccl();
  Analysis a = analyze(t);
  EXPECT_EQ(label(a.matrix.cells[0][1]), "PHB");
  EXPECT_EQ(a.nic_pairing[0].nic, 0);
  EXPECT_EQ(a.rates[0].pcie_raw_gbps, 0.0);  // width unknown: no expected rate, not a guess
}
