// commtool's NCCL profiler plugin (interface v5, NCCL >= 2.28). NCCL loads it through
// NCCL_PROFILER_PLUGIN=<path to this library>; for every collective it records what NCCL
// chose (algorithm, protocol, channels, warps) as one JSON line in $COMMTOOL_PROFILER_OUT.
// It asks NCCL for collective and point-to-point events only, does no work on NCCL's hot path
// beyond copying a few strings, and writes each line with one write(2) to a file opened with
// O_APPEND, so lines from several ranks and threads never interleave.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "tracing/profiler/collective_record.hpp"
#include "tracing/profiler/nccl_profiler_v5.hpp"

namespace commtool::nccl_profiler {

namespace {

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string text(const char* s) {
  return s != nullptr ? s : "";
}

struct Context {
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 0;
  int fd = -1;  // -1: nowhere to write, record nothing
};

struct Event {
  Context* context = nullptr;
  CollectiveRecord record;
};

Result init(void** context, uint64_t comm_id, int* activation_mask, const char* /*comm_name*/,
            int /*nodes*/, int nranks, int rank, DebugLogger /*log*/) {
  auto* c = new Context{comm_id, rank, nranks, -1};
  if (const char* path = std::getenv(kOutputEnv); path != nullptr && *path != '\0') {
    c->fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  *context = c;
  *activation_mask = c->fd >= 0 ? static_cast<int>(kColl | kP2p) : 0;
  return kSuccess;
}

Result start_event(void* context, void** handle, EventDescrV5* descr) {
  *handle = nullptr;
  auto* c = static_cast<Context*>(context);
  if (c == nullptr || c->fd < 0 || descr == nullptr) return kSuccess;
  auto* e = new Event{c, {}};
  CollectiveRecord& r = e->record;
  r.comm_id = c->comm_id;
  r.rank = c->rank;
  r.nranks = c->nranks;
  r.start_ns = monotonic_ns();
  if (descr->type == kColl) {
    r.seq = descr->coll.seqNumber;
    r.func = text(descr->coll.func);
    r.count = descr->coll.count;
    r.datatype = text(descr->coll.datatype);
    r.algo = text(descr->coll.algo);
    r.proto = text(descr->coll.proto);
    r.channels = descr->coll.nChannels;
    r.warps = descr->coll.nWarps;
  } else if (descr->type == kP2p) {
    r.func = text(descr->p2p.func);
    r.count = descr->p2p.count;
    r.datatype = text(descr->p2p.datatype);
    r.channels = descr->p2p.nChannels;
  } else {
    delete e;
    return kSuccess;
  }
  *handle = e;
  return kSuccess;
}

Result stop_event(void* handle) {
  auto* e = static_cast<Event*>(handle);
  if (e == nullptr) return kSuccess;
  e->record.stop_ns = monotonic_ns();
  std::string line = to_json_line(e->record) + "\n";
  // One write per line on an O_APPEND descriptor: atomic with respect to other writers.
  ssize_t written = ::write(e->context->fd, line.data(), line.size());
  (void)written;  // a full disk loses a record; NCCL must not fail because of us
  delete e;
  return kSuccess;
}

Result record_event_state(void* /*handle*/, int /*state*/, void* /*args*/) {
  return kSuccess;
}

Result finalize(void* context) {
  auto* c = static_cast<Context*>(context);
  if (c != nullptr && c->fd >= 0) ::close(c->fd);
  delete c;
  return kSuccess;
}

}  // namespace

}  // namespace commtool::nccl_profiler

// The symbol NCCL looks up.
extern "C" {
__attribute__((visibility("default"))) commtool::nccl_profiler::ProfilerV5 ncclProfiler_v5 = {
    "commtool",
    commtool::nccl_profiler::init,
    commtool::nccl_profiler::start_event,
    commtool::nccl_profiler::stop_event,
    commtool::nccl_profiler::record_event_state,
    commtool::nccl_profiler::finalize,
};
}
