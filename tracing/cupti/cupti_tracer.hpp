// The CUPTI layer: owns CUPTI's activity buffers and their flushing, and turns raw activity
// records into the plain structs of tracing/cupti/records.hpp. Nothing above this file sees a CUPTI
// type. CUPTI is loaded with dlopen (libcupti.so.13 from the CUDA toolkit, or
// $COMMTOOL_CUPTI_LIBRARY), so commands that do not trace run where CUPTI is absent.
//
// Defined in three files by concern: cupti_tracer.cpp (the buffers, flushing and ids),
// cupti_library.cpp (loading and setting up CUPTI) and normalise.cpp (the records).
//
// One timeline: CUPTI is told to take its timestamps from CLOCK_MONOTONIC
// (cuptiActivityRegisterTimestampCallback), the clock std::chrono::steady_clock reads and the
// NCCL profiler plugin writes, so host marks, CUPTI records and plugin records line up without
// an offset. Where that registration is refused, an offset is measured instead (the closest of
// several bracketed cuptiGetTimestamp readings) and applied to every record.
//
// Sharp edges: one tracer per process (CUPTI's buffer callbacks are process-wide); create it
// before the CUDA work to be traced is issued and, for NVTX ranges, before NCCL is loaded
// (library_path() must be in NVTX_INJECTION64_PATH by then).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tracing/cupti/records.hpp"

namespace commtool::tracing {

// The streams and events of a harness that issues NCCL work the way tracing/cupti/records.hpp's
// OperationMark describes it (trace's collectives, diagnose ep's exchanges).
struct HarnessHandles {
  cudaStream_t producer = nullptr, nccl = nullptr, consumer = nullptr;
  cudaEvent_t input_ready = nullptr;  // recorded on the producer stream
  cudaEvent_t end = nullptr;          // recorded on the NCCL stream
};

// For measuring what each CUPTI kind costs (scripts/bench-cupti.sh): a comma list of kinds to
// leave off (kernel, memcpy, memset, runtime, driver, sync, marker). The run's clock note says
// so, since the split may then lack what they record.
inline constexpr const char* kCuptiKindsOffEnv = "COMMTOOL_CUPTI_KINDS_OFF";
// The names of such a list, each once; throws Error(kUsage) naming an unknown one and the
// accepted names.
std::vector<std::string> parse_cupti_kinds_off(std::string_view list);

class CuptiTracer {
 public:
  // Loads CUPTI, sets CLOCK_MONOTONIC timestamps and system thread ids (gettid), registers the
  // buffer callbacks and enables CONCURRENT_KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER,
  // SYNCHRONIZATION, CUDA_EVENT (with device timestamps), MARKER and EXTERNAL_CORRELATION.
  // Throws Error(kEnvironment) naming the library tried or the CUPTI call that failed, with
  // CUPTI's own words (cuptiGetResultString).
  CuptiTracer();
  ~CuptiTracer();  // disables every kind, flushes and discards, unloads nothing (NODELETE)
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // The id CUPTI's records give `stream` (cuptiGetStreamIdEx). The stream's device must be
  // current.
  uint32_t stream_id(cudaStream_t stream);

  // The id CUPTI's records give `event`: records it once on `stream` under an external
  // correlation id, synchronises that stream (bounded: a fresh event record cannot hang), flushes
  // and looks the id up. Call once per event, before the measured work.
  uint32_t event_id(cudaEvent_t event, cudaStream_t stream);

  // CUPTI's ids of a harness's streams and events and of the calling thread, to stamp on each
  // of its operation marks (seq and the host times left for the harness). Call once, before
  // the traced work: it records each event once (event_id).
  OperationMark mark_ids(const HarnessHandles& harness);

  // Flushes the completed buffers and hands over the records gathered since the last take,
  // normalised, with dropped_records summed from cuptiActivityGetNumDroppedRecords. Synchronise
  // the traced work first: the flush is not the forced kind, which deadlocked CUPTI 13.0 after a
  // few uses (kFlushCompleted in the .cpp says how). `operations` is left empty: the harness
  // fills it.
  RecordSet take();

  // Switches recording off and on (cuptiActivityDisable/Enable of the same kinds), for the
  // untraced pass of a run that also traces.
  void pause();
  void resume();

  // The thread id CUPTI's API records carry for the calling thread (gettid).
  static uint32_t this_thread_id();

  // Path of the CUPTI library loaded; NVTX_INJECTION64_PATH takes it.
  static std::string library_path();

  // How host and CUPTI clocks were joined: "CLOCK_MONOTONIC via the timestamp callback" or
  // "offset <n> ns measured at start".
  std::string clock_note() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace commtool::tracing
