// The kernel log's Xid, SXid and fallen-off-the-bus messages, from real logs (tests/fixtures/
// kernel_log/README.md says whose) in every form a log keeps them.
#include "probes/health/kernel_log.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace commtool::health {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(COMMTOOL_SOURCE_DIR) + "/tests/fixtures/kernel_log/" + name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

TEST(KernelLog, TheH100MachinesOwnLogHasDriverLinesAndNoXid) {
  const KernelLogScan scan = scan_kernel_log(fixture("h100_dmesg_no_xid.txt"));
  EXPECT_GT(scan.lines, 300u);
  EXPECT_TRUE(scan.events.empty());
  EXPECT_EQ(scan.unparsed, 0u);
}

TEST(KernelLog, EveryPublicXidLineIsReadWithItsGpuNumberAndProcess) {
  const KernelLogScan scan = scan_kernel_log(fixture("public_xid_lines.txt"));
  EXPECT_EQ(scan.unparsed, 0u);
  std::string numbers;
  for (const XidEvent& e : scan.events)
    numbers += (e.nvswitch ? "S" : "") + std::to_string(e.xid) + " ";
  // Xid 79 and its "GPU has fallen off the bus." line are one event; an SXid's "Data {...}"
  // line continues its first line; the rest are one event per line.
  EXPECT_EQ(numbers,
            "79 S20034 S20034 S20034 13 13 13 109 43 31 94 13 13 13 45 45 149 154 154 149 74 32 "
            "69 13 ");
  ASSERT_EQ(scan.events.size(), 24u);

  const XidEvent& fell = scan.events[0];
  EXPECT_EQ(fell.pci, "0000:91:00");
  EXPECT_EQ(fell.when, "6781741.548779");
  EXPECT_FALSE(fell.pid);  // pid='<unknown>'
  EXPECT_EQ(fell.process, "");
  EXPECT_EQ(fell.detail, "GPU has fallen off the bus.");
  EXPECT_FALSE(fell.from_message);

  const XidEvent& sw = scan.events[1];
  EXPECT_TRUE(sw.nvswitch);
  EXPECT_EQ(sw.pci, "0000:06:00.0");
  EXPECT_EQ(sw.detail, "Fatal, Link 48 LTSSM Fault Up");

  const XidEvent& ctx = scan.events[7];  // dmesg -T, a known process
  EXPECT_EQ(ctx.xid, 109);
  EXPECT_EQ(ctx.when, "Fri Aug 30 11:43:14 2024");
  EXPECT_EQ(ctx.pid, 1797828);
  EXPECT_EQ(ctx.process, "pt_main_thread");
  EXPECT_EQ(ctx.detail, "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005");

  const XidEvent& syslog = scan.events[11];  // syslog with the kernel's stamp, no pid field
  EXPECT_EQ(syslog.when, "Feb 15 17:37:45");
  EXPECT_EQ(syslog.pci, "0000:41:00");
  EXPECT_FALSE(syslog.pid);
  EXPECT_EQ(syslog.detail.rfind("Graphics Exception: ESR", 0), 0u) << syslog.detail;

  EXPECT_EQ(scan.events[14].detail, "Ch 00000001 caused by previous Xid 149");
  EXPECT_EQ(scan.events[16].pci, "0009:01:00");  // GB200's non-zero domains
  EXPECT_EQ(scan.events[23].pci, "0000:03:00");  // a 2012 driver: no "PCI:"
}

TEST(KernelLog, TheThreeLineFallenOffTheBusMessageIsXid79OfItsGpu) {
  const KernelLogScan scan = scan_kernel_log(fixture("fallen_off_bus_multiline.txt"));
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].xid, 79);
  EXPECT_TRUE(scan.events[0].from_message);
  EXPECT_EQ(scan.events[0].pci, "0000:b3:00");
  EXPECT_EQ(scan.events[0].when, "1843.308145");
  EXPECT_TRUE(same_gpu(scan.events[0], "0000:B3:00.0"));
  EXPECT_FALSE(same_gpu(scan.events[0], "0000:b4:00.0"));
}

// /dev/kmsg as read_live_kernel_log() returns it: "prio,seq,usec,flags;message", the embedded
// newlines of one printk escaped as \x0a, as the kernel writes them there.
TEST(KernelLog, DevKmsgRecordsGiveTheirStampInSecondsAndKeepOneRecordPerLine) {
  const KernelLogScan scan = scan_kernel_log(
      "5,0,0,-;Linux version 6.18.44\n"
      "4,1227,437812449932,c;NVRM: Xid (PCI:0000:00:16): 119, pid=36055, name=dcgm-exporter, "
      "Timeout after 6s of waiting for RPC response from GPU0 GSP!\n"
      "4,1300,437812500000,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) "
      "installed in this system has\\x0aNVRM: fallen off the bus and is not responding to "
      "commands.\\x0a\n");
  ASSERT_EQ(scan.events.size(), 2u);
  EXPECT_EQ(scan.events[0].xid, 119);
  EXPECT_EQ(scan.events[0].when, "437812.449932");
  EXPECT_EQ(scan.events[0].process, "dcgm-exporter");
  EXPECT_EQ(scan.events[1].xid, 79);
  EXPECT_EQ(scan.events[1].pci, "0000:b3:00");
}

TEST(KernelLog, AMigInstanceIsKeptAndTheGpuStillMatches) {
  const KernelLogScan scan = scan_kernel_log(
      "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). "
      "RST: No, D-RST: No\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].mig, "GPU-I:05");
  EXPECT_EQ(scan.events[0].pid, 7194);
  EXPECT_TRUE(same_gpu(scan.events[0], "0000:01:00.0"));
}

TEST(KernelLog, ALineThatNamesAnXidButCannotBeReadIsCountedNotGuessed) {
  const KernelLogScan scan = scan_kernel_log(
      "NVRM: Xid (PCI:0000:01:00): banana\n"
      "NVRM: Xid (PCI:zz): 13, x\n"
      "an application printed Xid 13 somewhere\n");
  EXPECT_TRUE(scan.events.empty());
  EXPECT_EQ(scan.unparsed, 2u);
}

TEST(KernelLog, ASickGpuRepeatingOneXidIsBounded) {
  std::string log;
  for (size_t i = 0; i < kMaxXidEvents + 5; ++i)
    log += "NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception\n";
  const KernelLogScan scan = scan_kernel_log(log);
  EXPECT_EQ(scan.events.size(), kMaxXidEvents);
  EXPECT_TRUE(scan.dropped);
}

TEST(KernelLog, ControlCharactersFromTheLogAreEscapedInTheDetail) {
  const KernelLogScan scan =
      scan_kernel_log("NVRM: Xid (PCI:0000:01:00): 13, bad \x1b[31mred\x7f\n");
  ASSERT_EQ(scan.events.size(), 1u);
  EXPECT_EQ(scan.events[0].detail.find('\x1b'), std::string::npos) << scan.events[0].detail;
}

}  // namespace
}  // namespace commtool::health
