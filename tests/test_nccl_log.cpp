// NCCL's logs (tracing/crossrank/nccl_log.hpp): the real ones of the 3-rank PyTorch job captured
// on the GPU machine (tests/fixtures/nccl_logs, NCCL 2.28.9, socket transport: no InfiniBand
// there), and the lines of an InfiniBand node as NCCL writes them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "next_step_checks.hpp"
#include "probes/base/input_file.hpp"
#include "tracing/crossrank/nccl_log.hpp"

namespace fs = std::filesystem;
using namespace commtool::crossrank;

namespace {

std::vector<NcclLog> fixture_logs(const std::string& c) {
  std::vector<NcclLog> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(COMMTOOL_FIXTURES_DIR) / "nccl_logs" / c))
    files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    out.push_back(read_nccl_log(commtool::files::read_input_file(f.string()), f.string()));
  return out;
}

}  // namespace

TEST(NcclLog, RealLogsGiveTheRanksTheNetworkAndTheWarnings) {
  const std::vector<NcclLog> logs = fixture_logs("func");
  ASSERT_EQ(logs.size(), 3u);
  const NcclLog& l = logs[0];
  EXPECT_EQ(l.host, "vm");
  EXPECT_EQ(l.pid, 1856);
  EXPECT_EQ(l.version, "2.28.9+cuda13.0");
  EXPECT_EQ(l.network, "Socket");
  EXPECT_FALSE(l.ib_devices);  // "NET/IB : No device found." then "Using [RO]": options only
  ASSERT_EQ(l.comms.size(), 1u);
  EXPECT_EQ(l.comms[0].comm_id, "0x93ec23942d4380df");
  EXPECT_EQ(l.comms[0].rank, 0);
  EXPECT_EQ(l.comms[0].nranks, 3);
  EXPECT_EQ(l.comms[0].bus_id, "60");
  EXPECT_TRUE(l.comms[0].init_complete);
  EXPECT_EQ(l.warnings.size(), 2u);
  EXPECT_EQ(logs[1].warnings.size(), 0u);  // rank 1, the one that broadcast, went on
  const std::vector<LogFinding> f = analyse_nccl_logs(logs);
  ASSERT_EQ(f.size(), 1u);  // no transport finding on a node without InfiniBand
  next_step::expect_next_step(f[0].advice, f[0].text);
  EXPECT_EQ(f[0].text,
            "NCCL WARN \"socketProgress: Connection closed by remote peer \" from vm pid 1856 "
            "(rank 0), vm pid 1858 (rank 2), first at 2026-12-07 10:31:11");
}

TEST(NcclLog, SocketsWhereInfiniBandWasFoundIsAFindingAndMissingLogsAreNamed) {
  const std::string text =
      "node1:100:100 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
      "node1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB "
      "ib0:10.0.0.1<0>\n"
      "node1:100:100 [0] NCCL INFO Using network Socket\n"
      "node1:100:100 [0] NCCL INFO ncclCommInitRankConfig comm 0x1 rank 3 nranks 8 cudaDev 3 "
      "nvmlDev 3 busId 9a000 commId 0xfeed - Init START\n"
      "garbage line\n"
      "[2026-12-07 10:00:00] node1:100:200 [0] proxy.cc:1 NCCL WARN Remote process exited or "
      "there was a network error\n";
  const NcclLog l = read_nccl_log(text, "x");
  EXPECT_TRUE(l.ib_devices);
  EXPECT_EQ(l.lines, 5u);
  ASSERT_EQ(l.comms.size(), 1u);
  EXPECT_FALSE(l.comms[0].init_complete);
  const std::vector<LogFinding> f = analyse_nccl_logs({l});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].text,
            "node1 pid 100 (rank 3) uses NCCL's socket transport though InfiniBand devices were "
            "found");
  EXPECT_NE(f[0].advice.find("NCCL_IB_DISABLE=1, NCCL_NET=Socket"), std::string::npos)
      << f[0].advice;
  EXPECT_NE(f[1].text.find("Remote process exited or there was a network error"),
            std::string::npos);
  EXPECT_EQ(f[2].text, "communicator 0xfeed (8 ranks): no log read for ranks 0-7 except 3");
  EXPECT_NE(f[2].advice.find("collect the logs of ranks 0-7 except 3 too"), std::string::npos)
      << f[2].advice;
  const std::string rendered = render_nccl_logs_text({l}, f);
  for (const LogFinding& x : f) {
    next_step::expect_next_step(x.advice, x.text);
    EXPECT_NE(rendered.find("  " + x.text + "\n    what to do: " + x.advice + "\n"),
              std::string::npos)
        << rendered;
  }
}

TEST(NcclLog, EachChannelConnectionsTransportIsCounted) {
  const std::vector<NcclLog> logs = fixture_logs("func");
  ASSERT_EQ(logs[0].transports.size(), 1u);
  EXPECT_EQ(logs[0].transports.begin()->first, "NET/Socket");
  EXPECT_EQ(logs[0].transports.begin()->second, 4u);  // channels 0 and 1, send and receive
  // The other transports as NCCL 2.28 names them.
  const NcclLog l = read_nccl_log(
      "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
      "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
      "h:1:1 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n"
      "h:1:1 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
      "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via \x1b[2J\n",
      "x.log");
  EXPECT_EQ(l.transports.size(), 3u);
  EXPECT_EQ(l.transports.at("P2P/CUMEM/read"), 2u);
  EXPECT_EQ(l.transports.at("SHM/direct/direct"), 1u);
  EXPECT_EQ(l.transports.at("NET/IB/GDRDMA"), 1u);
}
