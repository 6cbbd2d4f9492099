// What both of the profiler plugin's modes (trace_mode.cpp, record_mode.cpp and its sink) use:
// clocks, NCCL's possibly-null strings, and the tests' overrides of record mode's bounds. The
// launcher of `commtool record` reads its clocks here too, so that record.json and the plugin's
// lines are stamped the same way. No NCCL types here, so it may be included before or after
// nccl_profiler_v5.hpp.
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace commtool::nccl_profiler {

// Set by `record --cupti` for the job: the CUPTI library the plugin's CUPTI layer loads when the
// job has not loaded one (cupti_mode.cpp). trace's own CUPTI layer reads the same variable.
inline constexpr const char* kCuptiLibraryEnv = "COMMTOOL_CUPTI_LIBRARY";

inline int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t monotonic_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}

// NCCL's event descriptions may leave a name null.
inline std::string text(const char* s) {
  return s != nullptr ? s : "";
}

// The positive whole number in environment variable `name`, else `fallback` (unset, empty or
// not such a number). Tests lower record mode's bounds this way.
inline size_t size_from_env(const char* name, size_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(value, &end, 10);
  return *end == '\0' && n > 0 ? static_cast<size_t>(n) : fallback;
}

}  // namespace commtool::nccl_profiler
