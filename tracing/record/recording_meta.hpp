// record.json: what `commtool record` knows about the job it ran, beside the processes' own
// lines (procs/*.jsonl, tracing/profiler/record_line.hpp). The launcher writes it whole
// (temporary file, then rename) when the job starts, again when it sees a hang and once more
// when the job ends, so a reader finds one complete version of it at any time.
//
// Keys: schema_version (1), kind ("commtool-record"), commtool_version, host, command (the
// job's argv), started_at (ISO 8601 UTC), started_realtime_ns and started_monotonic_ns (the
// launcher host's CLOCK_REALTIME and CLOCK_MONOTONIC read together), hang_timeout_s (null: no
// hang detection), kill_on_hang, cupti, plugin (the profiler plugin's path), ended (null while
// the job runs, else {at, wall_s, exit_code, signal, killed_by_commtool}) and hang (null, or
// {detected_at, monotonic_ns, quiet_s} once the launcher saw one).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace commtool::record {

inline constexpr int kRecordingSchemaVersion = 1;
inline constexpr const char* kRecordingKind = "commtool-record";
inline constexpr const char* kRecordingMetaFile = "record.json";

struct RecordingEnd {
  std::string at;                // ISO 8601 UTC
  double wall_s = 0;             // from the start
  std::optional<int> exit_code;  // the command's exit status, when it exited
  std::optional<int> signal;     // the signal that ended it, when one did
  bool killed_by_commtool = false;
  bool operator==(const RecordingEnd&) const = default;
};

struct RecordingHang {
  std::string detected_at;   // ISO 8601 UTC
  int64_t monotonic_ns = 0;  // the launcher host's CLOCK_MONOTONIC at detection
  double quiet_s = 0;        // how long no operation had completed by then
  bool operator==(const RecordingHang&) const = default;
};

struct RecordingMeta {
  std::string commtool_version;
  std::string host;
  std::vector<std::string> command;
  std::string started_at;  // ISO 8601 UTC
  int64_t started_realtime_ns = 0;
  int64_t started_monotonic_ns = 0;
  std::optional<double> hang_timeout_s;  // none: the launcher did not watch for hangs
  bool kill_on_hang = false;
  bool cupti = false;
  std::string plugin;
  std::optional<RecordingEnd> ended;  // none while the job runs
  std::optional<RecordingHang> hang;
  bool operator==(const RecordingMeta&) const = default;
};

// A time of the launcher host's CLOCK_MONOTONIC (RecordingHang::monotonic_ns) as wall-clock ns
// since the epoch, through the pair of clock readings taken at the start.
int64_t launcher_wall_ns(const RecordingMeta& meta, int64_t monotonic_ns);

// The document, with schema_version and kind.
nlohmann::json to_json(const RecordingMeta& meta);

// From a parsed record.json. Throws usage_error naming the key: a missing key, a wrong type,
// another kind or schema version, a negative time. Text from the file is kept as written;
// renderers escape it.
RecordingMeta recording_meta_from_json(const nlohmann::json& j);

// DIR/record.json read (a regular file within files::kMaxInputBytes) and parsed. Throws
// usage_error naming the file and the key.
RecordingMeta read_recording_meta(const std::filesystem::path& dir);

}  // namespace commtool::record
