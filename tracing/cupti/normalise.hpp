// Turns raw CUPTI activity records into the plain structs of tracing/cupti/records.hpp. Kept apart
// from CuptiTracer (which owns the loaded library, its buffers and callbacks) so that it never
// calls CUPTI: the unit tests build records in memory and feed them here with no CUPTI loaded.
//
// Which record struct each kind carries is fixed by the CUPTI 13 headers
// (cupti_activity.h, CUpti_ActivityKind):
//   KERNEL, CONCURRENT_KERNEL  CUpti_ActivityKernel10      -> GpuWork kKernel
//   MEMCPY                     CUpti_ActivityMemcpy6       -> GpuWork kMemcpy
//   MEMSET                     CUpti_ActivityMemset4       -> GpuWork kMemset
//   RUNTIME, DRIVER            CUpti_ActivityAPI           -> ApiCall
//   SYNCHRONIZATION            CUpti_ActivitySynchronization2 (stream-wait-event only)
//                                                          -> StreamWaitCall
//   CUDA_EVENT                 CUpti_ActivityCudaEvent2    -> EventCompletion
//   MARKER                     CUpti_ActivityMarker2       -> HostRange (start/end paired by id)
//   EXTERNAL_CORRELATION       CUpti_ActivityExternalCorrelation (CuptiTracer::event_id only)
// Every other kind is ignored.
//
// Not thread-safe: CuptiTracer calls it under its lock.
#pragma once

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracing/cupti/records.hpp"

namespace commtool::tracing::cupti {

// CUPTI's name for an API callback id (cuptiGetCallbackName), or nullptr when it has none.
// Injected so the tests need no CUPTI; each (domain, cbid) is asked once and cached.
using ApiNameLookup = std::function<const char*(CUpti_CallbackDomain domain, uint32_t cbid)>;

// "cudaMemcpyAsync_v3020" -> "cudaMemcpyAsync": CUPTI's runtime names carry the version that
// introduced the entry point, which the user never typed. Driver suffixes such as "_v2" are
// part of the real symbol (cuMemAlloc_v2) and stay.
std::string api_display_name(const char* cupti_name);

// "memcpy HtoD", "memcpy DtoD", ...: the copy direction is what a reader of a trace wants.
std::string memcpy_name(uint8_t copy_kind);

class RecordNormaliser {
 public:
  // clock_offset_ns: CUPTI's clock minus CLOCK_MONOTONIC, subtracted from every timestamp; 0
  // when CUPTI already reads CLOCK_MONOTONIC through the timestamp callback.
  explicit RecordNormaliser(ApiNameLookup api_name, int64_t clock_offset_ns = 0);

  // Appends what `record` says to `out`. Kinds not listed above, stream-synchronisation records
  // other than stream-wait-event, records with a zero start or end (CUPTI's "no timing"), and
  // CUDA_EVENT records without a device timestamp add nothing.
  void add(const CUpti_Activity* record, RecordSet& out);

  // While at least one watch is open, remembers which correlation ids each CUSTOM0 external id
  // was attached to and which event id each CUDA_EVENT record names, so event_id() can join
  // them. Bounded: outside a watch nothing is kept, so a long trace costs no memory here.
  void begin_watch();
  void end_watch();

  // The event id of the CUDA_EVENT record whose API call ran under `external_id`, once both
  // records have been added during a watch.
  std::optional<uint32_t> event_for_external_id(uint64_t external_id) const;

  // NVTX ranges whose start has been seen and whose end has not (yet).
  size_t open_ranges() const { return open_ranges_.size(); }

 private:
  uint64_t to_monotonic(uint64_t cupti_ns) const;
  const std::string& api_name(CUpti_CallbackDomain domain, uint32_t cbid);
  void add_api(const CUpti_ActivityAPI& r, CUpti_CallbackDomain domain, RecordSet& out);
  void add_marker(const CUpti_ActivityMarker2& r, RecordSet& out);
  void add_event(const CUpti_ActivityCudaEvent2& r, RecordSet& out);

  ApiNameLookup lookup_;
  int64_t clock_offset_ns_ = 0;
  std::unordered_map<uint64_t, std::string> api_names_;  // (domain << 32 | cbid) -> name
  std::unordered_map<uint32_t, HostRange> open_ranges_;  // marker id -> range awaiting its end
  int watchers_ = 0;
  std::unordered_map<uint64_t, std::vector<uint32_t>> correlations_by_external_;
  std::unordered_map<uint32_t, uint32_t> event_by_correlation_;
};

}  // namespace commtool::tracing::cupti
