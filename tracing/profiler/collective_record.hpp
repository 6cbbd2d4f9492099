// What commtool's NCCL profiler plugin records for each collective it sees: the algorithm,
// protocol and channel count NCCL actually used (kernel names have not said so since NCCL
// 2.19). One JSON object per line in the file named by COMMTOOL_PROFILER_OUT.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace commtool::nccl_profiler {

// Where the plugin writes; unset: it records nothing.
inline constexpr const char* kOutputEnv = "COMMTOOL_PROFILER_OUT";

struct CollectiveRecord {
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 0;
  uint64_t seq = 0;
  std::string func;
  uint64_t count = 0;
  std::string datatype;
  std::string algo;
  std::string proto;
  int channels = 0;
  int warps = 0;
  int64_t start_ns = 0;  // CLOCK_MONOTONIC, when NCCL started and stopped the event
  int64_t stop_ns = 0;
};

std::string to_json_line(const CollectiveRecord& r);  // no trailing newline
// nullopt for a line that is not a record (a torn last line after a crash, say).
std::optional<CollectiveRecord> parse_json_line(const std::string& line);

}  // namespace commtool::nccl_profiler
