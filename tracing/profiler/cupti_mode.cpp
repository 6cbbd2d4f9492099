// The plugin's CUPTI layer for `commtool record --cupti`. The launcher points
// CUDA_INJECTION64_PATH at this library (the same file as the NCCL profiler plugin, so both
// write through the one RecordSink of the process); the CUDA driver calls InitializeInjection
// at cuInit, before the job's first CUDA work. It records, on the host clock
// (CLOCK_MONOTONIC, the clock of the plugin's own lines):
//   CONCURRENT_KERNEL, MEMCPY, MEMSET   GPU work: NCCL's kernels and the anchors around marks
//                                        (cupti_anchors.hpp), as `work` lines
//   SYNCHRONIZATION (stream wait event)  `wait` lines
//   CUDA_EVENT                           `event` lines (no device timestamps: the work before
//                                        the event says when it completed)
// No API records and no callbacks: they cost microseconds per CUDA call.
//
// One CUPTI client per process. The layer subscribes first (cuptiSubscribe_v2), which is how
// CUPTI asks every client to claim it: under Nsight Systems, Nsight Compute, cuda-gdb or
// compute-sanitizer, or behind another injected tool, that fails and names the holder; the layer
// then stays off and says why in a `cupti` line, and the job runs on with plugin-only recording.
// A client that comes later (PyTorch's profiler starting mid-job) would be refused by CUPTI;
// so the launcher also preloads this library (LD_PRELOAD), whose cuptiSubscribe and
// cuptiSubscribe_v2 stand in front of CUPTI's: when anyone else subscribes, the layer first
// gives CUPTI up (kinds off, buffers flushed, its subscriber released, a `cupti` "yielded" line)
// and then passes the call on, so the user's profiler gets CUPTI as it would without commtool.
//
// Failures never reach the job: InitializeInjection always returns success.
#include <cupti.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tracing/cupti/activity_kind_names.hpp"
#include "tracing/profiler/cupti_anchors.hpp"
#include "tracing/profiler/plugin_support.hpp"
#include "tracing/profiler/record_sink.hpp"

namespace commtool::nccl_profiler::cupti_mode {

namespace {

constexpr const char* kSubscriberName = "commtool record";
constexpr const char* kCuptiSoname = "libcupti.so.13";

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr size_t kBufferAlign = 8;
// CUPTI's own thread hands over completed buffers this often (ms), so a job that hangs or is
// killed still leaves its records up to a second before.
constexpr uint32_t kFlushPeriodMs = 1000;

using tracing::cupti::named_activity_kind;
using tracing::cupti::NamedActivityKind;
constexpr NamedActivityKind kKinds[] = {
    named_activity_kind("kernel"), named_activity_kind("memcpy"), named_activity_kind("memset"),
    named_activity_kind("sync"), named_activity_kind("event")};
// For measuring what each kind costs (scripts/gpu-record.sh): a comma list of the names above
// enables only those. The split needs all five.
constexpr const char* kKindsEnv = "COMMTOOL_CUPTI_KINDS";

struct Api {
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) timestamp_callback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityFlushPeriod) flush_period = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
};

uint64_t CUPTIAPI host_clock() {
  return static_cast<uint64_t>(monotonic_ns());
}

// The one session of the process. Its mutex orders start, the buffer callbacks and yield.
struct Session {
  std::mutex mutex;
  void* library = nullptr;  // never closed: CUPTI must not be unmapped
  std::string library_path;
  Api api;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool on = false;
  std::atomic<pid_t> pid{0};  // the process that started it: a forked child must not call CUPTI
  std::vector<CUpti_ActivityKind> kinds;  // enabled
  uint64_t dropped = 0;
  WorkAnchors anchors{[](const WorkLine& w) { RecordSink::instance().add(w); }};

  std::string words(CUptiResult rc) const {
    const char* s = nullptr;
    if (api.result_string != nullptr && api.result_string(rc, &s) == CUPTI_SUCCESS && s) return s;
    return "CUPTI error " + std::to_string(static_cast<int>(rc));
  }
};

Session& session() {
  static Session& s = *new Session;  // never destroyed: CUPTI may call back at exit
  return s;
}

void write_state(CuptiState state, std::string why, uint64_t dropped) {
  RecordSink::instance().add(CuptiLine{state, std::move(why), dropped, monotonic_ns()});
}

template <class Fn>
bool bind(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  return out != nullptr;
}

// Empty when every entry point was found, else the first one missing.
std::string bind_all(void* lib, Api& a) {
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& fn) {
    if (missing == nullptr && !bind(lib, name, fn)) missing = name;
  };
  need("cuptiSubscribe_v2", a.subscribe_v2);
  need("cuptiUnsubscribe", a.unsubscribe);
  need("cuptiGetResultString", a.result_string);
  need("cuptiActivityRegisterTimestampCallback", a.timestamp_callback);
  need("cuptiActivityRegisterCallbacks", a.register_callbacks);
  need("cuptiActivityEnable", a.enable);
  need("cuptiActivityDisable", a.disable);
  need("cuptiActivityFlushAll", a.flush_all);
  need("cuptiActivityFlushPeriod", a.flush_period);
  need("cuptiActivityGetNextRecord", a.next_record);
  need("cuptiActivityGetNumDroppedRecords", a.dropped_records);
  return missing != nullptr ? missing : "";
}

// A kernel, copy or set record (they share these fields): to the anchors, unless CUPTI gave it
// no timing.
template <class Record>
void add_work(Session& s, const Record& r, bool nccl) {
  if (r.start == 0 || r.end < r.start) return;
  s.anchors.work(WorkLine{StreamId{r.contextId, r.streamId}, r.correlationId,
                          Interval{static_cast<int64_t>(r.start), static_cast<int64_t>(r.end)},
                          nccl});
}

// Under the session's mutex.
void consume(Session& s, const CUpti_Activity* r) {
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      add_work(s, k, is_nccl_kernel_name(k.name));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      add_work(s, *reinterpret_cast<const CUpti_ActivityMemcpy6*>(r), false);
      return;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      add_work(s, *reinterpret_cast<const CUpti_ActivityMemset4*>(r), false);
      return;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& w = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(r);
      if (w.type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) return;
      const StreamId stream = StreamId{w.contextId, w.streamId};
      RecordSink::instance().add(
          WaitLine{stream, w.cudaEventId, w.correlationId, static_cast<int64_t>(w.start)});
      s.anchors.mark(stream, w.correlationId);
      return;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
      const auto& e = *reinterpret_cast<const CUpti_ActivityCudaEvent2*>(r);
      const StreamId stream = StreamId{e.contextId, e.streamId};
      RecordSink::instance().add(EventLine{stream, e.eventId, e.correlationId});
      s.anchors.mark(stream, e.correlationId);
      return;
    }
    default:
      return;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // no buffer: CUPTI counts the drops
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid_bytes) {
  Session& s = session();
  try {
    std::lock_guard lock(s.mutex);
    CUpti_Activity* record = nullptr;
    while (s.api.next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS)
      consume(s, record);
    size_t dropped = 0;
    if (s.api.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
      s.dropped += dropped;
      write_state(s.on ? CuptiState::kOn : CuptiState::kYielded, "records dropped", s.dropped);
    }
  } catch (...) {
    // Out of memory while recording: this buffer's remaining records are lost.
  }
  std::free(buffer);
}

// Needs the session's mutex. Gives CUPTI up: no more kinds, every buffer handed back (forced:
// incomplete ones too, since another client's callbacks would get them next), the anchors'
// last lines, and the subscriber released.
void stop(Session& s) {
  if (!s.on) return;
  for (CUpti_ActivityKind kind : s.kinds)
    s.api.disable(kind);
  s.on = false;
  s.mutex.unlock();  // the flush calls buffer_completed, which takes the mutex
  s.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  s.mutex.lock();
  s.anchors.finish();
  if (s.subscriber != nullptr) s.api.unsubscribe(s.subscriber);
  s.subscriber = nullptr;
}

void stop_at_exit() {
  Session& s = session();
  // A child forked from the job (a data loader's worker) inherits the session but not CUDA:
  // CUPTI must not be called there, nor the mutex taken (a CUPTI thread of the parent may have
  // held it at the fork). pid is written once, before the layer is on.
  if (s.pid != getpid()) return;
  std::lock_guard lock(s.mutex);
  stop(s);
  RecordSink::instance().flush();
}

// Where `address` (a caller's return address) lives: the library's file name, or "?".
std::string object_of(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

void CUPTIAPI ignore_callbacks(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Under the session's mutex. The reason the layer cannot run, or empty once it runs.
std::string start(Session& s) {
  // The job's own CUPTI when it has loaded one already (PyTorch links its copy): two copies of
  // CUPTI in one process do not share the driver, and the job's profiler must find CUPTI free
  // in its copy once this layer yields. Else the launcher's choice; a copy the job loads later
  // by the same soname is then this one.
  s.library = dlopen(kCuptiSoname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (s.library == nullptr) {
    const char* chosen = std::getenv(kCuptiLibraryEnv);
    s.library_path = chosen != nullptr && *chosen != '\0' ? chosen : kCuptiSoname;
    s.library = dlopen(s.library_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  }
  if (s.library == nullptr) {
    const char* e = dlerror();
    return "cannot load CUPTI " + s.library_path + ": " + (e != nullptr ? e : "?");
  }
  if (std::string missing = bind_all(s.library, s.api); !missing.empty()) {
    return "CUPTI " + s.library_path + " lacks " + missing + " (CUDA 13's CUPTI is needed)";
  }
  s.library_path = object_of(reinterpret_cast<const void*>(s.api.result_string));
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = kSubscriberName;
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof(holder);
  const CUptiResult rc = s.api.subscribe_v2(&s.subscriber, ignore_callbacks, nullptr, &params);
  if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    s.subscriber = nullptr;
    return std::string("another CUPTI client holds CUPTI") +
           (holder[0] != '\0' ? std::string(" (") + holder + ")" : std::string()) +
           ": a profiler such as Nsight Systems, Nsight Compute, compute-sanitizer or "
           "PyTorch's profiler";
  }
  if (rc != CUPTI_SUCCESS) {
    s.subscriber = nullptr;
    return "cuptiSubscribe_v2 failed: " + s.words(rc);
  }
  auto fail = [&](const char* call, CUptiResult r) {
    for (CUpti_ActivityKind kind : s.kinds)
      s.api.disable(kind);
    s.api.unsubscribe(s.subscriber);
    s.subscriber = nullptr;
    return std::string(call) + " failed: " + s.words(r);
  };
  if (CUptiResult r = s.api.timestamp_callback(host_clock); r != CUPTI_SUCCESS) {
    // Without it GPU and host times would need an offset; this layer does not guess one.
    return fail("cuptiActivityRegisterTimestampCallback", r);
  }
  if (CUptiResult r = s.api.register_callbacks(buffer_requested, buffer_completed);
      r != CUPTI_SUCCESS) {
    return fail("cuptiActivityRegisterCallbacks", r);
  }
  const char* only = std::getenv(kKindsEnv);
  const std::vector<std::string_view> named = tracing::cupti::comma_items(only ? only : "");
  for (const NamedActivityKind& k : kKinds) {
    if (only == nullptr || std::find(named.begin(), named.end(), k.name) != named.end()) {
      s.kinds.push_back(k.kind);
    }
  }
  for (CUpti_ActivityKind kind : s.kinds) {
    if (CUptiResult r = s.api.enable(kind); r != CUPTI_SUCCESS) {
      return fail("cuptiActivityEnable", r);
    }
  }
  s.api.flush_period(kFlushPeriodMs);
  s.on = true;
  s.pid = getpid();
  return "";
}

// CUPTI's own `name`, as the library that called one of the stand-ins below would have found it
// without this library in front: first in the caller's own dependencies (a private CUPTI, such
// as PyTorch's), then further along the global search order, then the CUPTI this layer loaded.
template <class Fn>
Fn real_entry(const char* name, const void* caller, Fn self) {
  Dl_info info{};
  if (dladdr(caller, &info) != 0 && info.dli_fname != nullptr) {
    if (void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
      auto fn = reinterpret_cast<Fn>(dlsym(h, name));
      dlclose(h);
      if (fn != nullptr && fn != self) return fn;
    }
  }
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name)); fn != nullptr && fn != self) {
    return fn;
  }
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (s.library != nullptr) {
    if (auto fn = reinterpret_cast<Fn>(dlsym(s.library, name)); fn != self) return fn;
  }
  return nullptr;
}

// Another client asks for CUPTI: give it up first.
void yield_to(const void* caller) {
  Session& s = session();
  if (s.pid != getpid()) return;  // see stop_at_exit
  std::lock_guard lock(s.mutex);
  if (!s.on) return;
  stop(s);
  write_state(CuptiState::kYielded, object_of(caller), s.dropped);
  RecordSink::instance().flush();
}

}  // namespace

}  // namespace commtool::nccl_profiler::cupti_mode

using namespace commtool::nccl_profiler;

extern "C" {

// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library.
__attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    const char* dir = std::getenv(kRecordDirEnv);
    if (dir == nullptr || *dir == '\0') return 1;
    if (!RecordSink::instance().open(dir)) return 1;
    cupti_mode::Session& s = cupti_mode::session();
    std::string why;
    {
      std::lock_guard lock(s.mutex);
      if (s.on || s.library != nullptr) return 1;  // a second cuInit call
      why = cupti_mode::start(s);
    }
    if (why.empty()) {
      cupti_mode::write_state(CuptiState::kOn, s.library_path, 0);
      std::atexit(cupti_mode::stop_at_exit);
    } else {
      cupti_mode::write_state(CuptiState::kOff, why, 0);
    }
    RecordSink::instance().flush();
  } catch (...) {
    // Never the job's problem.
  }
  return 1;
}

// Stand-ins for CUPTI's subscribe calls, effective when this library is preloaded (see the top
// of this file). `record --cupti` sets LD_PRELOAD only for its job.
__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  const void* caller = __builtin_return_address(0);
  auto real =
      cupti_mode::real_entry<decltype(&cuptiSubscribe)>("cuptiSubscribe", caller, &cuptiSubscribe);
  if (real == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  cupti_mode::yield_to(caller);
  return real(subscriber, callback, userdata);
}

__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                  CUpti_SubscriberParams* params) {
  const void* caller = __builtin_return_address(0);
  auto real = cupti_mode::real_entry<decltype(&cuptiSubscribe_v2)>("cuptiSubscribe_v2", caller,
                                                                   &cuptiSubscribe_v2);
  if (real == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  cupti_mode::yield_to(caller);
  return real(subscriber, callback, userdata, params);
}
}
