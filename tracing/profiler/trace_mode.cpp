// Trace mode: for every collective, what NCCL chose (algorithm, protocol, channels, warps) as
// one JSON line in $COMMTOOL_PROFILER_OUT. It asks NCCL for collective and point-to-point
// events only, does no work on NCCL's hot path beyond copying a few strings, and writes each
// line with one write(2) to a file opened with O_APPEND, so lines from several ranks and
// threads never interleave.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <string>

#include "tracing/profiler/collective_record.hpp"
#include "tracing/profiler/plugin_modes.hpp"
#include "tracing/profiler/plugin_support.hpp"

namespace commtool::nccl_profiler::trace_mode {

namespace {

struct Context : ContextHeader {
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 0;
  int fd = -1;  // -1: nowhere to write, record nothing
};

struct Event {
  Context* context = nullptr;
  CollectiveRecord record;
};

}  // namespace

ContextHeader* init(uint64_t comm_id, int nranks, int rank, int* activation_mask) {
  auto* c = new Context{{PluginMode::kTrace}, comm_id, rank, nranks, -1};
  if (const char* path = std::getenv(kOutputEnv); path != nullptr && *path != '\0') {
    c->fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  *activation_mask = c->fd >= 0 ? static_cast<int>(kColl | kP2p) : 0;
  return c;
}

Result start_event(ContextHeader* context, void** handle, EventDescrV5* descr) {
  *handle = nullptr;
  auto* c = static_cast<Context*>(context);
  if (c->fd < 0 || descr == nullptr) return kSuccess;
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
  e->record.stop_ns = monotonic_ns();
  std::string line = to_json_line(e->record) + "\n";
  // One write per line on an O_APPEND descriptor: atomic with respect to other writers.
  ssize_t written = ::write(e->context->fd, line.data(), line.size());
  (void)written;  // a full disk loses a record; NCCL must not fail because of us
  delete e;
  return kSuccess;
}

Result finalize(ContextHeader* context) {
  auto* c = static_cast<Context*>(context);
  if (c->fd >= 0) ::close(c->fd);
  delete c;
  return kSuccess;
}

}  // namespace commtool::nccl_profiler::trace_mode
