// Finding, binding and setting up CUPTI for this process (tracing/cupti/cupti_library.hpp).
// Apart from cupti_tracer.cpp, which owns the activity buffers, their flushing and the tracer's
// state: this file only gets CUPTI loaded, its entry points checked and its clock joined to
// CLOCK_MONOTONIC, once per process.
#include "tracing/cupti/cupti_library.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <ctime>
#include <limits>
#include <utility>
#include <vector>

#include "probes/base/error.hpp"

namespace commtool::tracing::cupti {

namespace {

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

uint64_t CUPTIAPI monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
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

}  // namespace

std::string Cupti::words(CUptiResult rc) const {
  const char* s = nullptr;
  if (api.get_result_string(rc, &s) != CUPTI_SUCCESS || s == nullptr) {
    return fmt::format("CUPTI error {}", static_cast<int>(rc));
  }
  return s;
}

void Cupti::check(CUptiResult rc, const char* call) const {
  if (rc == CUPTI_SUCCESS) return;
  throw Error(ExitCode::kEnvironment,
              fmt::format("{} failed: {} (CUPTI {})", call, words(rc), path));
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

// Loads CUPTI and sets it up in the order its documentation asks: thread ids and the timestamp
// source before any kind is enabled, buffer callbacks before records can be produced.
std::unique_ptr<Cupti> set_up_cupti(CUpti_BuffersCallbackRequestFunc buffer_requested,
                                    CUpti_BuffersCallbackCompleteFunc buffer_completed) {
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

}  // namespace commtool::tracing::cupti
