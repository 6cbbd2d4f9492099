#include "tracing/profiler/record_sink.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

namespace commtool::nccl_profiler {

namespace {

// Room past the buffer's size for the sink's own lines (proc, alive, drop), which must not be
// dropped: a reader needs the proc line, and the drop line is what tells it lines are missing.
constexpr size_t kOwnLinesReserve = 4096;

std::atomic<const void*> nccl_address{nullptr};

// NCCL does not tell a v5 plugin its version; the library that called init has it. Opening it
// again by name with RTLD_NOLOAD finds the copy already loaded (also a private one) and loads
// nothing new; a global lookup is the fallback.
std::string nccl_version_now() {
  using GetVersion = int (*)(int*);
  GetVersion get_version = nullptr;
  void* library = nullptr;
  Dl_info info{};
  if (const void* address = nccl_address.load();
      address != nullptr && dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
    library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (library != nullptr) {
      get_version = reinterpret_cast<GetVersion>(dlsym(library, "ncclGetVersion"));
    }
  }
  if (get_version == nullptr) {
    get_version = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
  }
  int code = 0;
  const bool known = get_version != nullptr && get_version(&code) == 0 && code > 0;
  if (library != nullptr) dlclose(library);  // drops the reference RTLD_NOLOAD took
  if (!known) return "";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." +
         std::to_string(code % 100);
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// false with errno set when the descriptor takes no more.
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void flush_at_exit() {
  RecordSink::instance().flush();
}

}  // namespace

RecordSink& RecordSink::instance() {
  static RecordSink* sink = new RecordSink();
  return *sink;
}

bool RecordSink::open(const std::string& dir) {
  std::lock_guard write_lock(write_mutex_);
  std::lock_guard buffer_lock(buffer_mutex_);
  const pid_t pid = getpid();
  // Every communicator of a process asks; the first answer stands, so a failure is said once.
  if (dir == dir_ && pid == pid_) return fd_ >= 0 && !failed_;
  if (fd_ >= 0) {
    // Another directory in the same process: only tests do that. The old file gets its lines.
    (void)write_all(fd_, pending_);
    ::close(fd_);
    fd_ = -1;
  }
  dir_ = dir;
  pid_ = pid;
  failed_ = true;  // until the file is open
  const std::string procs = dir + "/procs";
  const std::string host = host_name();
  const std::string path = procs + "/" + host + "-" + std::to_string(pid) + ".jsonl";
  if (::mkdir(procs.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "commtool record: cannot create %s: %s\n", procs.c_str(),
                 std::strerror(errno));
    return false;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "commtool record: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  fd_ = fd;
  failed_ = false;
  capacity_ = size_from_env(kRecordBufferBytesEnv, kRecordBufferBytes);
  pending_.clear();
  pending_.reserve(capacity_ + kOwnLinesReserve);
  writing_.reserve(capacity_ + kOwnLinesReserve);
  scratch_.reserve(kOwnLinesReserve);
  dropped_ = 0;
  const int64_t mono = monotonic_ns();
  add_own_line(ProcLine{kRecordFormatVersion, pid, host, clock_ns(CLOCK_REALTIME), mono,
                        nccl_version_now()});
  last_alive_ns_ = mono;
  static const bool exit_flush_registered = std::atexit(flush_at_exit) == 0;
  (void)exit_flush_registered;
  // Here, not in record mode's init: record --cupti opens the sink at cuInit, and a job may
  // fork (data loader workers) before any communicator exists. A child must not inherit the
  // parent's file and queued lines.
  static const bool fork_handlers_registered =
      pthread_atfork([] { instance().lock_for_fork(); }, [] { instance().unlock_in_parent(); },
                     [] { instance().reset_in_child(); }) == 0;
  (void)fork_handlers_registered;
  if (!writer_running_) start_writer();
  return true;
}

void RecordSink::add(const RecordLine& line) {
  std::lock_guard lock(buffer_mutex_);
  if (fd_ < 0 || failed_) return;
  scratch_.clear();
  append_line(scratch_, line);
  if (pending_.size() + scratch_.size() > capacity_) {
    if (dropped_ == 0) dropped_since_ns_ = monotonic_ns();
    ++dropped_;
    return;
  }
  pending_.append(scratch_);
}

void RecordSink::add_own_line(const RecordLine& line) {
  scratch_.clear();
  append_line(scratch_, line);
  pending_.append(scratch_);
}

void RecordSink::flush() {
  std::lock_guard write_lock(write_mutex_);
  {
    std::lock_guard buffer_lock(buffer_mutex_);
    if (fd_ < 0 || failed_) return;
    if (dropped_ > 0) {
      add_own_line(DropLine{dropped_, dropped_since_ns_, monotonic_ns()});
      dropped_ = 0;
    }
    pending_.swap(writing_);
  }
  if (writing_.empty()) return;
  if (!write_all(fd_, writing_)) {
    const int error = errno;
    std::lock_guard buffer_lock(buffer_mutex_);
    failed_ = true;
    std::fprintf(stderr, "commtool record: cannot write to %s/procs: %s\n", dir_.c_str(),
                 std::strerror(error));
  }
  writing_.clear();
}

void RecordSink::start_writer() {
  writer_running_ = true;
  std::thread([this] { writer_loop(); }).detach();
}

void RecordSink::writer_loop() {
  for (;;) {
    timespec period{0, kFlushPeriodNs};
    while (nanosleep(&period, &period) != 0 && errno == EINTR) {
    }
    {
      std::lock_guard lock(buffer_mutex_);
      const int64_t now = monotonic_ns();
      if (fd_ >= 0 && !failed_ && now - last_alive_ns_ >= kAlivePeriodNs) {
        add_own_line(AliveLine{now});
        last_alive_ns_ = now;
      }
    }
    flush();
  }
}

void RecordSink::lock_for_fork() {
  write_mutex_.lock();
  buffer_mutex_.lock();
}

void RecordSink::unlock_in_parent() {
  buffer_mutex_.unlock();
  write_mutex_.unlock();
}

void RecordSink::reset_in_child() {
  // The file and the queued lines are the parent's; the writer thread did not survive the fork.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  dir_.clear();
  pid_ = 0;
  pending_.clear();
  writing_.clear();
  dropped_ = 0;
  writer_running_ = false;
  failed_ = false;
  buffer_mutex_.unlock();
  write_mutex_.unlock();
}

std::string loaded_nccl_version() {
  return nccl_version_now();
}

void note_nccl_address(const void* address) {
  nccl_address.store(address);
}

}  // namespace commtool::nccl_profiler
