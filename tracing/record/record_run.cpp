#include "tracing/record/record_run.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>

#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"
#include "probes/base/progress_line.hpp"
#include "probes/base/workers/signal_trap.hpp"
#include "tracing/profiler/plugin_support.hpp"
#include "tracing/profiler/record_line.hpp"
#include "tracing/record/job.hpp"
#include "tracing/record/recording.hpp"
#include "tracing/record/recording_meta.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::record {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kTick = 100ms;     // how often the recording is read
constexpr auto kKillGrace = 10s;  // SIGTERM to SIGKILL, for --kill-on-hang
constexpr double kMaxHangTimeoutS = 7 * 86400.0;

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// record.json (recording_meta.hpp), rewritten whole at every change.
class Meta {
 public:
  Meta(const RecordRequest& q, std::string path) : path_(std::move(path)) {
    m_.commtool_version = q.commtool_version;
    m_.host = host_name();
    m_.command = q.command;
    m_.started_at = tracing::utc_now_iso8601();
    m_.started_realtime_ns = nccl_profiler::clock_ns(CLOCK_REALTIME);
    m_.started_monotonic_ns = nccl_profiler::clock_ns(CLOCK_MONOTONIC);
    m_.hang_timeout_s = q.hang_timeout_s;
    m_.kill_on_hang = q.kill_on_hang;
    m_.plugin = q.plugin;
    m_.cupti = !q.cupti_library.empty();
    write();
  }
  void hang(double quiet_s) {
    m_.hang = RecordingHang{tracing::utc_now_iso8601(), nccl_profiler::clock_ns(CLOCK_MONOTONIC),
                            quiet_s};
    write();
  }
  void resumed() {
    m_.hang.reset();
    write();
  }
  void ended(const Job& job, const RecordOutcome& o) {
    m_.ended = RecordingEnd{tracing::utc_now_iso8601(), o.wall_s, job.exit_code(),
                            job.signal_number(), o.killed_by_commtool};
    write();
  }

 private:
  void write() {
    files::write_atomically(path_, to_json(m_).dump(2) + "\n", "recording's record.json");
  }
  std::string path_;
  RecordingMeta m_;
};

// Prints where every rank stands and keeps a copy in the recording.
void report_standing(const RecordRequest& q, const RecordHooks& hooks, int& snapshots,
                     const std::string& why, bool stuck) {
  hooks.poll();
  const std::string text = hooks.standing(stuck);
  const std::string file = fmt::format("{}/standing-{}.txt", q.out_dir, ++snapshots);
  // The table is commtool's own rendering; what may be anyone's word (the --save path) is escaped.
  std::cerr << "commtool record: " << printable_message(why) << "\n"
            << text << "(saved in " << printable_message(file) << ")\n";
  try {
    files::write_atomically(file, why + "\n" + text, "standing report");
  } catch (const Error& e) {
    std::cerr << "commtool record: " << printable_message(e.what()) << "\n";
  }
}

// How many numbered names a default recording directory tries: a script that records job after
// job within one second, or many `record` runs started together in one directory.
constexpr int kMaxNumberedNames = 10000;

// Makes dir; 0, or the errno of the failure (EEXIST when anything is there).
int make_one_directory(const std::string& dir) {
  return ::mkdir(dir.c_str(), 0777) == 0 ? 0 : errno;
}

Error claim_error(const std::string& dir, const std::string& what, int err) {
  return usage_error(fmt::format("--save {}: {}: {}", excerpt(dir), what, std::strerror(err)));
}

// The directory is this run's once it made DIR/procs: mkdir is atomic, so of any number of
// runs naming one directory exactly one makes it. A directory that was there before must hold
// nothing else, and is left as it was found when it does.
RecordingDir claim_named(const std::string& dir) {
  RecordingDir out{dir, false};
  if (int err = make_one_directory(dir); err == EEXIST) {
    out.existed = true;
    // mkdir does not follow a final symlink; making procs/ inside would. Checked again here, as
    // the link may have been planted since check_request().
    files::refuse_planted_links(dir, "--save");
  } else if (err != 0) {
    throw claim_error(dir, "cannot create the directory", err);
  }
  const std::string procs = (fs::path(dir) / kProcsDir).string();
  if (int err = make_one_directory(procs); err != 0) {
    if (err == EEXIST || err == ENOTDIR) {
      throw usage_error(fmt::format(
          "--save {}: {}; a recording needs a directory of its own (name a new one)", excerpt(dir),
          err == EEXIST ? "already holds a recording (or another record run is writing it)"
                        : "exists and is not a directory"));
    }
    throw claim_error(dir, "cannot create procs/ in it", err);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename() == kProcsDir) continue;
    ::rmdir(procs.c_str());
    throw usage_error(fmt::format(
        "--save {}: exists and is not an empty directory ({} is in it); a recording needs a "
        "directory of its own (name a new one)",
        excerpt(dir), excerpt(entry.path().filename().string())));
  }
  return out;
}

// The first of stem, stem-2, stem-3 ... that this run creates itself.
RecordingDir claim_numbered(const std::string& stem) {
  for (int n = 1; n <= kMaxNumberedNames; ++n) {
    const std::string dir = n == 1 ? stem : fmt::format("{}-{}", stem, n);
    if (int err = make_one_directory(dir); err == EEXIST) {
      continue;
    } else if (err != 0) {
      throw claim_error(dir, "cannot create the directory", err);
    }
    if (int err = make_one_directory((fs::path(dir) / kProcsDir).string()); err != 0) {
      ::rmdir(dir.c_str());
      throw claim_error(dir, "cannot create procs/ in it", err);
    }
    return {dir, false};
  }
  throw usage_error(
      fmt::format("{} and {} numbered names after it are all taken; name a "
                  "directory with --save",
                  excerpt(stem), kMaxNumberedNames - 1));
}

}  // namespace

void check_request(const RecordRequest& q) {
  if (q.command.empty()) {
    throw usage_error("record: no command to run; give it after --: commtool record -- CMD ...");
  }
  if (!find_executable(q.command[0])) {
    throw usage_error(fmt::format("record: command {}: not found in PATH or not executable",
                                  excerpt(q.command[0])));
  }
  if (q.hang_timeout_s) {
    const double s = *q.hang_timeout_s;
    if (!std::isfinite(s) || s < 0.1 || s > kMaxHangTimeoutS) {
      throw bad_value("hang_timeout_s", fmt::format("{}", s),
                      fmt::format("seconds from 0.1 to {:.0f} (a week)", kMaxHangTimeoutS));
    }
  }
  if (q.kill_on_hang && !q.hang_timeout_s) {
    throw usage_error("--kill-on-hang needs --hang-timeout: it says when the job counts as hung");
  }
  if (q.out_dir.empty()) throw usage_error("--save: an empty name; give a directory");
  files::check_name_length(q.out_dir, "--save");
  if (q.number_out_dir) files::check_name_length(q.out_dir + "-10000", "--save");
  files::refuse_planted_links(q.out_dir, "--save");
  // Said here, before anything is started; claim_named() decides it for good, atomically.
  std::error_code ec;
  const fs::path dir(q.out_dir);
  if (!q.number_out_dir && fs::exists(fs::symlink_status(dir, ec))) {
    if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec)) {
      throw usage_error(fmt::format(
          "--save {}: exists and is not an empty directory; a recording needs a directory of its "
          "own (name a new one)",
          excerpt(q.out_dir)));
    }
  } else {
    const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
    if (!fs::is_directory(parent, ec) || ::access(parent.c_str(), W_OK | X_OK) != 0) {
      throw usage_error(fmt::format("--save {}: cannot be created: {} is not a writable directory",
                                    excerpt(q.out_dir), excerpt(parent.string())));
    }
  }
  if (q.plugin.empty() || !fs::is_regular_file(q.plugin, ec)) {
    throw Error(
        ExitCode::kEnvironment,
        fmt::format("record: commtool's NCCL profiler plugin {} is missing; install it "
                    "beside commtool (lib/commtool/) or name it in "
                    "COMMTOOL_PROFILER_PLUGIN",
                    q.plugin.empty() ? "(libcommtool_nccl_profiler.so)" : excerpt(q.plugin)));
  }
}

std::string cupti_conflict(const std::vector<std::string>& command, const char* injection) {
  if (injection != nullptr && *injection != '\0') {
    return fmt::format("CUDA_INJECTION64_PATH={} is set: another tool injects into CUDA",
                       excerpt(injection));
  }
  if (command.empty()) return "";
  const std::string word = fs::path(command[0]).filename().string();
  for (const char* tool : {"nsys", "ncu", "compute-sanitizer", "cuda-gdb", "nsight-sys"}) {
    if (word == tool) {
      return fmt::format("the job runs under {}, which injects its own CUPTI client", tool);
    }
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> record_environment(const RecordRequest& q,
                                                                    const char* ld_preload) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"NCCL_PROFILER_PLUGIN", q.plugin},
      {nccl_profiler::kRecordDirEnv, fs::absolute(q.out_dir).string()}};
  if (!q.cupti_library.empty()) {
    env.emplace_back("CUDA_INJECTION64_PATH", q.plugin);
    env.emplace_back(nccl_profiler::kCuptiLibraryEnv, q.cupti_library);
    // Preloaded so that its stand-ins for cuptiSubscribe come before CUPTI's (cupti_mode.cpp).
    const bool theirs = ld_preload != nullptr && *ld_preload != '\0';
    env.emplace_back("LD_PRELOAD", theirs ? q.plugin + ":" + ld_preload : q.plugin);
  }
  return env;
}

RecordOutcome run_recording(const RecordRequest& q, const RecordHooks& hooks) {
  check_request(q);
  if (const char* theirs = std::getenv("NCCL_PROFILER_PLUGIN"); theirs && *theirs) {
    std::cerr << "commtool record: NCCL_PROFILER_PLUGIN=" << excerpt(theirs)
              << " is replaced by commtool's plugin for this run (NCCL loads one)\n";
  }
  // Trapped before anything is created, so that none is lost and a SIGUSR1 sent as soon as
  // record.json appears finds its handler; handlers (unlike SIG_IGN) do not pass to the job
  // through exec.
  workers::SignalTrap trap({SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1});
  const AdoptOrphans adopt;
  const RecordingDir dir = q.number_out_dir ? claim_numbered(q.out_dir) : claim_named(q.out_dir);
  RecordRequest claimed = q;
  claimed.out_dir = dir.path;
  const std::string meta_path = (fs::path(dir.path) / kRecordingMetaFile).string();
  Job job;
  std::optional<Meta> meta;
  try {
    meta.emplace(claimed, meta_path);
    if (hooks.attach) hooks.attach(dir.path);
    job = Job::start(q.command, record_environment(claimed, std::getenv("LD_PRELOAD")));
  } catch (...) {
    std::error_code ec;
    if (dir.existed) {
      fs::remove(meta_path, ec);
      fs::remove(fs::path(dir.path) / kProcsDir, ec);
    } else {
      fs::remove_all(dir.path, ec);
    }
    throw;
  }
  const auto started = Clock::now();

  RecordOutcome out;
  out.dir = dir.path;
  int snapshots = 0;
  uint64_t completed = 0;
  auto last_progress = Clock::now();
  // From a hang on, a line that says how long the job has been stuck and what happens next:
  // the job is quiet then, so the line does not mix with its output.
  std::optional<progress::Line> hung_line;
  Clock::time_point killed_at{};
  while (!job.poll_exit()) {
    pollfd p{trap.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(kTick.count()));
    for (auto c = trap.take_caught(); c.sig != 0; c = trap.take_caught()) {
      if (c.sig == SIGUSR1) {
        report_standing(claimed, hooks, snapshots, "SIGUSR1: where every rank stands",
                        out.hang_detected);
      } else if (c.sig == SIGTERM || c.sig == SIGHUP) {
        // commtool is being stopped (a kill, a scheduler's cancel, a closed terminal): the job
        // goes with it, its whole tree, or its workers would hold their GPUs with no parent.
        const char* name = c.sig == SIGTERM ? "SIGTERM" : "SIGHUP";
        std::cerr << fmt::format(
            "commtool record: {}: ending the job and every process it started ({} to each, "
            "SIGKILL after {} s)\n",
            name, name, kKillGrace.count());
        job.terminate_tree(kKillGrace, c.sig);
        out.killed_by_commtool = true;
        killed_at = Clock::now();
      } else if (c.sent_by_process) {
        job.signal(c.sig);  // SIGINT, SIGQUIT from kill(1): passed on, as Ctrl-C would reach it
      }
      // From the terminal, SIGINT and SIGQUIT reach the job as well: its group is commtool's.
    }
    adopt.reap(job.pid());
    hooks.poll();
    const uint64_t now_completed = hooks.completed();
    if (now_completed != completed) {
      completed = now_completed;
      last_progress = Clock::now();
      if (out.hang_detected && !out.killed_by_commtool) {
        // A slow phase, not a hang after all: say so, and watch for the next one.
        std::cerr << "commtool record: operations complete again; the job was not hung\n";
        out.hang_detected = false;
        hung_line.reset();
        meta->resumed();
      }
    }
    if (hung_line) {
      const auto stuck = std::chrono::duration<double>(Clock::now() - last_progress).count();
      const auto killed = std::chrono::duration<double>(Clock::now() - killed_at).count();
      const auto grace = std::chrono::duration<double>(kKillGrace).count();
      hung_line->update(0, 0,
                        out.killed_by_commtool
                            ? fmt::format("hung for {:.0f} s; ending the job (SIGKILL in {:.0f} s)",
                                          stuck, std::max(0.0, grace - killed))
                            : fmt::format("hung for {:.0f} s; the job is left running (Ctrl-C "
                                          "ends it)",
                                          stuck));
    }
    if (q.hang_timeout_s && !out.hang_detected && hooks.in_flight() > 0) {
      const double quiet = std::chrono::duration<double>(Clock::now() - last_progress).count();
      if (quiet >= *q.hang_timeout_s) {
        out.hang_detected = true;
        meta->hang(quiet);
        report_standing(claimed, hooks, snapshots,
                        fmt::format("no NCCL operation has completed for {:.1f} s with {} in "
                                    "flight: the job looks hung",
                                    quiet, hooks.in_flight()),
                        true);
        hung_line.emplace();
        if (q.kill_on_hang) {
          std::cerr << "commtool record: --kill-on-hang: ending the job (SIGTERM, then SIGKILL "
                       "after "
                    << kKillGrace.count() << " s)\n";
          job.terminate_tree(kKillGrace);
          out.killed_by_commtool = true;
          killed_at = Clock::now();
        } else {
          std::cerr << "commtool record: the job is left running (end it yourself, or use "
                       "--kill-on-hang next time)\n";
        }
      }
    }
  }
  // The processes flushed their files when they exited; take in the last lines.
  hooks.poll();
  out.status = job.shell_status();
  out.how_ended = job.describe_exit();
  out.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
  meta->ended(job, out);
  if (hooks.in_flight() > 0 && !out.hang_detected) {
    report_standing(claimed, hooks, snapshots,
                    fmt::format("the job ended with {} operation(s) started and never completed",
                                hooks.in_flight()),
                    true);
  }
  return out;
}

}  // namespace commtool::record
