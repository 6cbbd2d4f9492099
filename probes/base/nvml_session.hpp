// NVML, loaded with dlopen and started, for every part of commtool that asks it something
// (topo's names and NVLinks, doctor's error counters, --version's driver). The build machine
// has no nvml.h, so the few declarations every caller needs are here; each caller declares the
// entry points it uses beside its own code. Layouts are those of NVML's public header since
// driver R450. A machine without NVML, or whose NVML does not start, is a fact to report: the
// session then says why, in words the callers print unchanged.
#pragma once

#include <string>

#include "probes/base/dynlib.hpp"

namespace commtool::nvml {

using Return = int;                             // nvmlReturn_t
using Device = struct nvmlDevice_st*;           // nvmlDevice_t
inline constexpr Return kSuccess = 0;           // NVML_SUCCESS
inline constexpr Return kInsufficientSize = 7;  // NVML_ERROR_INSUFFICIENT_SIZE
inline constexpr unsigned kMaxNvLinks = 18;     // NVML_NVLINK_MAX_LINKS
inline constexpr const char* kLibrary = "libnvidia-ml.so.1";

class Session {
 public:
  // Loads `library` and calls nvmlInit_v2. started() says whether both worked; why_not() why
  // not: "cannot load libnvidia-ml.so.1 (<dlerror>)", "<library> lacks nvmlInit_v2 (a driver
  // older than R450?)", "nvmlInit failed: <NVML's words>".
  explicit Session(const std::string& library = kLibrary);
  ~Session();  // nvmlShutdown, when started
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool started() const { return started_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& library() const { return lib_.name(); }

  // The entry point as a function pointer of type Fn, nullptr when this driver lacks it.
  template <typename Fn>
  Fn symbol(const char* name) const {
    return lib_.symbol<Fn>(name);
  }
  // NVML's words for `r` (nvmlErrorString), or "NVML error N" without it.
  std::string why(Return r) const;
  // The GPU at `bdf` ("0000:3b:00.0"), through nvmlDeviceGetHandleByPciBusId_v2; kSuccess or
  // NVML's answer (its words through why()).
  Return device(const std::string& bdf, Device* out) const;

 private:
  DynamicLibrary lib_;
  bool started_ = false;
  std::string why_not_;
  Return (*shutdown_)() = nullptr;
  const char* (*error_string_)(Return) = nullptr;
  Return (*by_bus_id_)(const char*, Device*) = nullptr;
};

}  // namespace commtool::nvml
