// NCCL's own logs (NCCL_DEBUG=INFO or WARN, one file per process with NCCL_DEBUG_FILE=...%h.%p),
// as `commtool report` reads them beside a job's other artifacts: who each process was (host,
// pid, NCCL's version), the communicators it joined (commId, rank, size, GPU bus id, whether its
// init completed), the network NCCL chose, and its warnings. Lines look like
//   [2026-12-07 10:32:14] vm:1856:1932 [0] misc/socket.cc:72 NCCL WARN socketProgress: ...
//   vm:1857:1857 [0] NCCL INFO ncclCommInitRankConfig comm 0x2b57d040 rank 1 nranks 3 cudaDev 0
//       nvmlDev 0 busId 60 commId 0x93ec23942d4380df - Init START
// (the time in brackets only on some lines); other lines are ignored, a line over kMaxLogLine is
// cut. A log is context, not a verdict: its findings (warnings, grouped by their text; the
// socket transport chosen where InfiniBand devices were found; ranks of a communicator with no
// log) are printed, never an exit status of their own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::crossrank {

inline constexpr size_t kMaxLogLine = 4096;
inline constexpr size_t kMaxTransports = 64;  // distinct transport names kept per log

struct LogComm {
  std::string comm_id;  // "0x93ec23942d4380df"
  int rank = -1;
  int nranks = 0;
  std::string bus_id;
  bool init_complete = false;
};

struct LogWarning {
  std::string when;  // "2026-12-07 10:32:14" where the line has it
  std::string text;  // after "NCCL WARN "
};

struct NcclLog {
  std::string file;
  std::string host;
  int64_t pid = 0;
  std::string version;      // "2.28.9+cuda13.0"
  std::string network;      // "Socket", "IB", ... ("Using network X")
  bool ib_devices = false;  // NET/IB found devices ("NET/IB : Using [0]mlx5_0...")
  std::vector<LogComm> comms;
  std::vector<LogWarning> warnings;
  // The transport of each channel connection ("Channel 00/0 : 0[0] -> 1[0] [send] via
  // NET/Socket/0"), by its name without the numbers ("NET/Socket", "P2P/CUMEM/read",
  // "SHM/direct/direct", "NET/IB/GDRDMA"), counted.
  std::map<std::string, uint64_t> transports;
  uint64_t lines = 0;  // NCCL lines read
};

// Whether a file's first bytes hold NCCL log lines.
bool looks_like_nccl_log(std::string_view head);

NcclLog read_nccl_log(std::string_view text, const std::string& file);

// A finding over the logs, and what to do next about it (never empty).
struct LogFinding {
  std::string text;
  std::string advice;
};

// The findings over every process's log, most telling first (one line each).
std::vector<LogFinding> analyse_nccl_logs(const std::vector<NcclLog>& logs);

std::string render_nccl_logs_text(const std::vector<NcclLog>& logs,
                                  const std::vector<LogFinding>& findings);

}  // namespace commtool::crossrank
