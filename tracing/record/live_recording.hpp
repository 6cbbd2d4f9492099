// The recording as `commtool record` watches it while the job runs: a RecordingReader that keeps
// only what the hang view needs (bounded memory however long the job runs), answering the watch
// loop's questions (record_run.hpp's RecordHooks).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "tracing/record/record_run.hpp"
#include "tracing/record/recording.hpp"

namespace commtool::record {

class LiveRecording {
 public:
  // Watches nothing until attach(): run_recording names the directory once it has claimed it.
  LiveRecording() = default;
  explicit LiveRecording(const std::filesystem::path& dir) { attach(dir); }
  void attach(const std::filesystem::path& dir);

  // Reads what the processes wrote since the last call. A recording that turns out to be bad
  // input (a line the reader refuses) is the plugin's failure, not the job's: it is said once
  // on standard error and watching stops; the job runs on.
  void poll();
  uint64_t ended() const;      // operations ended, verified or not, over every process
  uint64_t in_flight() const;  // operations started and not ended
  // Where every rank stands (standing.hpp), with what /proc shows of the processes of this
  // host; `stuck` as RecordHooks::standing. Stuck while a process of the job is still there, NCCL's
  // RAS service is asked too (ras_client.hpp, 5 s at most; not when NCCL_RAS_ENABLE=0): its
  // answer is kept as DIR/ras-<n>.json and its findings follow the standing.
  std::string standing(bool stuck);
  // Once the job has ended: whether the cross-rank verdict over what the monitor kept (each
  // rank's latest kRecentEndedPerRank operations and those in flight) finds a fault, and its
  // text.
  std::optional<std::string> fault_at_end() const;
  std::string summary() const;

  // The hooks for run_recording; they refer to this object, which must outlive the run.
  RecordHooks hooks();

 private:
  // NCCL's RAS asked, its findings as text; its answer saved beside the recording.
  std::string ras_evidence();
  static constexpr std::chrono::milliseconds kRasTimeout{5000};

  RecordingReader reader_{{}, Retention::kStanding};
  bool attached_ = false;
  int ras_answers_ = 0;
  std::string broken_;  // why watching stopped, when it did
};

}  // namespace commtool::record
