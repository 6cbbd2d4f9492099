// The names commtool gives CUPTI's activity kinds, in one table for both places a user spells
// them: COMMTOOL_CUPTI_KINDS_OFF (trace's CUPTI layer, tracing/cupti/cupti_tracer.cpp) and
// COMMTOOL_CUPTI_KINDS (record --cupti's, tracing/profiler/cupti_mode.cpp). Header-only, cupti.h
// only: the profiler plugin loads CUPTI itself and links nothing of tracing/.
#pragma once

#include <cupti.h>

#include <string_view>
#include <vector>

namespace commtool::tracing::cupti {

struct NamedActivityKind {
  std::string_view name;
  CUpti_ActivityKind kind;
};

// CONCURRENT_KERNEL rather than KERNEL: the latter serialises kernels, which would change what
// is measured.
inline constexpr NamedActivityKind kActivityKindNames[] = {
    {"kernel", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},
    {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
    {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"driver", CUPTI_ACTIVITY_KIND_DRIVER},
    {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
    {"marker", CUPTI_ACTIVITY_KIND_MARKER},
    {"event", CUPTI_ACTIVITY_KIND_CUDA_EVENT},
};

// The entry of that name; a name not in the table does not compile.
consteval NamedActivityKind named_activity_kind(std::string_view name) {
  for (const NamedActivityKind& k : kActivityKindNames) {
    if (k.name == name) return k;
  }
  throw "named_activity_kind: no CUPTI activity kind has this name";
}

// The names of a comma list as the two environment variables give them ("kernel,sync"), empty
// items left out.
inline std::vector<std::string_view> comma_items(std::string_view list) {
  std::vector<std::string_view> items;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (!item.empty()) items.push_back(item);
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  return items;
}

}  // namespace commtool::tracing::cupti
