// CUPTI as loaded with dlopen and set up for this process: its entry points, each typed from
// cupti.h, and the process-wide registrations made once (system thread ids, the timestamp
// source, the buffer callbacks). Apart from cupti_tracer.cpp, which owns the activity buffers,
// their flushing and the tracer's state, so that finding and binding the library reads on its
// own. Internal to tracing/cupti/: nothing above it sees a CUPTI type.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <memory>
#include <string>

#include "probes/base/dynlib.hpp"

namespace commtool::tracing::cupti {

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
  std::string words(CUptiResult rc) const;
  // Throws Error(kEnvironment) naming `call`, CUPTI's words and the library unless rc succeeded.
  void check(CUptiResult rc, const char* call) const;
};

// Loads CUPTI: $COMMTOOL_CUPTI_LIBRARY alone when set, else the toolkit's CUPTI 13 (RTLD_NODELETE:
// CUPTI must never be unmapped). Throws Error(kEnvironment) naming every file tried.
DynamicLibrary load_cupti();

// Loads CUPTI, binds every entry point and sets it up in the order its documentation asks:
// system thread ids and the timestamp source (CLOCK_MONOTONIC through the timestamp callback,
// else a measured offset) before any kind is enabled, the buffer callbacks before records can
// be produced, then CUDA-event device timestamps. Throws Error(kEnvironment) on any failure.
std::unique_ptr<Cupti> set_up_cupti(CUpti_BuffersCallbackRequestFunc buffer_requested,
                                    CUpti_BuffersCallbackCompleteFunc buffer_completed);

}  // namespace commtool::tracing::cupti
