#include "tracing/cupti/cupti_tracer.hpp"

#include <cudaTypedefs.h>  // PFN_cuCtxGetCurrent_v4000
#include <cupti.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <mutex>
#include <optional>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/dynlib.hpp"
#include "probes/base/error.hpp"
#include "tracing/cupti/normalise.hpp"

namespace commtool::tracing {

// ---------------------------------------------------------------------------------------------
// Normalisation (pure: no CUPTI call)

namespace cupti {

std::string api_display_name(const char* cupti_name) {
  std::string name = cupti_name != nullptr ? cupti_name : "";
  // Runtime names end in "_v" and the four- or five-digit CUDA version of the entry point.
  const size_t v = name.rfind("_v");
  if (v == std::string::npos || name.size() - v < 6) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

std::string memcpy_name(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

RecordNormaliser::RecordNormaliser(ApiNameLookup api_name, int64_t clock_offset_ns)
    : lookup_(std::move(api_name)), clock_offset_ns_(clock_offset_ns) {}

uint64_t RecordNormaliser::to_monotonic(uint64_t cupti_ns) const {
  const int64_t t = static_cast<int64_t>(cupti_ns) - clock_offset_ns_;
  return t > 0 ? static_cast<uint64_t>(t) : 0;
}

const std::string& RecordNormaliser::api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  const uint64_t key = (static_cast<uint64_t>(domain) << 32) | cbid;
  auto it = api_names_.find(key);
  if (it != api_names_.end()) return it->second;
  const char* raw = lookup_ ? lookup_(domain, cbid) : nullptr;
  std::string name =
      raw != nullptr
          ? api_display_name(raw)
          : fmt::format("{} API {}", domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver",
                        cbid);
  return api_names_.emplace(key, std::move(name)).first->second;
}

void RecordNormaliser::add_api(const CUpti_ActivityAPI& r, CUpti_CallbackDomain domain,
                               RecordSet& out) {
  if (r.start == 0 || r.end == 0) return;
  out.api.push_back(ApiCall{r.correlationId, r.threadId, to_monotonic(r.start), to_monotonic(r.end),
                            api_name(domain, r.cbid)});
}

void RecordNormaliser::add_marker(const CUpti_ActivityMarker2& r, RecordSet& out) {
  if (r.timestamp == 0) return;
  const bool on_thread =
      r.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || r.objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS;
  const uint32_t thread = on_thread ? r.objectId.pt.threadId : 0;
  const uint64_t t = to_monotonic(r.timestamp);
  auto text = [](const char* s) { return s != nullptr ? std::string(s) : std::string(); };
  if ((r.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0) {
    out.ranges.push_back(HostRange{thread, t, t, text(r.domain), text(r.name)});
  } else if ((r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    open_ranges_[r.id] = HostRange{thread, t, 0, text(r.domain), text(r.name)};
  } else if ((r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    // The end record carries only the id: name, domain and thread come from the start.
    auto it = open_ranges_.find(r.id);
    if (it == open_ranges_.end()) return;
    HostRange range = std::move(it->second);
    open_ranges_.erase(it);
    range.end_ns = std::max(t, range.start_ns);
    out.ranges.push_back(std::move(range));
  }
}

void RecordNormaliser::add_event(const CUpti_ActivityCudaEvent2& r, RecordSet& out) {
  // Remembered before the timestamp check: event_id() needs the id even of an event whose
  // device timestamp CUPTI could not take.
  if (watchers_ > 0) event_by_correlation_[r.correlationId] = r.eventId;
  if (r.deviceTimestamp == 0) return;
  out.events.push_back(EventCompletion{r.eventId, r.streamId, to_monotonic(r.deviceTimestamp)});
}

void RecordNormaliser::add(const CUpti_Activity* record, RecordSet& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (r.start == 0 || r.end == 0) return;
      out.gpu.push_back(GpuWork{GpuWorkKind::kKernel, r.streamId, r.correlationId,
                                to_monotonic(r.start), to_monotonic(r.end),
                                r.name != nullptr ? r.name : "kernel"});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (r.start == 0 || r.end == 0) return;
      out.gpu.push_back(GpuWork{GpuWorkKind::kMemcpy, r.streamId, r.correlationId,
                                to_monotonic(r.start), to_monotonic(r.end),
                                memcpy_name(r.copyKind)});
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (r.start == 0 || r.end == 0) return;
      out.gpu.push_back(GpuWork{GpuWorkKind::kMemset, r.streamId, r.correlationId,
                                to_monotonic(r.start), to_monotonic(r.end), "memset"});
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), CUPTI_CB_DOMAIN_RUNTIME_API,
              out);
      return;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), CUPTI_CB_DOMAIN_DRIVER_API, out);
      return;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& r = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      if (r.type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) return;
      if (r.start == 0 || r.end == 0) return;
      out.stream_waits.push_back(
          StreamWaitCall{r.streamId, r.cudaEventId, to_monotonic(r.start), to_monotonic(r.end)});
      return;
    }
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
      add_event(*reinterpret_cast<const CUpti_ActivityCudaEvent2*>(record), out);
      return;
    case CUPTI_ACTIVITY_KIND_MARKER:
      add_marker(*reinterpret_cast<const CUpti_ActivityMarker2*>(record), out);
      return;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& r = *reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (watchers_ > 0 && r.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
        correlations_by_external_[r.externalId].push_back(r.correlationId);
      }
      return;
    }
    default:
      return;
  }
}

void RecordNormaliser::begin_watch() {
  ++watchers_;
}

void RecordNormaliser::end_watch() {
  if (watchers_ > 0 && --watchers_ == 0) {
    correlations_by_external_.clear();
    event_by_correlation_.clear();
  }
}

std::optional<uint32_t> RecordNormaliser::event_for_external_id(uint64_t external_id) const {
  auto it = correlations_by_external_.find(external_id);
  if (it == correlations_by_external_.end()) return std::nullopt;
  // One external id may cover several API calls; the one that recorded the event names it.
  for (uint32_t correlation : it->second) {
    auto ev = event_by_correlation_.find(correlation);
    if (ev != event_by_correlation_.end()) return ev->second;
  }
  return std::nullopt;
}

}  // namespace cupti

// ---------------------------------------------------------------------------------------------
// The loaded library

namespace {

// CUPTI's entry points, each typed from its declaration in cupti.h so a changed signature is a
// compile error here rather than a crash on the GPU machine.
struct CuptiApi {
  decltype(&cuptiGetResultString) get_result_string = nullptr;
  decltype(&cuptiGetCallbackName) get_callback_name = nullptr;
  decltype(&cuptiGetTimestamp) get_timestamp = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityEnableCudaEventDeviceTimestamps) enable_event_device_timestamps = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) get_next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) get_num_dropped_records = nullptr;
  decltype(&cuptiGetStreamIdEx) get_stream_id = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external_id = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external_id = nullptr;
};

template <typename Fn>
void bind(const DynamicLibrary& lib, const char* name, Fn& out) {
  out = lib.symbol<Fn>(name);
  if (out == nullptr) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("CUPTI library {} lacks {}: it is older than CUDA 13's CUPTI, which "
                            "commtool was built against",
                            lib.name(), name));
  }
}

CuptiApi bind_all(const DynamicLibrary& lib) {
  CuptiApi a;
  bind(lib, "cuptiGetResultString", a.get_result_string);
  bind(lib, "cuptiGetCallbackName", a.get_callback_name);
  bind(lib, "cuptiGetTimestamp", a.get_timestamp);
  bind(lib, "cuptiSetThreadIdType", a.set_thread_id_type);
  bind(lib, "cuptiActivityRegisterTimestampCallback", a.register_timestamp_callback);
  bind(lib, "cuptiActivityRegisterCallbacks", a.register_callbacks);
  bind(lib, "cuptiActivityEnable", a.enable);
  bind(lib, "cuptiActivityDisable", a.disable);
  bind(lib, "cuptiActivityEnableCudaEventDeviceTimestamps", a.enable_event_device_timestamps);
  bind(lib, "cuptiActivityFlushAll", a.flush_all);
  bind(lib, "cuptiActivityGetNextRecord", a.get_next_record);
  bind(lib, "cuptiActivityGetNumDroppedRecords", a.get_num_dropped_records);
  bind(lib, "cuptiGetStreamIdEx", a.get_stream_id);
  bind(lib, "cuptiActivityPushExternalCorrelationId", a.push_external_id);
  bind(lib, "cuptiActivityPopExternalCorrelationId", a.pop_external_id);
  return a;
}

// $COMMTOOL_CUPTI_LIBRARY alone when set (the user chose); else the toolkit's CUPTI 13 by soname
// and in the toolkit's directories, then an unversioned libcupti.so in the same places.
std::vector<std::string> cupti_candidates() {
  if (const char* chosen = std::getenv("COMMTOOL_CUPTI_LIBRARY"); chosen && *chosen) {
    return {chosen};
  }
  std::vector<std::string> out;
  for (const char* soname : {"libcupti.so.13", "libcupti.so"}) {
    for (std::string& c : cuda_library_candidates(soname))
      out.push_back(std::move(c));
    if (const char* home = std::getenv("CUDA_HOME")) {
      out.push_back(std::string(home) + "/extras/CUPTI/lib64/" + soname);
    }
  }
  return out;
}

// RTLD_NODELETE: CUPTI keeps threads and hooks in the driver that outlive any handle, and a
// process that used it must never unmap it.
DynamicLibrary load_cupti() {
  const std::vector<std::string> names = cupti_candidates();
  DynamicLibrary lib(names, RTLD_NODELETE);
  if (!lib) {
    std::string tried;
    for (const auto& n : names)
      tried += (tried.empty() ? "" : ", ") + n;
    throw Error(ExitCode::kEnvironment,
                fmt::format("cannot load CUPTI (tried {}; last error: {}); install the CUDA "
                            "toolkit's CUPTI or set COMMTOOL_CUPTI_LIBRARY",
                            tried, lib.error()));
  }
  return lib;
}

uint64_t CUPTIAPI monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// The kinds traced; pause() and resume() switch exactly these. CONCURRENT_KERNEL rather than
// KERNEL: the latter serialises kernels, which would change what is measured.
constexpr std::array kTracedKinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                     CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET,
                                     CUPTI_ACTIVITY_KIND_RUNTIME,
                                     CUPTI_ACTIVITY_KIND_DRIVER,
                                     CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                     CUPTI_ACTIVITY_KIND_CUDA_EVENT,
                                     CUPTI_ACTIVITY_KIND_MARKER,
                                     CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

// A few MiB per buffer: large enough that a collective loop fills few of them, small enough
// that CUPTI's per-thread buffers stay cheap. CUPTI requires 8-byte alignment.
constexpr size_t kBufferBytes = size_t{4} << 20;
constexpr size_t kBufferAlign = 8;

// Flushes deliver completed buffers only (flag 0), never CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: with
// CUDA-event device timestamps on, the third or fourth forced flush in a process made the next
// cudaEventRecord deadlock inside CUPTI (it blocked on a driver rwlock in CUPTI's event-record
// callback; CUPTI 13.0, driver 580.159, H200; pre-allocating more device buffers or pinned host
// buffers did not help). Callers synchronise before take() and event_id() synchronises its
// stream, so the records wanted are complete and a plain flush delivers them.
constexpr uint32_t kFlushCompleted = 0;

// External correlation ids of event_id() carry this tag in their top bytes ("comm"), so they
// cannot be mistaken for ids another CUSTOM0 user in the process pushes.
constexpr uint64_t kExternalIdTag = 0x636f6d6dULL << 32;

// ---------------------------------------------------------------------------------------------
// Process-wide state reached from CUPTI's C callbacks

// CUPTI as loaded and set up for this process. Set up by the first tracer and kept for the
// process's life, since CUPTI's registrations (thread ids, timestamp source, buffer callbacks)
// are process-wide anyway; later tracers only enable and disable kinds.
struct Cupti {
  DynamicLibrary library;
  CuptiApi api;
  std::string path;
  bool monotonic_callback = false;  // else clock_offset_ns is in use
  int64_t clock_offset_ns = 0;

  // CUPTI's own words for a result code.
  std::string words(CUptiResult rc) const {
    const char* s = nullptr;
    if (api.get_result_string(rc, &s) != CUPTI_SUCCESS || s == nullptr) {
      return fmt::format("CUPTI error {}", static_cast<int>(rc));
    }
    return s;
  }
  void check(CUptiResult rc, const char* call) const {
    if (rc == CUPTI_SUCCESS) return;
    throw Error(ExitCode::kEnvironment,
                fmt::format("{} failed: {} (CUPTI {})", call, words(rc), path));
  }
};

// One tracer's records. Outside CuptiTracer's private scope so CUPTI's C callbacks can reach it
// through the one process-wide pointer.
struct Session {
  explicit Session(const Cupti& c)
      : cupti(c),
        normaliser(
            [get = c.api.get_callback_name](CUpti_CallbackDomain domain, uint32_t cbid) {
              const char* name = nullptr;
              return get(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
            },
            c.clock_offset_ns) {}

  const Cupti& cupti;
  bool kinds_enabled = false;
  uint64_t next_external_id = 0;
  // Guarded by the global mutex: filled from CUPTI's completion callback.
  cupti::RecordNormaliser normaliser;
  RecordSet records;

  void consume(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_bytes);
  void set_kinds(bool on);
};

struct Global {
  std::mutex mutex;        // guards the members below and the records `state` gathers
  Cupti* cupti = nullptr;  // set up once, never freed (CUPTI is never unloaded either)
  Session* state = nullptr;
  bool claimed = false;  // a tracer exists (its state may not be published yet)
};

// Never destroyed: CUPTI may deliver a last buffer from its atexit handler, after static
// destructors have run.
Global& global() {
  static Global& g = *new Global;
  return g;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // no buffer: CUPTI counts the drops
  *max_records = 0;                               // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid_bytes) {
  {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mutex);
    if (g.state != nullptr) g.state->consume(context, stream_id, buffer, valid_bytes);
  }
  std::free(buffer);
}

// Runs on CUPTI's thread or inside a flush, under the global mutex; must not throw into C.
void Session::consume(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_bytes) {
  try {
    CUpti_Activity* record = nullptr;
    while (cupti.api.get_next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      normaliser.add(record, records);
    }
  } catch (...) {
    // Out of memory while normalising: the rest of this buffer is lost, and said to be.
    records.dropped_records += 1;
  }
  // Buffers are global since CUDA 6, so context and stream are null here and this reads (and
  // resets) the global queue's count.
  size_t dropped = 0;
  if (cupti.api.get_num_dropped_records(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    records.dropped_records += dropped;
  }
}

void Session::set_kinds(bool on) {
  for (CUpti_ActivityKind kind : kTracedKinds) {
    const CUptiResult rc = on ? cupti.api.enable(kind) : cupti.api.disable(kind);
    if (on) {
      cupti.check(rc, fmt::format("cuptiActivityEnable(kind {})", static_cast<int>(kind)).c_str());
    }
  }
  kinds_enabled = on;
}

// CUPTI's clock minus CLOCK_MONOTONIC, from the reading bracketed most tightly by two monotonic
// readings: the narrower the bracket, the less scheduling noise in the midpoint.
int64_t measure_clock_offset(const Cupti& c) {
  constexpr int kSamples = 20;
  uint64_t best_width = std::numeric_limits<uint64_t>::max();
  int64_t offset = 0;
  for (int i = 0; i < kSamples; ++i) {
    const uint64_t before = monotonic_ns();
    uint64_t cupti_ns = 0;
    c.check(c.api.get_timestamp(&cupti_ns), "cuptiGetTimestamp");
    const uint64_t after = monotonic_ns();
    if (after - before < best_width) {
      best_width = after - before;
      offset = static_cast<int64_t>(cupti_ns) - static_cast<int64_t>(before + best_width / 2);
    }
  }
  return offset;
}

// Loads CUPTI and sets it up in the order its documentation asks: thread ids and the timestamp
// source before any kind is enabled, buffer callbacks before records can be produced.
std::unique_ptr<Cupti> set_up_cupti() {
  auto c = std::make_unique<Cupti>();
  c->library = load_cupti();
  c->api = bind_all(c->library);
  c->path = c->library.path_of(reinterpret_cast<void*>(c->api.get_result_string));
  c->check(c->api.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM),
           "cuptiSetThreadIdType(SYSTEM)");
  c->monotonic_callback = c->api.register_timestamp_callback(monotonic_ns) == CUPTI_SUCCESS;
  if (!c->monotonic_callback) c->clock_offset_ns = measure_clock_offset(*c);
  c->check(c->api.register_callbacks(buffer_requested, buffer_completed),
           "cuptiActivityRegisterCallbacks");
  c->check(c->api.enable_event_device_timestamps(1),
           "cuptiActivityEnableCudaEventDeviceTimestamps");
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CuptiTracer

struct CuptiTracer::State : Session {
  using Session::Session;
};

CuptiTracer::CuptiTracer() {
  Global& g = global();
  Cupti* cupti = nullptr;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    if (g.claimed) {
      throw Error(ExitCode::kEnvironment,
                  "a second CuptiTracer was created while one exists: CUPTI's buffer callbacks "
                  "are process-wide, so one tracer per process");
    }
    g.claimed = true;
    cupti = g.cupti;
  }
  try {
    // Only the claiming thread gets here, so the set-up cannot race another tracer's.
    if (cupti == nullptr) {
      std::unique_ptr<Cupti> fresh = set_up_cupti();
      std::lock_guard<std::mutex> lock(g.mutex);
      cupti = g.cupti = fresh.release();
    }
    auto state = std::make_unique<State>(*cupti);
    {
      std::lock_guard<std::mutex> lock(g.mutex);
      g.state = state.get();
    }
    state_ = std::move(state);
    state_->set_kinds(true);
  } catch (...) {
    if (state_) state_->set_kinds(false);
    std::lock_guard<std::mutex> lock(g.mutex);
    g.state = nullptr;
    g.claimed = false;
    throw;
  }
}

CuptiTracer::~CuptiTracer() {
  Global& g = global();
  try {
    state_->set_kinds(false);
    {
      // Unpublished before the flush, so the buffers it delivers are freed, not normalised.
      std::lock_guard<std::mutex> lock(g.mutex);
      g.state = nullptr;
    }
    state_->cupti.api.flush_all(kFlushCompleted);
  } catch (...) {
    // A destructor has no one to report to; CUPTI stays loaded (NODELETE) and disabled.
  }
  std::lock_guard<std::mutex> lock(g.mutex);
  g.state = nullptr;
  g.claimed = false;
}

uint32_t CuptiTracer::stream_id(cudaStream_t stream) {
  // cudaFree(nullptr) makes the current device's primary context current on this thread if no
  // runtime call has yet; the driver's cuCtxGetCurrent then names it. Taken through the
  // runtime's entry-point query so it is the very driver the runtime uses, with no second
  // dlopen of libcuda.
  CUDA_TRY(cudaFree(nullptr));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUDA_TRY(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 4000, cudaEnableDefault, &found));
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    throw Error(ExitCode::kEnvironment, "the CUDA driver does not provide cuCtxGetCurrent");
  }
  CUcontext context = nullptr;
  if (reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(fn)(&context) != CUDA_SUCCESS) {
    throw Error(ExitCode::kEnvironment, "cuCtxGetCurrent failed: no current CUDA context");
  }
  uint32_t id = 0;
  const Cupti& c = state_->cupti;
  c.check(c.api.get_stream_id(context, reinterpret_cast<CUstream>(stream),
                              /*perThreadStream=*/0, &id),
          "cuptiGetStreamIdEx (is the stream's device the current one?)");
  return id;
}

uint32_t CuptiTracer::event_id(cudaEvent_t event, cudaStream_t stream) {
  Global& g = global();
  const Cupti& c = state_->cupti;
  uint64_t external = 0;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    external = kExternalIdTag | ++state_->next_external_id;
    state_->normaliser.begin_watch();
  }
  std::optional<uint32_t> id;
  try {
    c.check(c.api.push_external_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, external),
            "cuptiActivityPushExternalCorrelationId");
    const cudaError_t recorded = cudaEventRecord(event, stream);
    uint64_t popped = 0;
    c.check(c.api.pop_external_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped),
            "cuptiActivityPopExternalCorrelationId");
    CUDA_TRY(recorded);
    // Bounded: only this event record is waited for (the caller's stream carries nothing else).
    CUDA_TRY(cudaStreamSynchronize(stream));
    c.check(c.api.flush_all(kFlushCompleted), "cuptiActivityFlushAll");
  } catch (...) {
    std::lock_guard<std::mutex> lock(g.mutex);
    state_->normaliser.end_watch();
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    id = state_->normaliser.event_for_external_id(external);
    state_->normaliser.end_watch();
  }
  if (!id) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("CUPTI gave no CUDA_EVENT record for an event recorded under "
                            "external correlation id {:#x}{}",
                            external, state_->kinds_enabled ? "" : " (tracing is paused)"));
  }
  return *id;
}

OperationMark CuptiTracer::mark_ids(const HarnessHandles& h) {
  OperationMark ids;
  ids.thread = this_thread_id();
  ids.producer_stream = stream_id(h.producer);
  ids.nccl_stream = stream_id(h.nccl);
  ids.consumer_stream = stream_id(h.consumer);
  ids.input_ready_event = event_id(h.input_ready, h.producer);
  ids.end_event = event_id(h.end, h.nccl);
  return ids;
}

RecordSet CuptiTracer::take() {
  const Cupti& c = state_->cupti;
  c.check(c.api.flush_all(kFlushCompleted), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(global().mutex);
  RecordSet out = std::move(state_->records);
  state_->records = RecordSet{};
  return out;
}

void CuptiTracer::pause() {
  state_->set_kinds(false);
}

void CuptiTracer::resume() {
  state_->set_kinds(true);
}

uint32_t CuptiTracer::this_thread_id() {
  return static_cast<uint32_t>(syscall(SYS_gettid));
}

std::string CuptiTracer::library_path() {
  {
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mutex);
    if (g.cupti != nullptr) return g.cupti->path;
  }
  // Loading it (NODELETE, as the tracer will) is the only sure way to know which file the
  // loader picks by soname; NVTX needs a path it can dlopen to the same file.
  DynamicLibrary lib = load_cupti();
  return lib.path_of(lib.symbol<void*>("cuptiGetResultString"));
}

std::string CuptiTracer::clock_note() const {
  if (state_->cupti.monotonic_callback) return "CLOCK_MONOTONIC via the timestamp callback";
  return fmt::format("offset {} ns measured at start", state_->cupti.clock_offset_ns);
}

}  // namespace commtool::tracing
