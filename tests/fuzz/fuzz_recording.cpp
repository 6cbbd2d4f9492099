// A recording (`commtool record`), read as the hang monitor reads it while the job runs and as
// `commtool report` reads it after: record.json, then up to three processes' line files. The
// input is record.json's text and each file's, separated by NUL bytes (neither JSON nor a
// record line holds a raw NUL); an empty record.json part means there is none. Each file
// arrives in two halves, so that a poll sees lines cut anywhere; then the standing and the
// report are made from what was read, in every format.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fuzz_common.hpp"
#include "reports/record/record_report.hpp"
#include "tracing/record/recording.hpp"
#include "tracing/record/standing.hpp"

namespace fs = std::filesystem;
using namespace commtool::record;

namespace {

const fs::path& recording_dir() {
  return commtool::fuzz::scratch_dir("commtool-fuzz-recording");
}

void write(const fs::path& path, const std::string& content, std::ios::openmode mode) {
  std::ofstream out(path, std::ios::binary | mode);
  out << content;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts =
      commtool::fuzz::split_fields(commtool::fuzz::text_of(data, size), '\0', 4);
  const fs::path& dir = recording_dir();
  fs::remove_all(dir / "procs");
  fs::remove(dir / kRecordingMetaFile);
  fs::create_directories(dir / "procs");
  if (!parts[0].empty()) write(dir / kRecordingMetaFile, parts[0], std::ios::trunc);
  for (size_t i = 1; i < parts.size(); ++i) {
    write(dir / "procs" / ("p" + std::to_string(i) + ".jsonl"),
          parts[i].substr(0, parts[i].size() / 2), std::ios::trunc);
  }
  commtool::fuzz::expect_error_or_value([&] {
    RecordingReader live(dir, Retention::kStanding);
    live.poll();
    for (size_t i = 1; i < parts.size(); ++i) {
      write(dir / "procs" / ("p" + std::to_string(i) + ".jsonl"),
            parts[i].substr(parts[i].size() / 2), std::ios::app);
    }
    live.poll();
    render_standing_text(where_everyone_stands(live.recording(), StandingOptions{}));
  });
  commtool::fuzz::expect_error_or_value([&] {
    const Recording rec = load_recording(dir);
    const commtool::reports::RecordingReport report = commtool::reports::analyse_recording(rec);
    commtool::reports::render_recording_text(report);
    commtool::reports::recording_to_json(report).dump();
    commtool::reports::recording_to_chrome(rec).dump();
  });
  return 0;
}
