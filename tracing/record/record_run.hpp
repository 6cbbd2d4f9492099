// `commtool record -- CMD`: runs the user's job unchanged with commtool's NCCL profiler plugin
// in every process it starts, watches the recording grow, and says where every rank stands
// when the job stops making progress. The recording directory:
//
//   DIR/record.json                 what was run, when, by which commtool; how it ended
//                                   (written at the start, rewritten whole at a hang and at the
//                                   end)
//   DIR/procs/<host>-<pid>.jsonl    one file per process, written by the plugin
//                                   (tracing/profiler/record_line.hpp)
//   DIR/standing-<n>.txt            where every rank stood, at a hang or on SIGUSR1
//
// The job keeps commtool's terminal and streams; its exit status is commtool's (128 + signal
// when a signal ended it). Ctrl-C reaches the job from the terminal as it would without
// commtool; SIGINT and SIGQUIT that a process sends commtool are passed on to the job's own
// process; SIGUSR1 prints where every rank stands. SIGTERM or SIGHUP to commtool ends the job
// and every process below it (that signal, then SIGKILL 10 s later), as --kill-on-hang does:
// commtool is a child subreaper meanwhile, so a process whose parent died is still found. A
// job is otherwise killed only when the user asked for it (--kill-on-hang).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace commtool::record {

struct RecordRequest {
  std::vector<std::string> command;  // the job: argv
  std::string out_dir;               // must not exist, or be an empty directory
  // out_dir is a name to number: the recording goes into the first of out_dir, out_dir-2,
  // out_dir-3 ... that this run creates itself (the default directory's name, of the second).
  bool number_out_dir = false;
  std::optional<double> hang_timeout_s;  // no operation completed for this long: a hang
  bool kill_on_hang = false;             // then end the job (SIGTERM, then SIGKILL)
  std::string plugin;                    // the profiler plugin library, an absolute path
  std::string commtool_version;
  // --cupti: the plugin's CUPTI layer is injected too (CUDA_INJECTION64_PATH, and LD_PRELOAD for
  // its stand-ins that give CUPTI up to a later client), loading this CUPTI library. Empty: no
  // CUPTI layer.
  std::string cupti_library;
};

// What the loop asks of the growing recording. Kept as functions so that this layer does not
// depend on the analysis that answers them (reports/record).
struct RecordHooks {
  // The recording's directory, once this run has claimed it; called before any other hook.
  std::function<void(const std::string& dir)> attach;
  std::function<void()> poll;           // read what the processes have written since
  std::function<uint64_t()> completed;  // operations ended so far, over every process
  std::function<uint64_t()> in_flight;  // operations started and not yet ended
  // Where every rank stands, now; `stuck`: what is in flight will not finish by itself (a hang
  // was seen, or the job is over), so the verdict says who holds it.
  std::function<std::string(bool stuck)> standing;
  std::function<std::string()> summary;  // one paragraph for the end of the run
};

struct RecordOutcome {
  std::string dir;        // the recording's directory
  int status = 0;         // the job's, as a shell reports it
  std::string how_ended;  // "exited with status 0"
  bool hang_detected = false;
  bool killed_by_commtool = false;
  double wall_s = 0;
};

// Checks a request before anything is started: the command can be executed, the directory can
// be created, the timeout is a number of seconds. Throws BadValue / Error(kUsage).
void check_request(const RecordRequest& request);

// A recording's directory as run_recording claims it: `existed` when it was an empty directory
// before (it is then left as it was found if the job cannot start).
struct RecordingDir {
  std::string path;
  bool existed = false;
};

// Claims the directory (below), writes record.json, runs the job to its end and returns how it
// ended. Progress lines and the hang report go to standard error.
//
// The directory is claimed atomically, so that recordings started together never share one:
// the run that creates DIR/procs owns DIR (mkdir fails for all but one). With --save, a DIR that
// another run holds, or that holds anything else, is exit 2; the default name moves on to the
// next free number instead.
RecordOutcome run_recording(const RecordRequest& request, const RecordHooks& hooks);

// Why the CUPTI layer must not be injected into this job, or empty when it may: another tool
// already injects into CUDA (`injection`: the CUDA_INJECTION64_PATH commtool was started with),
// or the job's first word is a tool that does (Nsight Systems or Compute, compute-sanitizer,
// cuda-gdb), which would replace commtool's injection in the processes it starts.
std::string cupti_conflict(const std::vector<std::string>& command, const char* injection);

// The environment the job gets on top of commtool's own (`ld_preload`: the LD_PRELOAD
// commtool was started with, which the job keeps after commtool's library).
std::vector<std::pair<std::string, std::string>> record_environment(const RecordRequest& request,
                                                                    const char* ld_preload);

}  // namespace commtool::record
