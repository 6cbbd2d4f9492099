#include "probes/health/gpu_counters.hpp"

#include <fmt/format.h>

#include "probes/base/dynlib.hpp"

namespace commtool::health {

namespace {

// --- NVML's public API as we rely on it (nvml.h, stable since R450; the build machine has no
// nvml.h, so the few declarations are here) ---
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr unsigned kMaxNvLinks = 18;                                    // NVML_NVLINK_MAX_LINKS
enum : int { kCorrected = 0, kUncorrected = 1 };                        // nvmlMemoryErrorType_t
enum : int { kVolatile = 0, kAggregate = 1 };                           // nvmlEccCounterType_t
enum : int { kRetireSbe = 0, kRetireDbe = 1 };                          // nvmlPageRetirementCause_t
enum : int { kReplay = 0, kRecovery = 1, kCrcFlit = 2, kCrcData = 3 };  // nvmlNvLinkErrorCounter_t

// nvmlGpuFabricInfo_t, the first version (R535; the call is kept for it in later drivers).
struct FabricInfo {
  unsigned char cluster_uuid[16];
  nvmlReturn_t status;
  unsigned clique_id;
  unsigned char state;
};

struct Nvml {
  explicit Nvml(const std::string& library) : lib({library}) {}
  DynamicLibrary lib;
  template <class Fn>
  Fn get(const char* name) const {
    return lib.symbol<Fn>(name);
  }
  nvmlReturn_t (*init)() = get<decltype(init)>("nvmlInit_v2");
  nvmlReturn_t (*shutdown)() = get<decltype(shutdown)>("nvmlShutdown");
  const char* (*error_string)(nvmlReturn_t) = get<decltype(error_string)>("nvmlErrorString");
  nvmlReturn_t (*by_bus_id)(const char*, nvmlDevice_t*) =
      get<decltype(by_bus_id)>("nvmlDeviceGetHandleByPciBusId_v2");
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = get<decltype(uuid)>("nvmlDeviceGetUUID");
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, int*,
                           int*) = get<decltype(ecc_mode)>("nvmlDeviceGetEccMode");
  nvmlReturn_t (*ecc_total)(nvmlDevice_t, int, int, unsigned long long*) =
      get<decltype(ecc_total)>("nvmlDeviceGetTotalEccErrors");
  nvmlReturn_t (*retired)(nvmlDevice_t, int, unsigned*, unsigned long long*) =
      get<decltype(retired)>("nvmlDeviceGetRetiredPages");
  nvmlReturn_t (*retired_pending)(nvmlDevice_t, int*) =
      get<decltype(retired_pending)>("nvmlDeviceGetRetiredPagesPendingStatus");
  nvmlReturn_t (*remapped)(nvmlDevice_t, unsigned*, unsigned*, unsigned*,
                           unsigned*) = get<decltype(remapped)>("nvmlDeviceGetRemappedRows");
  nvmlReturn_t (*replay)(nvmlDevice_t,
                         unsigned*) = get<decltype(replay)>("nvmlDeviceGetPcieReplayCounter");
  // Renamed in R535 ("clocks event"); the old name stays exported for older drivers.
  nvmlReturn_t (*clock_reasons)(nvmlDevice_t, unsigned long long*) = [this] {
    auto fn = get<decltype(clock_reasons)>("nvmlDeviceGetCurrentClocksEventReasons");
    return fn ? fn : get<decltype(clock_reasons)>("nvmlDeviceGetCurrentClocksThrottleReasons");
  }();
  nvmlReturn_t (*persistence)(nvmlDevice_t,
                              int*) = get<decltype(persistence)>("nvmlDeviceGetPersistenceMode");
  nvmlReturn_t (*mig)(nvmlDevice_t, unsigned*,
                      unsigned*) = get<decltype(mig)>("nvmlDeviceGetMigMode");
  nvmlReturn_t (*fabric)(nvmlDevice_t,
                         FabricInfo*) = get<decltype(fabric)>("nvmlDeviceGetGpuFabricInfo");
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned,
                             int*) = get<decltype(link_state)>("nvmlDeviceGetNvLinkState");
  nvmlReturn_t (*link_errors)(nvmlDevice_t, unsigned, int, unsigned long long*) =
      get<decltype(link_errors)>("nvmlDeviceGetNvLinkErrorCounter");

  std::string why(nvmlReturn_t r) const {
    return error_string ? error_string(r) : fmt::format("NVML error {}", r);
  }
  // A Count from one call: `call` fills `v` and returns NVML's answer.
  template <class Call>
  Count count(bool present, Call call) const {
    Count c;
    if (!present) {
      c.why = "this driver's NVML lacks the call";
      return c;
    }
    uint64_t v = 0;
    const nvmlReturn_t r = call(v);
    if (r != NVML_SUCCESS) {
      c.why = why(r);
      return c;
    }
    c.available = true;
    c.value = v;
    return c;
  }
};

// A page count from nvmlDeviceGetRetiredPages: asked with room for none, NVML answers the count
// (INSUFFICIENT_SIZE when there are some).
nvmlReturn_t retired_count(const Nvml& nvml, nvmlDevice_t dev, int cause, uint64_t& v) {
  unsigned n = 0;
  const nvmlReturn_t r = nvml.retired(dev, cause, &n, nullptr);
  v = n;
  return r == NVML_ERROR_INSUFFICIENT_SIZE ? NVML_SUCCESS : r;
}

GpuCounters read_one(const Nvml& nvml, const std::string& bdf) {
  GpuCounters g;
  g.bdf = bdf;
  nvmlDevice_t dev = nullptr;
  if (const nvmlReturn_t r = nvml.by_bus_id(bdf.c_str(), &dev); r != NVML_SUCCESS) {
    g.unavailable = nvml.why(r);
    return g;
  }
  char uuid[96] = {};
  if (nvml.uuid && nvml.uuid(dev, uuid, sizeof uuid - 1) == NVML_SUCCESS) g.uuid = uuid;
  const auto flag = [](int state, uint64_t& v) { v = state == 1 ? 1 : 0; };
  g.ecc_enabled = nvml.count(nvml.ecc_mode != nullptr, [&](uint64_t& v) {
    int current = 0, pending = 0;
    const nvmlReturn_t r = nvml.ecc_mode(dev, &current, &pending);
    flag(current, v);
    return r;
  });
  const auto ecc = [&](int type, int counter) {
    return nvml.count(nvml.ecc_total != nullptr, [&](uint64_t& v) {
      unsigned long long n = 0;
      const nvmlReturn_t r = nvml.ecc_total(dev, type, counter, &n);
      v = n;
      return r;
    });
  };
  g.ecc_volatile_corrected = ecc(kCorrected, kVolatile);
  g.ecc_volatile_uncorrected = ecc(kUncorrected, kVolatile);
  g.ecc_aggregate_corrected = ecc(kCorrected, kAggregate);
  g.ecc_aggregate_uncorrected = ecc(kUncorrected, kAggregate);
  g.retired_sbe = nvml.count(nvml.retired != nullptr,
                             [&](uint64_t& v) { return retired_count(nvml, dev, kRetireSbe, v); });
  g.retired_dbe = nvml.count(nvml.retired != nullptr,
                             [&](uint64_t& v) { return retired_count(nvml, dev, kRetireDbe, v); });
  g.retired_pending = nvml.count(nvml.retired_pending != nullptr, [&](uint64_t& v) {
    int pending = 0;
    const nvmlReturn_t r = nvml.retired_pending(dev, &pending);
    flag(pending, v);
    return r;
  });
  unsigned corr = 0, unc = 0, pending = 0, failed = 0;
  const nvmlReturn_t remap =
      nvml.remapped ? nvml.remapped(dev, &corr, &unc, &pending, &failed) : NVML_SUCCESS;
  const auto remap_field = [&](unsigned value) {
    return nvml.count(nvml.remapped != nullptr, [&](uint64_t& v) {
      v = value;
      return remap;
    });
  };
  g.remap_correctable = remap_field(corr);
  g.remap_uncorrectable = remap_field(unc);
  g.remap_pending = remap_field(pending != 0 ? 1 : 0);
  g.remap_failure = remap_field(failed != 0 ? 1 : 0);
  g.pcie_replay = nvml.count(nvml.replay != nullptr, [&](uint64_t& v) {
    unsigned n = 0;
    const nvmlReturn_t r = nvml.replay(dev, &n);
    v = n;
    return r;
  });
  g.clock_reasons = nvml.count(nvml.clock_reasons != nullptr, [&](uint64_t& v) {
    unsigned long long bits = 0;
    const nvmlReturn_t r = nvml.clock_reasons(dev, &bits);
    v = bits;
    return r;
  });
  g.persistence = nvml.count(nvml.persistence != nullptr, [&](uint64_t& v) {
    int state = 0;
    const nvmlReturn_t r = nvml.persistence(dev, &state);
    flag(state, v);
    return r;
  });
  g.mig = nvml.count(nvml.mig != nullptr, [&](uint64_t& v) {
    unsigned current = 0, next = 0;
    const nvmlReturn_t r = nvml.mig(dev, &current, &next);
    v = current == 1 ? 1 : 0;
    return r;
  });
  FabricInfo fabric{};
  const nvmlReturn_t fabric_r = nvml.fabric ? nvml.fabric(dev, &fabric) : NVML_SUCCESS;
  g.fabric_state = nvml.count(nvml.fabric != nullptr, [&](uint64_t& v) {
    v = fabric.state;
    return fabric_r;
  });
  g.fabric_status = nvml.count(nvml.fabric != nullptr, [&](uint64_t& v) {
    v = static_cast<uint64_t>(static_cast<unsigned>(fabric.status));
    return fabric_r;
  });
  if (g.fabric_status.available && fabric.status != NVML_SUCCESS) {
    g.fabric_status.why = nvml.why(fabric.status);  // the registration's error, in words
  }
  if (nvml.link_state) {
    for (unsigned link = 0; link < kMaxNvLinks; ++link) {
      int state = 0;
      if (nvml.link_state(dev, link, &state) != NVML_SUCCESS) continue;  // no such link
      NvLinkCounters l;
      l.link = static_cast<int>(link);
      l.active = state == 1;
      const auto errors = [&](int counter) {
        return nvml.count(nvml.link_errors != nullptr, [&](uint64_t& v) {
          unsigned long long n = 0;
          const nvmlReturn_t r = nvml.link_errors(dev, link, counter, &n);
          v = n;
          return r;
        });
      };
      l.crc_flit = errors(kCrcFlit);
      l.crc_data = errors(kCrcData);
      l.replay = errors(kReplay);
      l.recovery = errors(kRecovery);
      g.nvlinks.push_back(l);
    }
  }
  return g;
}

}  // namespace

CountersRead read_gpu_counters(const std::vector<std::string>& bdfs, const std::string& library) {
  CountersRead out;
  Nvml nvml(library);
  if (!nvml.lib) {
    out.unavailable = fmt::format("NVML could not be loaded ({})", nvml.lib.error());
    return out;
  }
  out.library = nvml.lib.name();
  if (!nvml.init || !nvml.shutdown || !nvml.by_bus_id) {
    out.unavailable =
        fmt::format("{} lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2", out.library);
    return out;
  }
  if (const nvmlReturn_t r = nvml.init(); r != NVML_SUCCESS) {
    out.unavailable = fmt::format("NVML did not start: {}", nvml.why(r));
    return out;
  }
  for (const std::string& bdf : bdfs)
    out.gpus.push_back(read_one(nvml, bdf));
  nvml.shutdown();
  return out;
}

}  // namespace commtool::health
