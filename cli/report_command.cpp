// `commtool report PATH...`: a run saved by trace --save, a recording of commtool record, or what
// a job commtool did not launch left (Flight Recorder dumps, RAS answers, NCCL's logs), told
// apart by what is there; the analysis is the layers' (reports/record, tracing/crossrank).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/output_file.hpp"
#include "reports/record/artifacts_report.hpp"
#include "reports/record/record_report.hpp"
#include "tracing/crossrank/job_artifacts.hpp"
#include "tracing/record/recording.hpp"
#include "tracing/trace/record_io.hpp"

namespace commtool::cli {

namespace fs = std::filesystem;

namespace {

// Paths (a directory, the processes' files, dump names) need not be UTF-8; JSON text must be.
std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// A recording (commtool record) has record.json, written before the job starts, and procs/;
// a saved trace run has run.json.
bool is_recording(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path root(dir);
  // Asked so that a directory that cannot be searched says so, rather than "no run.json".
  return files::input_exists((root / record::kRecordingMetaFile).string()) ||
         (files::input_exists((root / "procs").string()) &&
          std::filesystem::is_directory(root / "procs", ec));
}

// A recording is reported whatever it shows; the exit status says what it showed: 5 for a hang,
// ranks that disagree or a rank missing, else 0; unreadable input is exit 2.
int report_recording(const GlobalOptions& global, const std::string& dir,
                     const std::string& trace_file) {
  const record::Recording rec = record::load_recording(dir);
  if (!trace_file.empty()) {
    files::write_atomically(trace_file, json_text(reports::recording_to_chrome(rec), -1),
                            "--trace");
  }
  const reports::RecordingReport report = reports::analyse_recording(rec);
  emit(global, global.json ? json_text(reports::recording_to_json(report), 2)
                           : reports::render_recording_text(report));
  // `commtool report DIR || alert`: a hang, ranks that disagree or a rank missing is exit 5.
  const bool fault =
      report.verdict == reports::Verdict::kHang || report.verdict == reports::Verdict::kFault;
  return fault ? static_cast<int>(ExitCode::kTimeout) : 0;
}

}  // namespace

Runner register_report(CLI::App& app, const GlobalOptions& global) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto trace_file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Re-analyse a run saved with commtool trace --save DIR, a recording of commtool record, or "
      "what a job commtool did not launch left (PyTorch Flight Recorder dumps, NCCL RAS "
      "answers); no GPU needed");
  cmd->add_option("path", *paths,
                  "The directory trace --save or record wrote; or Flight Recorder dumps and RAS "
                  "answers (ncclras -v, text or JSON) and NCCL logs, files and directories, any "
                  "mix (one job)")
      ->check(non_empty_path())
      ->required();
  cmd->add_option("--trace", *trace_file,
                  "Write a Chrome/Perfetto trace (JSON) to FILE (saved runs and recordings)")
      ->check(non_empty_path())
      ->type_name("FILE");
  return [&global, paths, trace_file] {
    if (!trace_file->empty()) files::check_writable(*trace_file, "--trace");
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const std::string& p : *paths)
      inputs.emplace_back("report", p);
    files::check_distinct({{"--output", global.output}, {"--trace", *trace_file}}, inputs);
    const std::string& first = paths->front();
    if (paths->size() == 1 && is_recording(first)) {
      return report_recording(global, first, *trace_file);
    }
    if (paths->size() == 1 && files::input_exists((fs::path(first) / "run.json").string())) {
      return report_run(global, tracing::load_run(first), *trace_file);
    }
    const crossrank::JobArtifacts artifacts = crossrank::find_job_artifacts(*paths);
    if (artifacts.empty()) {
      if (paths->size() == 1) return report_run(global, tracing::load_run(first), *trace_file);
      throw usage_error(fmt::format(
          "report {}: no saved run, recording, Flight Recorder dump or RAS answer there",
          excerpt(fmt::format("{}", fmt::join(*paths, " ")), 200)));
    }
    if (!trace_file->empty()) {
      throw usage_error("--trace: Flight Recorder dumps and RAS answers hold no timeline to write");
    }
    const reports::ArtifactsReport r = reports::report_job_artifacts(artifacts);
    emit(global, global.json ? json_text(r.doc, 2) : r.text);
    // A finding of the dumps or of RAS is exit 5, as a hang is for a recording.
    return r.fault ? static_cast<int>(ExitCode::kTimeout) : 0;
  };
}

}  // namespace commtool::cli
