// CuptiTracer (tracing/cupti/cupti_tracer.hpp): the activity kinds it switches, the buffers CUPTI
// fills and the flushes that hand them over, the one process-wide session CUPTI's C callbacks
// reach, and the ids of streams and events as CUPTI's records carry them. Loading and setting up
// CUPTI is cupti_library.cpp's; turning its records into plain structs is normalise.cpp's.
#include "tracing/cupti/cupti_tracer.hpp"

#include <cudaTypedefs.h>  // PFN_cuCtxGetCurrent_v4000
#include <cupti.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/dynlib.hpp"
#include "probes/base/error.hpp"
#include "tracing/cupti/activity_kind_names.hpp"
#include "tracing/cupti/cupti_library.hpp"
#include "tracing/cupti/normalise.hpp"

namespace commtool::tracing {

namespace {

using cupti::Cupti;
using cupti::load_cupti;
using cupti::set_up_cupti;

// The kinds traced; pause() and resume() switch exactly these. CUDA_EVENT, RUNTIME,
// SYNCHRONIZATION and EXTERNAL_CORRELATION are always on: event_id() finds the harness's events
// through them (with RUNTIME or SYNCHRONIZATION off CUPTI gave no CUDA_EVENT record for the
// event: H100, driver 580, CUPTI 13, 2026-12-05). The others can be left off by
// COMMTOOL_CUPTI_KINDS_OFF, to measure what each costs; the split needs all but memset and
// marker (kernel and driver for NCCL's kernels, memcpy for its copies), and marker gives the
// Perfetto trace NCCL's NVTX ranges.
constexpr std::array kAlwaysTraced = {CUPTI_ACTIVITY_KIND_CUDA_EVENT, CUPTI_ACTIVITY_KIND_RUNTIME,
                                      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
using cupti::named_activity_kind;
using cupti::NamedActivityKind;
constexpr NamedActivityKind kOptionalKinds[] = {
    named_activity_kind("kernel"), named_activity_kind("memcpy"), named_activity_kind("memset"),
    named_activity_kind("driver"), named_activity_kind("marker")};

std::vector<CUpti_ActivityKind> traced_kinds(const std::vector<std::string>& off) {
  std::vector<CUpti_ActivityKind> kinds(kAlwaysTraced.begin(), kAlwaysTraced.end());
  for (const NamedActivityKind& k : kOptionalKinds) {
    if (std::find(off.begin(), off.end(), k.name) == off.end()) kinds.push_back(k.kind);
  }
  return kinds;
}

std::vector<std::string> kinds_off_from_environment() {
  const char* value = std::getenv(kCuptiKindsOffEnv);
  return value != nullptr ? parse_cupti_kinds_off(value) : std::vector<std::string>{};
}

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
  std::vector<std::string> kinds_off = kinds_off_from_environment();
  std::vector<CUpti_ActivityKind> kinds = traced_kinds(kinds_off);
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
  for (CUpti_ActivityKind kind : kinds) {
    const CUptiResult rc = on ? cupti.api.enable(kind) : cupti.api.disable(kind);
    if (on) {
      cupti.check(rc, fmt::format("cuptiActivityEnable(kind {})", static_cast<int>(kind)).c_str());
    }
  }
  kinds_enabled = on;
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
      std::unique_ptr<Cupti> fresh = set_up_cupti(buffer_requested, buffer_completed);
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
  std::string note =
      state_->cupti.monotonic_callback
          ? "CLOCK_MONOTONIC via the timestamp callback"
          : fmt::format("offset {} ns measured at start", state_->cupti.clock_offset_ns);
  if (!state_->kinds_off.empty()) {
    note += fmt::format(
        "; CUPTI kinds left off by {}: {} (a measurement of CUPTI's cost; the split may lack "
        "what they record)",
        kCuptiKindsOffEnv, fmt::join(state_->kinds_off, ", "));
  }
  return note;
}

std::vector<std::string> parse_cupti_kinds_off(std::string_view list) {
  std::vector<std::string> names;
  std::string accepted;
  for (const NamedActivityKind& k : kOptionalKinds)
    accepted += (accepted.empty() ? "" : ", ") + std::string(k.name);
  for (const std::string_view item : cupti::comma_items(list)) {
    const std::string name(item);
    const bool known = std::any_of(std::begin(kOptionalKinds), std::end(kOptionalKinds),
                                   [&](const NamedActivityKind& k) { return name == k.name; });
    if (!known) {
      throw usage_error(fmt::format(
          "{}={}: \"{}\" is not a CUPTI kind that can be left off; accepted: {} (CUDA events, "
          "the runtime API, synchronization and external correlation stay on: the harness finds "
          "its events through them)",
          kCuptiKindsOffEnv, excerpt(std::string(list)), excerpt(name), accepted));
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

}  // namespace commtool::tracing
