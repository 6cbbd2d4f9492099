// commtool record [--save DIR] [--cupti] [--hang-timeout S [--kill-on-hang]] -- CMD ...: runs an
// unmodified job under commtool's NCCL profiler plugin (tracing/record/record_run), with --cupti
// also under its CUPTI layer (tracing/profiler/cupti_mode.cpp), and, while it
// runs, reads the recording with the reader and standing rules `commtool report DIR` uses
// (tracing/record/live_recording) to say where every rank stands when it stops making
// progress.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ctime>
#include <iostream>
#include <memory>

#include "build_info.hpp"
#include "cli/commands.hpp"
#include "probes/base/error.hpp"
#include "tracing/cupti/cupti_tracer.hpp"
#include "tracing/record/live_recording.hpp"
#include "tracing/record/record_run.hpp"
#include "tracing/trace/trace_plan.hpp"

namespace commtool::cli {

namespace {

struct RecordOptions {
  std::vector<std::string> command;
  std::string out_dir;
  double hang_timeout_s = 0;
  bool kill_on_hang = false;
  bool cupti = false;
};

// The CUPTI library the job's CUPTI layer loads, or empty, after a warning, when the layer
// cannot run in this job: the job is recorded with the plugin alone rather than not at all.
std::string cupti_for_job(const std::vector<std::string>& command) {
  if (std::string conflict = record::cupti_conflict(command, std::getenv("CUDA_INJECTION64_PATH"));
      !conflict.empty()) {
    std::cerr << printable_message(fmt::format(
        "commtool record: WARNING: --cupti is off for this job: {}, and CUPTI takes one client "
        "per process. Recording with the NCCL profiler plugin only.\n",
        conflict));
    return "";
  }
  try {
    return tracing::CuptiTracer::library_path();
  } catch (const Error& e) {
    std::cerr << printable_message(fmt::format(
        "commtool record: WARNING: --cupti is off for this job: {}. Recording with the NCCL "
        "profiler plugin only.\n",
        e.what()));
    return "";
  }
}

// commtool-record-<UTC date-time> here; run_recording numbers it (-2, -3 ...) when a recording
// of the same second is already there (a script that records job after job).
std::string default_out_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "commtool-record-%Y%m%d-%H%M%S", &utc);
  return stamp;
}

int run_record_command(const GlobalOptions& global, const RecordOptions& o, CLI::App& cmd,
                       bool hang_timeout_given) {
  if (global.json || !global.output.empty()) {
    throw usage_error(
        "record prints no report of its own (the job's output is the job's); analyse the "
        "recording with commtool report DIR, which takes --json and --output");
  }
  record::RecordRequest q;
  // The job's argv: what the positional took, then what CLI11 left over from the first
  // argument that is not ours on (prefix_command). CLI11 keeps the "--" that ended our options
  // first among the leftovers; a "--" after it is the job's.
  q.command = o.command;
  const std::vector<std::string> rest = cmd.remaining();
  q.command.insert(q.command.end(), rest.begin() + (!rest.empty() && rest[0] == "--" ? 1 : 0),
                   rest.end());
  q.out_dir = o.out_dir.empty() ? default_out_dir() : o.out_dir;
  q.number_out_dir = o.out_dir.empty();
  if (hang_timeout_given) q.hang_timeout_s = o.hang_timeout_s;
  q.kill_on_hang = o.kill_on_hang;
  q.plugin = tracing::find_profiler_plugin("/proc/self/exe");
  q.commtool_version = fmt::format("{} (git {})", build_info::kVersion, build_info::kGitCommit);
  if (o.cupti) q.cupti_library = cupti_for_job(q.command);

  record::LiveRecording live;
  const record::RecordOutcome outcome = record::run_recording(q, live.hooks());
  // The directory is the user's own word (--save) and may hold anything: escaped as every message.
  std::cerr << printable_message(fmt::format("commtool record: the job {} after {:.1f} s. {}\n",
                                             outcome.how_ended, outcome.wall_s, live.summary()));
  std::cerr << printable_message(
      fmt::format("commtool record: the recording is in {}; analyse it with: commtool report {}\n",
                  outcome.dir, outcome.dir));
  // A fault the ranks show is the exit status (5), whatever the job's: a job that hung was
  // probably killed, and one whose ranks disagreed may well have exited 0 with wrong results.
  const std::optional<std::string> fault = live.fault_at_end();
  // Said again last, unless the standing the job's end printed just above says it already.
  const bool just_said = live.in_flight() > 0 && !outcome.hang_detected;
  if (fault && !just_said) {
    std::cerr << "commtool record: at the end of the job:\n" << printable_message(*fault);
  }
  if (fault || outcome.hang_detected) {
    if (outcome.status != 0) {
      std::cerr << fmt::format("commtool record: exit status 5 (the job's was {})\n",
                               outcome.status);
    }
    return static_cast<int>(ExitCode::kTimeout);
  }
  return outcome.status;
}

}  // namespace

Runner register_record(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<RecordOptions>();
  CLI::App* cmd = app.add_subcommand(
      "record",
      "Run a job unchanged (torchrun, python, mpirun ...) and record every NCCL operation of "
      "every process it starts; name the rank that hangs. Give the command after --");
  cmd->prefix_command();  // everything from the first argument that is not ours is the job's
  cmd->add_option("command", o->command,
                  "The job and its arguments, after --, passed unchanged (the exit status is "
                  "the job's, or 5 for a hang, ranks that disagree or a rank missing)")
      ->type_name("-- CMD [ARG...]");
  cmd->add_option("--save", o->out_dir,
                  "Write the recording in DIR, for commtool report: new, or empty (default "
                  "commtool-record-<UTC date-time> here)")
      ->check(non_empty_path())
      ->type_name("DIR");
  cmd->add_flag("--cupti", o->cupti,
                "Also record each operation's GPU-side waits with CUPTI (injected through "
                "CUDA_INJECTION64_PATH): how long NCCL's stream waited for its input and the "
                "job's streams for NCCL. Off, with a warning, in a job already under a CUPTI "
                "tool; given up to a profiler the job starts itself (PyTorch's)");
  CLI::Option* hang = cmd->add_option("--hang-timeout", o->hang_timeout_s,
                                      "Say where every rank stands when no NCCL operation has "
                                      "completed for SEC seconds while some are in flight")
                          ->check(finite_number())
                          ->type_name("SEC");
  cmd->add_flag("--kill-on-hang", o->kill_on_hang,
                "Then end the job (SIGTERM to it and every process it started, SIGKILL 10 s "
                "later); without it the job is left running");
  return
      [&global, o, cmd, hang] { return run_record_command(global, *o, *cmd, hang->count() > 0); };
}

}  // namespace commtool::cli
