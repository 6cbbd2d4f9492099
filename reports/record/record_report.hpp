// `commtool report DIR` for a recording (`commtool record`): from what every process recorded
// to a verdict and the figures behind it. Pure: the same recording gives the same report on
// any machine.
//
// Clocks. Each process stamps host times with its host's CLOCK_MONOTONIC and kernel times
// with its GPU's %globaltimer. GPU times are mapped onto the host clock per process through
// the `seen` pairs: NCCL's proxy thread reports each kernel stamp some time after it happened,
// never before, so seen - gpu over-estimates the offset by that delay, and the smallest value
// over a window (kClockWindowNs of GPU time) is the closest bound; a mapped time is late by at
// most that window's smallest delay, and ClockFit::median_excess_us says how much larger the
// typical delay is. Host clocks go to wall-clock time through each process's proc line
// (CLOCK_REALTIME and CLOCK_MONOTONIC read together): across hosts that is as good as their
// time synchronisation (NTP: milliseconds; PTP: microseconds).
//
// Stragglers. Per communicator, each operation (same index on every rank) with a mapped GPU
// start on at least two ranks has a last rank to start, by its lag behind the first. A rank is
// named a straggler when it starts last, by more than the threshold, in at least half of those
// operations (at least kMinStragglerOps of them) and its median lag is above the threshold too.
// The threshold is what the clocks can tell apart: kStragglerLagUs on one host, kCrossHostLagUs
// when the communicator's ranks are on several hosts (wall clocks only agree that well).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "tracing/record/recording.hpp"
#include "tracing/record/standing.hpp"
#include "tracing/trace/trace_analysis.hpp"

namespace commtool::reports {

inline constexpr int64_t kClockWindowNs = 10'000'000'000;
inline constexpr double kStragglerLagUs = 100;
inline constexpr double kCrossHostLagUs = 2000;
inline constexpr int kMinStragglerOps = 4;

// One process's GPU clock on its host clock: the smallest seen - gpu per window of GPU time.
class GpuClockMap {
 public:
  explicit GpuClockMap(const record::ProcessRecord& p);
  // The host time of a GPU time, through its window's offset (the nearest window's when its
  // own has no pair); none when the process reported no pair at all.
  std::optional<int64_t> host_ns(int64_t gpu_ns) const;
  uint64_t pairs() const { return pairs_; }
  size_t windows() const { return offsets_.size(); }
  std::optional<double> median_excess_us() const { return median_excess_us_; }

 private:
  std::map<int64_t, int64_t> offsets_;  // window (gpu ns / kClockWindowNs) -> min(seen - gpu)
  uint64_t pairs_ = 0;
  std::optional<double> median_excess_us_;
};

struct ClockFit {
  std::string process;  // "node-a pid 100"
  uint64_t pairs = 0;   // kernel stamps with the host time they were seen at
  size_t windows = 0;
  std::optional<double> median_excess_us;  // typical delay beyond the window's smallest
  // record --cupti: operations matched to a CUPTI NCCL kernel, and the median of CUPTI's kernel
  // start minus the operation's mapped GPU start (two independent GPU-to-host mappings).
  uint64_t cupti_matched = 0;
  std::optional<double> cupti_lead_us;
};

// What the CUPTI layer of one process did (record --cupti).
struct CuptiStatus {
  std::string process;
  std::string state;  // "on", "off", "yielded", or "absent" (asked for, never started)
  std::string why;    // off: the reason; yielded: the library that asked for CUPTI
  std::optional<int64_t> yielded_wall_ns;
  uint64_t dropped = 0;
};

// One communicator, function and size: every rank's operations of it.
struct OpRow {
  uint64_t comm = 0;
  std::string comm_name;
  int nranks = 0;
  std::string func;
  uint64_t count = 0;
  std::string datatype;
  std::optional<uint64_t> bytes;  // nccl-tests' size (the larger buffer); none: unknown type
  int operations = 0;             // distinct operations (by index)
  int rank_operations = 0;        // end lines
  int unverified = 0;             // of those, ended without the kernel seen to finish
  // Times of the verified (complete) operations only: an unverified one's are partial.
  measure::Summary api_us;      // the application's NCCL call, host, every rank's
  measure::Summary enqueue_us;  // NCCL planning and launching it, host, every rank's
  measure::Summary gpu_us;      // first channel start to last stop, each op at its slowest rank
  std::optional<double> busbw_gbps;  // from gpu_us's median, nccl-tests' factor
  tracing::NcclChoice nccl;          // most common way first
  // record --cupti (record_split.hpp), over the verified rank operations matched to a kernel:
  int split_operations = 0;
  measure::Summary input_wait_us;    // NCCL's stream waiting for the input
  measure::Summary kernel_us;        // CUPTI's NCCL kernel
  measure::Summary exposed_wait_us;  // the job's streams waiting for the operation's end
};

struct RankRow {
  uint64_t comm = 0;
  int rank = 0;
  std::string process;
  int operations = 0;
  measure::Summary gpu_us;
  measure::Summary start_lag_us;  // GPU start behind the communicator's first rank, per op
  int last_to_start = 0;          // operations it started last, by more than the threshold
};

struct Straggler {
  uint64_t comm = 0;
  std::string comm_name;
  int rank = 0;
  std::string process;
  int last = 0;      // operations it started last, by more than the threshold
  int compared = 0;  // operations with a mapped GPU start on at least two ranks
  double median_lag_us = 0;
  double max_lag_us = 0;
  double threshold_us = 0;
  std::string advice;  // what to look at next on that rank's process
};

// kHang: the launcher saw a hang, or operations were in flight that could not finish; kFault: the
// cross-rank analysis found ranks that disagree or a rank missing, without a hang; kStraggler:
// none of those, and a rank starts late; kNoOperations: none of those, and no NCCL operation was
// recorded at all, so there is nothing to give an all-clear on. The cross-rank findings are
// Standing::verdict's.
enum class Verdict { kHang, kFault, kStraggler, kNone, kNoOperations };
const char* to_string(Verdict v);

struct RecordingReport {
  std::string dir;
  std::optional<record::RecordingMeta> meta;
  Verdict verdict = Verdict::kNone;
  // Where everyone stood when the launcher saw the hang, else when the job ended.
  record::Standing standing;
  std::vector<OpRow> ops;  // by communicator, function, size
  std::vector<RankRow> ranks;
  std::vector<Straggler> stragglers;
  std::vector<ClockFit> clocks;    // per process
  std::vector<CuptiStatus> cupti;  // per process with a CUPTI layer, or asked for one
  std::vector<std::string> warnings;
  uint64_t end_lines = 0;
  // The verdict's next step: the first cross-rank finding's, the first straggler's, or what to
  // check when nothing is wrong or nothing was recorded. Never empty.
  std::string advice;
};

RecordingReport analyse_recording(const record::Recording& rec);

std::string render_recording_text(const RecordingReport& r);
// {"schema_version": 1, "command": "report", "kind": "recording", ...}; null for unknowns.
nlohmann::json recording_to_json(const RecordingReport& r);
// Chrome/Perfetto trace: a process per recorded process, per rank a host track (api and
// enqueue slices) and a GPU track (kernel slices on the mapped clock), and with record --cupti
// a track of CUPTI's NCCL kernels and one of the stream waits that held a stream up; wall-clock
// time.
nlohmann::json recording_to_chrome(const record::Recording& rec);

}  // namespace commtool::reports
