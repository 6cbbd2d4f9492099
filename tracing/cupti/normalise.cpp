// RecordNormaliser (tracing/cupti/normalise.hpp): raw CUPTI activity records into the plain
// structs of tracing/cupti/records.hpp. Apart from cupti_tracer.cpp because it never calls
// CUPTI: only CUPTI's headers, so the unit tests feed it records built in memory.
#include "tracing/cupti/normalise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace commtool::tracing::cupti {

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

}  // namespace commtool::tracing::cupti
