// Record mode: what `commtool record` keeps of every NCCL operation of a job (record_line.hpp
// says what each line holds). For each operation it follows four kinds of NCCL 2.28 event:
//   CollApi/P2pApi  the application's call; NCCL stops it before the operation's own event
//                   starts (the task is only queued then), and names it as that event's parent
//   Coll/P2p        NCCL planning and launching the operation: a start line at once
//   KernelCh        one per planned channel, reported by NCCL's proxy thread with the GPU's
//                   %globaltimer at the channel's start (descr->kernelCh.pTimer) and, through
//                   recordEventState(ncclProfilerKernelChStop), at its end; the parent is the
//                   Coll/P2p event
// and writes the end line once the Coll/P2p event and every planned channel have stopped.
//
// Operations that report no channel at all (a 1-rank communicator copies without a kernel;
// paths without proxy such as symmetric kernels) must still end, without invented GPU times:
//   - on a 1-rank communicator, and for a send or receive to the rank itself (a copy in the
//     kernel, with no channel event of its own), as soon as the Coll/P2p and API events have
//     stopped;
//   - otherwise when a later operation of the same communicator completes: NCCL runs one
//     communicator's operations in order, so an earlier one that has reported no channel by
//     then never will. A clock would be wrong here: queued behind a slow or hung kernel, an
//     operation reports nothing for as long as the GPU needs, and a hang must look like one.
// Both end with gpu null and complete false, as does every operation still waiting at its
// communicator's finalize or evicted when the process holds too many (the memory bound).
#include <sys/types.h>
#include <unistd.h>

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

// record_sink.hpp (so record_line.hpp) before nccl_profiler_v5.hpp: read after it,
// OpKind::kP2p would draw -Wshadow for NCCL's event bit kP2p.
#include "tracing/profiler/record_sink.hpp"

#include "tracing/profiler/plugin_modes.hpp"

namespace commtool::nccl_profiler::record_mode {

namespace {

// The GPU of the CUDA context current on this thread, "GPU-" and its UUID as nvidia-smi -L
// prints it; empty when there is none. NCCL calls the plugin's init from its comm init, with
// the communicator's device set, so this is the rank's GPU. The driver is asked through the
// libcuda.so.1 the process has loaded already (the plugin never loads CUDA itself), so two
// ranks' lines say whether they share one GPU: the report must not call time slicing a
// straggler.
std::string current_gpu_uuid() {
  using GetDevice = int (*)(int*);
  using GetUuid = int (*)(unsigned char(*)[16], int);
  static const auto [get_device, get_uuid] = [] {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda == nullptr) return std::pair<GetDevice, GetUuid>{nullptr, nullptr};
    void* uuid = dlsym(cuda, "cuDeviceGetUuid_v2");
    if (uuid == nullptr) uuid = dlsym(cuda, "cuDeviceGetUuid");
    return std::pair{reinterpret_cast<GetDevice>(dlsym(cuda, "cuCtxGetDevice")),
                     reinterpret_cast<GetUuid>(uuid)};
  }();
  int device = -1;
  unsigned char bytes[16] = {};
  if (get_device == nullptr || get_uuid == nullptr || get_device(&device) != 0 ||
      get_uuid(&bytes, device) != 0) {
    return "";
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

// Tests only: the bound on operations a process follows at once, instead of 64 Ki.
constexpr const char* kMaxOperationsEnv = "COMMTOOL_RECORD_MAX_OPERATIONS";
constexpr size_t kMaxOperations = 64 * 1024;
// API events kept for operations yet to start (a group of thousands of sends and receives
// starts none until ncclGroupEnd), and for graph captures, whose replays name them as parent.
constexpr size_t kMaxApiEvents = 64 * 1024;

// A handle's top two bits say what it names; the rest is an id, never reused in a process.
constexpr unsigned kTagShift = 62;
constexpr uint64_t kIdMask = (uint64_t{1} << kTagShift) - 1;
enum Tag : uint64_t { kApiTag = 1, kOperationTag = 2, kChannelTag = 3 };
constexpr unsigned kChannelBits = 8;  // a channel handle: operation id, then the channel

void* make_handle(Tag tag, uint64_t id) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>((uint64_t{tag} << kTagShift) | id));
}
uint64_t tag_of(const void* handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)) >> kTagShift;
}
uint64_t id_of(const void* handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)) & kIdMask;
}

int64_t gpu_time(uint64_t timer) {
  return static_cast<int64_t>(std::min<uint64_t>(timer, std::numeric_limits<int64_t>::max()));
}

struct Context : ContextHeader {
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 0;
  uint64_t next_index = 0;
  std::set<uint64_t> operations;  // ids of its operations not yet ended, oldest first
};

struct ApiEvent {
  Interval call;  // end_ns 0 while the call runs
  bool stopped = false;
  bool graph_captured = false;
  uint64_t waiting_operation = 0;  // one that finished before this event stopped
};

struct Operation {
  Context* context = nullptr;
  EndLine line;
  uint64_t api_id = 0;  // 0: no API event to wait for
  bool stopped = false;
  int channels_started = 0;
  int channels_stopped = 0;
  uint64_t gpu_first = std::numeric_limits<uint64_t>::max();
  uint64_t gpu_last = 0;
  int64_t seen_first = 0;
  int64_t seen_last = 0;
};

// The process's record-mode state, one mutex for all of it: NCCL's calls are short and come
// from the application's threads, its proxy thread and (graph replays) CUDA's callback thread.
class Recorder {
 public:
  static Recorder& instance() {
    static Recorder* recorder = new Recorder();  // never destroyed: see RecordSink::instance
    return *recorder;
  }

  ContextHeader* init(uint64_t comm_id, const char* comm_name, int nodes, int nranks, int rank) {
    const char* dir = std::getenv(kRecordDirEnv);
    if (failed_ || dir == nullptr || !RecordSink::instance().open(dir)) return nullptr;
    std::lock_guard lock(mutex_);
    register_fork_handlers();
    max_operations_ = size_from_env(kMaxOperationsEnv, kMaxOperations);
    auto* c = new Context;
    c->mode = PluginMode::kRecord;
    c->comm_id = comm_id;
    c->rank = rank;
    c->nranks = nranks;
    contexts_.insert(c);
    RecordSink::instance().add(CommLine{comm_id, rank, nranks, nodes, text(comm_name),
                                        monotonic_ns(), current_gpu_uuid(), loaded_nccl_version()});
    return c;
  }

  void start(Context* c, void** handle, const EventDescrV5& d) {
    if (d.type == kCollApi || d.type == kP2pApi) {
      start_api(handle, d);
    } else if (d.type == kColl || d.type == kP2p) {
      start_operation(c, handle, d);
    } else if (d.type == kKernelCh) {
      start_channel(handle, d);
    }
  }

  void stop(void* handle) {
    std::lock_guard lock(mutex_);
    const uint64_t id = id_of(handle);
    switch (tag_of(handle)) {
      case kApiTag:
        if (auto it = api_events_.find(id); it != api_events_.end()) {
          it->second.call.end_ns = monotonic_ns();
          it->second.stopped = true;
          if (const uint64_t waiting = std::exchange(it->second.waiting_operation, 0)) {
            end_if_done(waiting);
          }
        }
        break;
      case kOperationTag:
        if (auto it = operations_.find(id); it != operations_.end()) {
          it->second.stopped = true;
          it->second.line.enqueue.end_ns = monotonic_ns();
          end_if_done(id);
        }
        break;
      case kChannelTag:
        if (auto it = operations_.find(id >> kChannelBits); it != operations_.end()) {
          ++it->second.channels_stopped;
          it->second.seen_last = std::max(it->second.seen_last, monotonic_ns());
          end_if_done(it->first);
        }
        break;
      default:
        break;
    }
  }

  void record_state(void* handle, int state, const EventStateArgsV5* args) {
    if (tag_of(handle) != kChannelTag || state != kKernelChStop || args == nullptr) return;
    std::lock_guard lock(mutex_);
    if (auto it = operations_.find(id_of(handle) >> kChannelBits); it != operations_.end()) {
      Operation& op = it->second;
      op.gpu_last = std::max(op.gpu_last, args->kernelCh.pTimer);
      op.seen_last = std::max(op.seen_last, monotonic_ns());
    }
  }

  void finalize(Context* c) {
    bool last = false;
    {
      std::lock_guard lock(mutex_);
      if (contexts_.erase(c) == 0) {
        delete c;  // a context of the parent of this forked process: not ours to report
        return;
      }
      const std::vector<uint64_t> left(c->operations.begin(), c->operations.end());
      for (uint64_t id : left) {
        const Operation& op = operations_.at(id);
        const bool all_channels = op.line.channels > 0 && op.channels_stopped >= op.line.channels;
        end(id, op.stopped && all_channels);
      }
      RecordSink::instance().add(FinLine{c->comm_id, c->rank, monotonic_ns()});
      delete c;
      last = contexts_.empty();
    }
    if (last) RecordSink::instance().flush();
  }

  // Anything thrown (memory exhausted, say) ends the recording, never the job.
  void fail() { failed_ = true; }
  bool failed() const { return failed_; }

 private:
  Recorder() = default;

  void start_api(void** handle, const EventDescrV5& d) {
    std::lock_guard lock(mutex_);
    if (api_events_.size() >= kMaxApiEvents) evict_api_event();
    const uint64_t id = next_id_++;
    ApiEvent& e = api_events_[id];
    e.call.start_ns = monotonic_ns();
    e.graph_captured = d.type == kCollApi ? d.collApi.graphCaptured : d.p2pApi.graphCaptured;
    *handle = make_handle(kApiTag, id);
  }

  void start_operation(Context* c, void** handle, const EventDescrV5& d) {
    std::lock_guard lock(mutex_);
    if (contexts_.count(c) == 0) return;
    while (operations_.size() >= max_operations_)
      end(operations_.begin()->first, false);
    const uint64_t id = next_id_++;
    Operation op;
    op.context = c;
    StartLine& s = op.line.op;
    s.comm = c->comm_id;
    s.rank = c->rank;
    s.index = c->next_index++;
    if (d.type == kColl) {
      s.kind = OpKind::kCollective;
      s.seq = d.coll.seqNumber;
      s.func = text(d.coll.func);
      s.count = d.coll.count;
      s.datatype = text(d.coll.datatype);
      op.line.root = d.coll.root;
      op.line.algo = text(d.coll.algo);
      op.line.proto = text(d.coll.proto);
      op.line.channels = d.coll.nChannels;
      op.line.warps = d.coll.nWarps;
    } else {
      s.kind = OpKind::kP2p;
      s.func = text(d.p2p.func);
      s.count = d.p2p.count;
      s.datatype = text(d.p2p.datatype);
      s.peer = d.p2p.peer;
      op.line.channels = d.p2p.nChannels;
    }
    s.t_ns = monotonic_ns();
    op.line.enqueue = Interval{s.t_ns, s.t_ns};
    if (tag_of(d.parentObj) == kApiTag) {
      const uint64_t api_id = id_of(d.parentObj);
      if (auto it = api_events_.find(api_id); it != api_events_.end()) {
        // A graph's operations start at each replay, under the API event of the capture: that
        // call is not this operation's, so only the flag is kept.
        if (it->second.graph_captured) {
          op.line.graph_captured = true;
        } else {
          op.api_id = api_id;
        }
      }
    }
    RecordSink::instance().add(s);
    operations_.emplace(id, std::move(op));
    c->operations.insert(id);
    *handle = make_handle(kOperationTag, id);
  }

  void start_channel(void** handle, const EventDescrV5& d) {
    if (tag_of(d.parentObj) != kOperationTag) return;
    std::lock_guard lock(mutex_);
    const uint64_t id = id_of(d.parentObj);
    auto it = operations_.find(id);
    if (it == operations_.end()) return;  // ended already: evicted, or its comm finalised
    Operation& op = it->second;
    const int64_t now = monotonic_ns();
    if (op.channels_started++ == 0) op.seen_first = op.seen_last = now;
    op.gpu_first = std::min(op.gpu_first, d.kernelCh.pTimer);
    *handle = make_handle(kChannelTag, (id << kChannelBits) | d.kernelCh.channelId);
  }

  // Ends the operation if nothing more is coming for it (the rules at the top of this file).
  void end_if_done(uint64_t id) {
    auto it = operations_.find(id);
    if (it == operations_.end() || !it->second.stopped) return;
    Operation& op = it->second;
    if (op.api_id != 0) {
      auto api = api_events_.find(op.api_id);
      if (api != api_events_.end() && !api->second.stopped) {
        api->second.waiting_operation = id;
        return;
      }
    }
    if (op.line.channels > 0 && op.channels_stopped >= op.line.channels) {
      Context* c = op.context;
      end(id, true);
      end_silent_before(c, id);
    } else if (op.channels_started == 0 && (op.context->nranks == 1 || to_itself(op))) {
      end(id, false);
    }
  }

  // A send or receive to the rank itself: a copy inside the kernel, which NCCL 2.28 reports no
  // channel for (seen on the H200 in every all_to_all_single of 2 and 4 ranks). Left to the
  // next operation's end, it would look in flight through a long compute phase, and a job
  // recorded with --hang-timeout would be called hung.
  static bool to_itself(const Operation& op) {
    return op.line.op.kind == OpKind::kP2p && op.line.op.peer == op.line.op.rank;
  }

  // Earlier operations of `c` that were launched and reported no channel: they never will.
  void end_silent_before(Context* c, uint64_t id) {
    std::vector<uint64_t> silent;
    for (auto it = c->operations.begin(); it != c->operations.end() && *it < id; ++it) {
      const Operation& op = operations_.at(*it);
      if (op.stopped && op.channels_started == 0) silent.push_back(*it);
    }
    for (uint64_t s : silent)
      end(s, false);
  }

  // Writes the operation's end line and forgets it.
  void end(uint64_t id, bool complete) {
    auto it = operations_.find(id);
    Operation& op = it->second;
    EndLine& l = op.line;
    if (op.api_id != 0) {
      if (auto api = api_events_.find(op.api_id); api != api_events_.end()) {
        if (api->second.stopped) l.api = api->second.call;
        api_events_.erase(api);  // its one operation has ended
      }
    }
    if (op.channels_started > 0) {
      const uint64_t gpu_last = std::max(op.gpu_last, op.gpu_first);
      l.gpu = Interval{gpu_time(op.gpu_first), gpu_time(gpu_last)};
      l.seen = Interval{op.seen_first, op.seen_last};
    }
    l.kernel_channels = op.channels_stopped;
    l.complete = complete;
    RecordSink::instance().add(l);
    op.context->operations.erase(id);
    operations_.erase(it);
  }

  void evict_api_event() {
    auto it = api_events_.begin();
    const uint64_t waiting = it->second.waiting_operation;
    api_events_.erase(it);
    if (waiting != 0) end_if_done(waiting);
  }

  static void register_fork_handlers() {
    static const bool registered =
        pthread_atfork(prepare_fork, parent_after_fork, child_after_fork) == 0;
    (void)registered;
  }
  // The sink has fork handlers of its own, registered when it was opened (before these): its
  // prepare runs after this one, so the recorder's mutex is taken before the sink's, as on
  // every other path.
  static void prepare_fork() { instance().mutex_.lock(); }
  static void parent_after_fork() { instance().mutex_.unlock(); }
  // The child follows none of its parent's communicators or operations.
  static void child_after_fork() {
    Recorder& r = instance();
    r.operations_.clear();
    r.api_events_.clear();
    r.contexts_.clear();
    r.mutex_.unlock();
  }

  std::mutex mutex_;
  std::atomic<bool> failed_{false};
  uint64_t next_id_ = 1;
  size_t max_operations_ = kMaxOperations;
  std::unordered_set<Context*> contexts_;
  std::map<uint64_t, ApiEvent> api_events_;   // by id: the oldest evicted first
  std::map<uint64_t, Operation> operations_;  // by id: the oldest first
};

// Runs `f`, and turns whatever it throws into the end of the recording.
template <class F>
Result guarded(F&& f) {
  Recorder& r = Recorder::instance();
  if (r.failed()) return kSuccess;
  try {
    f(r);
  } catch (...) {
    r.fail();
  }
  return kSuccess;
}

}  // namespace

bool requested() {
  const char* dir = std::getenv(kRecordDirEnv);
  return dir != nullptr && *dir != '\0';
}

ContextHeader* init(uint64_t comm_id, const char* comm_name, int nodes, int nranks, int rank,
                    int* activation_mask) {
  ContextHeader* context = nullptr;
  guarded([&](Recorder& r) { context = r.init(comm_id, comm_name, nodes, nranks, rank); });
  *activation_mask =
      context != nullptr ? static_cast<int>(kColl | kP2p | kCollApi | kP2pApi | kKernelCh) : 0;
  return context;
}

Result start_event(ContextHeader* context, void** handle, EventDescrV5* descr) {
  if (descr == nullptr) return kSuccess;
  return guarded([&](Recorder& r) { r.start(static_cast<Context*>(context), handle, *descr); });
}

Result stop_event(void* handle) {
  return guarded([&](Recorder& r) { r.stop(handle); });
}

Result record_event_state(void* handle, int state, void* state_args) {
  return guarded([&](Recorder& r) {
    r.record_state(handle, state, static_cast<const EventStateArgsV5*>(state_args));
  });
}

Result finalize(ContextHeader* context) {
  auto* c = static_cast<Context*>(context);
  if (Recorder::instance().failed()) {
    delete c;
    return kSuccess;
  }
  return guarded([&](Recorder& r) { r.finalize(c); });
}

bool owns_handle(const void* handle) {
  return tag_of(handle) != 0;
}

}  // namespace commtool::nccl_profiler::record_mode
