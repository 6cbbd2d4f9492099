// Reading a recording (`commtool record --save DIR`): DIR/record.json (recording_meta.hpp) and
// one DIR/procs/<host>-<pid>.jsonl per process of the job, which the profiler plugin appends
// lines to (tracing/profiler/record_line.hpp) while the job runs.
//
// RecordingReader reads incrementally: the launcher's hang monitor polls it while the job
// runs, keeping only what the standing view needs (Retention::kStanding: memory bounded
// whatever the job's length), and `commtool report` reads a finished recording whole
// (Retention::kAll, load_recording).
//
// A recording is input: a line parse_line refuses, a file that is not a regular file or is
// larger than files::kMaxInputBytes, a line longer than kMaxLineBytes, a first line that is not
// the process's proc line, an operation started twice or (kAll) ended twice, more than
// kMaxRecordedOperations end lines (kAll) is an error (exit 2) naming file:line. A line that is
// not JSON is legal only as the last line of a file once the job has ended (a process killed
// while it wrote): finish() leaves it out and says so in Recording::warnings.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/input_file.hpp"
#include "tracing/profiler/record_line.hpp"
#include "tracing/record/recording_meta.hpp"

namespace commtool::record {

// End lines Retention::kAll keeps, over all files: the report takes about 500 bytes per
// operation (measured: 104 MB for 200,000), so the limit bounds it to about 10 GB.
inline constexpr uint64_t kMaxRecordedOperations = 20'000'000;
// The longest line a reader accepts: a record line is a few hundred bytes, plus the names an
// application gives. A longer one is not a line the plugin wrote.
// The folder of a recording that holds one line file per process.
inline constexpr const char* kProcsDir = "procs";
inline constexpr size_t kMaxLineBytes = 64 * 1024;
// Operations one rank of one communicator may have started without an end line before the
// oldest are let go (RankRecord::forgotten): an end line lost to a drop must not grow the
// in-flight set for the rest of a long job.
inline constexpr size_t kMaxInFlightPerRank = 4096;
// End lines Retention::kStanding keeps per rank, the latest: what the cross-rank comparison of
// the hang monitor sees (a disagreement this many operations before a hang is still named).
inline constexpr size_t kRecentEndedPerRank = 256;
// CUPTI's work, wait and event lines Retention::kAll keeps, per end line it may keep: a few
// dozen bytes each, so they weigh less than the operations they describe.
inline constexpr uint64_t kCuptiLinesPerOperation = 16;

// What a reader accepts; the defaults are the limits above (tests lower them).
struct ReadLimits {
  uint64_t max_operations = kMaxRecordedOperations;  // Retention::kAll's end lines
  uint64_t max_file_bytes = files::kMaxInputBytes;
};

enum class Retention {
  kStanding,  // per rank: in-flight operations, counts, the last ended one (bounded memory)
  kAll,       // also every end line, for the report
};

// One rank of one communicator, as the process that holds it recorded it.
struct RankRecord {
  uint64_t comm = 0;
  int rank = 0;
  std::optional<nccl_profiler::CommLine> init;             // its comm line (none: lost to a drop)
  std::map<uint64_t, nccl_profiler::StartLine> in_flight;  // by index: started, not ended
  uint64_t started = 0;                                    // start lines
  uint64_t completed = 0;                                  // end lines with complete = true
  uint64_t unverified = 0;  // end lines with complete = false: ended, kernel not seen to finish
  uint64_t forgotten = 0;   // in-flight operations let go past kMaxInFlightPerRank
  std::optional<nccl_profiler::EndLine> last_ended;  // the ended operation of highest index
  std::optional<int64_t> fin_ns;                     // when it was finalised
  std::vector<nccl_profiler::EndLine> ops;           // Retention::kAll: every end line, by index
  std::deque<nccl_profiler::EndLine> recent;  // Retention::kStanding: the latest, as they came
};

// What the plugin's CUPTI layer wrote for one process (record --cupti).
struct CuptiActivity {
  std::vector<nccl_profiler::CuptiLine> states;  // every cupti line, in order (any retention)
  std::vector<nccl_profiler::WorkLine> work;     // Retention::kAll only, as written
  std::vector<nccl_profiler::WaitLine> waits;
  std::vector<nccl_profiler::EventLine> events;
};

// One process of the job: one procs/*.jsonl file.
struct ProcessRecord {
  std::string file;                             // the file's path
  std::optional<nccl_profiler::ProcLine> proc;  // none until its first line has arrived
  std::optional<int64_t> last_alive_ns;         // its latest heartbeat
  int64_t last_t_ns = 0;                        // the latest time any of its lines holds
  uint64_t dropped_lines = 0;                   // what its drop lines add up to
  std::optional<int64_t> first_drop_ns;         // since when it dropped lines
  std::vector<RankRecord> ranks;                // in the order they first appeared
  CuptiActivity cupti;
  uint64_t lines = 0;  // complete lines read

  // A host time of this process (CLOCK_MONOTONIC ns) as wall-clock ns since the epoch, through
  // its proc line's pair of clock readings; the time as it is when there is no proc line.
  int64_t wall_ns(int64_t host_ns) const;
};

struct Recording {
  std::filesystem::path dir;
  std::optional<RecordingMeta> meta;     // record.json, when there is one
  std::vector<ProcessRecord> processes;  // in the order their files were found (by name)
  std::vector<std::string> warnings;     // what reading left out, file:line first
  uint64_t end_lines = 0;
  uint64_t cupti_lines = 0;  // work, wait and event lines (Retention::kAll)
};

class RecordingReader {
 public:
  // Reads nothing yet: poll() does. `dir` need not hold procs/ yet (the job may not have
  // started a process).
  RecordingReader(std::filesystem::path dir, Retention retention, ReadLimits limits = {});
  ~RecordingReader();
  RecordingReader(RecordingReader&&) noexcept;
  RecordingReader& operator=(RecordingReader&&) noexcept;

  // Reads what was appended to every procs/*.jsonl since the last poll, new files included; a
  // last line without its line end yet is kept until the rest arrives. Returns the number of
  // end lines read. Throws Error (exit 2) naming file:line for bad input (see above).
  uint64_t poll();

  // The job has ended: a last line still without its line end is parsed if it is a whole
  // record, else left out with a warning naming file:line. Then (kAll) every rank's
  // operations are ordered by index, and an operation ended twice is refused. Call once,
  // after a last poll().
  void finish();

  const Recording& recording() const { return recording_; }
  Recording take() { return std::move(recording_); }

 private:
  struct File;
  void read_file(File& f);
  void consume(File& f, std::string_view line);

  Retention retention_;
  ReadLimits limits_;
  Recording recording_;
  std::vector<std::unique_ptr<File>> files_;
};

// The recording in `dir` read whole (Retention::kAll), record.json included when present.
// Throws Error (exit 2): `dir` is not a directory, record.json or a line is bad.
Recording load_recording(const std::filesystem::path& dir, ReadLimits limits = {});

}  // namespace commtool::record
