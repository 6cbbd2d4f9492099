#include "probes/base/workers/progress_board.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>

#include "probes/base/error.hpp"

namespace commtool::workers {

namespace {

constexpr int kNameWords = 4;  // names up to 31 characters, packed into atomic words
constexpr int kStepWords = 6;  // a step's words, up to 47 characters
constexpr int64_t kWriting = -2;

}  // namespace

// The shared layout. Every field is a lock-free atomic, so two processes may touch it at once.
struct SharedOperation {
  std::atomic<int64_t> seq;  // kWriting while the fields change; the operation's seq once set
  std::atomic<uint64_t> count;
  std::atomic<uint64_t> name[kNameWords];
};

struct alignas(64) Slot {
  std::atomic<uint32_t> phase;
  std::atomic<int64_t> enqueued;
  std::atomic<int64_t> started;
  std::atomic<int64_t> completed;
  std::atomic<int64_t> busy_since_ns;
  // The task's own steps, for the progress line: seq-locked like an operation (odd while the
  // words change).
  std::atomic<uint64_t> step_seq;
  std::atomic<uint32_t> step_done;
  std::atomic<uint32_t> step_total;
  std::atomic<uint64_t> step_what[kStepWords];
  SharedOperation recent[kRecentOperations];
};

static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the progress board is shared between processes: its atomics must be lock-free");

int64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string to_string(Phase p) {
  switch (p) {
    case Phase::kStarting:
      return "starting";
    case Phase::kJoining:
      return "joining the communicator";
    case Phase::kRunning:
      return "running";
    case Phase::kLeaving:
      return "leaving the communicator";
  }
  return "?";
}

namespace {

size_t board_bytes(int size) {
  return sizeof(Slot) * static_cast<size_t>(std::max(size, 1));
}

void* map_file(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

// ---- worker side ----

Progress::Progress(const std::string& path, int rank, int size) {
  if (path.empty() || rank < 0 || rank >= size) return;
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  const size_t bytes = board_bytes(size);
  if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= bytes) {
    map_ = map_file(fd, bytes);
    bytes_ = bytes;
  }
  ::close(fd);
  if (map_ != nullptr) slot_ = static_cast<Slot*>(map_) + rank;
}

Progress::~Progress() {
  if (map_ != nullptr) ::munmap(map_, bytes_);
}

void Progress::phase(Phase p) {
  if (slot_) slot_->phase.store(static_cast<uint32_t>(p), std::memory_order_release);
}

void Progress::busy() {
  if (slot_) slot_->busy_since_ns.store(monotonic_now_ns(), std::memory_order_release);
}

void Progress::idle() {
  if (slot_) slot_->busy_since_ns.store(0, std::memory_order_release);
}

void Progress::enqueued(int64_t seq, const std::string& name, uint64_t count) {
  if (!slot_) return;
  SharedOperation& e = slot_->recent[static_cast<size_t>(seq) % kRecentOperations];
  e.seq.store(kWriting, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.count.store(count, std::memory_order_relaxed);
  char packed[kNameWords * 8] = {};
  std::memcpy(packed, name.data(), std::min(name.size(), sizeof packed - 1));
  for (int w = 0; w < kNameWords; ++w) {
    uint64_t word = 0;
    std::memcpy(&word, packed + 8 * w, 8);
    e.name[w].store(word, std::memory_order_relaxed);
  }
  e.seq.store(seq, std::memory_order_release);
  slot_->enqueued.store(seq, std::memory_order_release);
}

void Progress::step(int done, int total, std::string_view what) {
  if (!slot_) return;
  const uint64_t seq = slot_->step_seq.load(std::memory_order_relaxed);
  slot_->step_seq.store(seq + 1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  slot_->step_done.store(static_cast<uint32_t>(std::max(done, 0)), std::memory_order_relaxed);
  slot_->step_total.store(static_cast<uint32_t>(std::max(total, 0)), std::memory_order_relaxed);
  char packed[kStepWords * 8] = {};
  std::memcpy(packed, what.data(), std::min(what.size(), sizeof packed - 1));
  for (int w = 0; w < kStepWords; ++w) {
    uint64_t word = 0;
    std::memcpy(&word, packed + 8 * w, 8);
    slot_->step_what[w].store(word, std::memory_order_relaxed);
  }
  slot_->step_seq.store(seq + 2, std::memory_order_release);
}

void Progress::started(int64_t seq) {
  if (slot_) slot_->started.store(seq, std::memory_order_release);
}

void Progress::completed(int64_t seq) {
  if (slot_) slot_->completed.store(seq, std::memory_order_release);
}

Progress& progress_or_none(Progress* progress) {
  static Progress none;  // no slot: every call is a no-op, so sharing it is safe
  return progress != nullptr ? *progress : none;
}

// ---- launcher side ----

ProgressBoard::ProgressBoard(std::string path, int size)
    : path_(std::move(path)), size_(size), bytes_(board_bytes(size)) {
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes_)) != 0 ||
      (map_ = map_file(fd, bytes_)) == nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(path_.c_str());
    throw Error(
        ExitCode::kEnvironment,
        fmt::format("cannot create the worker progress board {}: {}", path_, std::strerror(err)));
  }
  ::close(fd);
  Slot* slots = new (map_) Slot[static_cast<size_t>(size_)];
  for (int r = 0; r < size_; ++r) {
    Slot& s = slots[r];
    s.phase.store(static_cast<uint32_t>(Phase::kStarting));
    s.enqueued.store(-1);
    s.started.store(-1);
    s.completed.store(-1);
    s.busy_since_ns.store(0);
    s.step_seq.store(0);
    s.step_done.store(0);
    s.step_total.store(0);
    for (std::atomic<uint64_t>& w : s.step_what)
      w.store(0);
    for (SharedOperation& e : s.recent)
      e.seq.store(-1);
  }
}

ProgressBoard::~ProgressBoard() {
  ::munmap(map_, bytes_);
  ::unlink(path_.c_str());
}

RankProgress ProgressBoard::read(int rank) const {
  const Slot& s = static_cast<const Slot*>(map_)[rank];
  RankProgress p;
  p.rank = rank;
  p.phase = static_cast<Phase>(std::min<uint32_t>(s.phase.load(std::memory_order_acquire), 3));
  p.enqueued = s.enqueued.load(std::memory_order_acquire);
  p.started = s.started.load(std::memory_order_acquire);
  p.completed = s.completed.load(std::memory_order_acquire);
  p.busy_since_ns = s.busy_since_ns.load(std::memory_order_acquire);
  for (int attempt = 0; attempt < 4; ++attempt) {  // a torn read is retried, then left out
    const uint64_t seq = s.step_seq.load(std::memory_order_acquire);
    if (seq % 2 != 0) continue;
    const uint32_t done = s.step_done.load(std::memory_order_relaxed);
    const uint32_t total = s.step_total.load(std::memory_order_relaxed);
    char packed[kStepWords * 8 + 1] = {};
    for (int w = 0; w < kStepWords; ++w) {
      uint64_t word = s.step_what[w].load(std::memory_order_relaxed);
      std::memcpy(packed + 8 * w, &word, 8);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.step_seq.load(std::memory_order_relaxed) != seq) continue;
    p.step_done = static_cast<int>(done);
    p.step_total = static_cast<int>(total);
    p.step_what = packed;
    break;
  }
  for (int64_t seq = std::max<int64_t>(0, p.enqueued - kRecentOperations + 1); seq <= p.enqueued;
       ++seq) {
    const SharedOperation& e = s.recent[static_cast<size_t>(seq) % kRecentOperations];
    if (e.seq.load(std::memory_order_acquire) != seq) continue;
    OperationRecord op;
    op.seq = seq;
    op.count = e.count.load(std::memory_order_relaxed);
    char packed[kNameWords * 8 + 1] = {};
    for (int w = 0; w < kNameWords; ++w) {
      uint64_t word = e.name[w].load(std::memory_order_relaxed);
      std::memcpy(packed + 8 * w, &word, 8);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != seq) continue;  // rewritten while read
    op.name = packed;
    p.recent.push_back(std::move(op));
  }
  return p;
}

std::vector<RankProgress> ProgressBoard::read_all() const {
  std::vector<RankProgress> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(read(r));
  return out;
}

}  // namespace commtool::workers
