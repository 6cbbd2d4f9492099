// Where record mode's lines go: one file per process, <record dir>/procs/<host>-<pid>.jsonl,
// fed from a bounded buffer by a writer thread. NCCL's threads only append to the buffer; the
// writer thread empties it every 100 ms with one write(2), so a job killed with SIGKILL loses
// at most its last 100 ms, and writes an `alive` line once a second. Lines that do not fit the
// buffer are counted and reported by a later `drop` line.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "tracing/profiler/plugin_support.hpp"
#include "tracing/profiler/record_line.hpp"

namespace commtool::nccl_profiler {

// Tests only: the buffer's size in bytes instead of 8 MiB, read whenever a file is opened.
inline constexpr const char* kRecordBufferBytesEnv = "COMMTOOL_RECORD_BUFFER_BYTES";
inline constexpr size_t kRecordBufferBytes = 8u << 20;
inline constexpr int64_t kFlushPeriodNs = 100'000'000;
inline constexpr int64_t kAlivePeriodNs = 1'000'000'000;

// An address inside the NCCL library that loaded the plugin (where its init was called from):
// the proc line's NCCL version is asked of that library. PyTorch loads its own NCCL privately
// (RTLD_LOCAL), where a global symbol lookup does not find it.
void note_nccl_address(const void* address);

// The version of that NCCL ("2.28.9"), or empty when it cannot be asked. A process whose sink
// was opened before NCCL's init (record --cupti opens it at cuInit) has an empty version in its
// proc line; its comm lines carry it.
std::string loaded_nccl_version();

class RecordSink {
 public:
  // The process's sink; never destroyed, since its writer thread outlives static destruction.
  static RecordSink& instance();

  // Makes <dir>/procs/<host>-<pid>.jsonl this process's file, unless it already is, and queues
  // its proc line. false, after one line on stderr, when the file cannot be opened.
  bool open(const std::string& dir);
  // Queues one line; counts it as dropped if the buffer is full. A no-op with no file open.
  void add(const RecordLine& line);
  // Writes everything queued, now (the last communicator's finalize, process exit).
  void flush();

  // pthread_atfork's three steps, registered by the first open(): the child starts with no
  // file, an empty buffer and no writer thread; should it use NCCL itself, it opens its own
  // file (its own pid).
  void lock_for_fork();
  void unlock_in_parent();
  void reset_in_child();

 private:
  RecordSink() = default;
  void start_writer();
  void writer_loop();
  // Appends `line` even past the buffer's size: for the writer's own small alive and drop
  // lines, which the buffer's reserve has room for. Needs buffer_mutex_.
  void add_own_line(const RecordLine& line);

  // Lock order: write_mutex_, then buffer_mutex_.
  std::mutex write_mutex_;   // one writer of the file at a time; guards writing_ and fd_
  std::mutex buffer_mutex_;  // guards everything else
  int fd_ = -1;
  std::string dir_;
  pid_t pid_ = 0;  // the process that opened fd_
  std::string pending_;
  std::string writing_;
  std::string scratch_;
  size_t capacity_ = kRecordBufferBytes;
  uint64_t dropped_ = 0;
  int64_t dropped_since_ns_ = 0;
  int64_t last_alive_ns_ = 0;
  bool writer_running_ = false;
  bool failed_ = false;  // a write failed: record nothing further
};

}  // namespace commtool::nccl_profiler
