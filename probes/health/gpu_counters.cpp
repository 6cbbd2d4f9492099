#include "probes/health/gpu_counters.hpp"

#include <fmt/format.h>

#include "probes/base/nvml_session.hpp"

namespace commtool::health {

namespace {

using nvml::Device;
using nvml::kMaxNvLinks;
using nvml::kSuccess;
using nvml::Return;
enum : int { kCorrected = 0, kUncorrected = 1 };                        // nvmlMemoryErrorType_t
enum : int { kVolatile = 0, kAggregate = 1 };                           // nvmlEccCounterType_t
enum : int { kRetireSbe = 0, kRetireDbe = 1 };                          // nvmlPageRetirementCause_t
enum : int { kReplay = 0, kRecovery = 1, kCrcFlit = 2, kCrcData = 3 };  // nvmlNvLinkErrorCounter_t

// nvmlGpuFabricInfo_t, the first version (R535; the call is kept for it in later drivers).
struct FabricInfo {
  unsigned char cluster_uuid[16];
  Return status;
  unsigned clique_id;
  unsigned char state;
};

// The entry points the counters use, beside the session's.
struct Nvml {
  explicit Nvml(const nvml::Session& s) : session(s) {}
  const nvml::Session& session;
  template <class Fn>
  Fn get(const char* name) const {
    return session.symbol<Fn>(name);
  }
  Return (*uuid)(Device, char*, unsigned) = get<decltype(uuid)>("nvmlDeviceGetUUID");
  Return (*ecc_mode)(Device, int*, int*) = get<decltype(ecc_mode)>("nvmlDeviceGetEccMode");
  Return (*ecc_total)(Device, int, int, unsigned long long*) =
      get<decltype(ecc_total)>("nvmlDeviceGetTotalEccErrors");
  Return (*retired)(Device, int, unsigned*,
                    unsigned long long*) = get<decltype(retired)>("nvmlDeviceGetRetiredPages");
  Return (*retired_pending)(Device, int*) =
      get<decltype(retired_pending)>("nvmlDeviceGetRetiredPagesPendingStatus");
  Return (*remapped)(Device, unsigned*, unsigned*, unsigned*,
                     unsigned*) = get<decltype(remapped)>("nvmlDeviceGetRemappedRows");
  Return (*replay)(Device, unsigned*) = get<decltype(replay)>("nvmlDeviceGetPcieReplayCounter");
  // Renamed in R535 ("clocks event"); the old name stays exported for older drivers.
  Return (*clock_reasons)(Device, unsigned long long*) = [this] {
    auto fn = get<decltype(clock_reasons)>("nvmlDeviceGetCurrentClocksEventReasons");
    return fn ? fn : get<decltype(clock_reasons)>("nvmlDeviceGetCurrentClocksThrottleReasons");
  }();
  Return (*persistence)(Device, int*) = get<decltype(persistence)>("nvmlDeviceGetPersistenceMode");
  Return (*mig)(Device, unsigned*, unsigned*) = get<decltype(mig)>("nvmlDeviceGetMigMode");
  Return (*fabric)(Device, FabricInfo*) = get<decltype(fabric)>("nvmlDeviceGetGpuFabricInfo");
  Return (*link_state)(Device, unsigned,
                       int*) = get<decltype(link_state)>("nvmlDeviceGetNvLinkState");
  Return (*link_errors)(Device, unsigned, int, unsigned long long*) =
      get<decltype(link_errors)>("nvmlDeviceGetNvLinkErrorCounter");

  std::string why(Return r) const { return session.why(r); }
  // A Count from one call: `call` fills `v` and returns NVML's answer.
  template <class Call>
  Count count(bool present, Call call) const {
    Count c;
    if (!present) {
      c.why = "this driver's NVML lacks the call";
      return c;
    }
    uint64_t v = 0;
    const Return r = call(v);
    if (r != kSuccess) {
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
Return retired_count(const Nvml& nvml, Device dev, int cause, uint64_t& v) {
  unsigned n = 0;
  const Return r = nvml.retired(dev, cause, &n, nullptr);
  v = n;
  return r == nvml::kInsufficientSize ? kSuccess : r;
}

GpuCounters read_one(const Nvml& nvml, const std::string& bdf) {
  GpuCounters g;
  g.bdf = bdf;
  Device dev = nullptr;
  if (const Return r = nvml.session.device(bdf, &dev); r != kSuccess) {
    g.unavailable = nvml.why(r);
    return g;
  }
  char uuid[96] = {};
  if (nvml.uuid && nvml.uuid(dev, uuid, sizeof uuid - 1) == kSuccess) g.uuid = uuid;
  const auto flag = [](int state, uint64_t& v) { v = state == 1 ? 1 : 0; };
  g.ecc_enabled = nvml.count(nvml.ecc_mode != nullptr, [&](uint64_t& v) {
    int current = 0, pending = 0;
    const Return r = nvml.ecc_mode(dev, &current, &pending);
    flag(current, v);
    return r;
  });
  const auto ecc = [&](int type, int counter) {
    return nvml.count(nvml.ecc_total != nullptr, [&](uint64_t& v) {
      unsigned long long n = 0;
      const Return r = nvml.ecc_total(dev, type, counter, &n);
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
    const Return r = nvml.retired_pending(dev, &pending);
    flag(pending, v);
    return r;
  });
  unsigned corr = 0, unc = 0, pending = 0, failed = 0;
  const Return remap =
      nvml.remapped ? nvml.remapped(dev, &corr, &unc, &pending, &failed) : kSuccess;
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
    const Return r = nvml.replay(dev, &n);
    v = n;
    return r;
  });
  g.clock_reasons = nvml.count(nvml.clock_reasons != nullptr, [&](uint64_t& v) {
    unsigned long long bits = 0;
    const Return r = nvml.clock_reasons(dev, &bits);
    v = bits;
    return r;
  });
  g.persistence = nvml.count(nvml.persistence != nullptr, [&](uint64_t& v) {
    int state = 0;
    const Return r = nvml.persistence(dev, &state);
    flag(state, v);
    return r;
  });
  g.mig = nvml.count(nvml.mig != nullptr, [&](uint64_t& v) {
    unsigned current = 0, next = 0;
    const Return r = nvml.mig(dev, &current, &next);
    v = current == 1 ? 1 : 0;
    return r;
  });
  FabricInfo fabric{};
  const Return fabric_r = nvml.fabric ? nvml.fabric(dev, &fabric) : kSuccess;
  g.fabric_state = nvml.count(nvml.fabric != nullptr, [&](uint64_t& v) {
    v = fabric.state;
    return fabric_r;
  });
  g.fabric_status = nvml.count(nvml.fabric != nullptr, [&](uint64_t& v) {
    v = static_cast<uint64_t>(static_cast<unsigned>(fabric.status));
    return fabric_r;
  });
  if (g.fabric_status.available && fabric.status != kSuccess) {
    g.fabric_status.why = nvml.why(fabric.status);  // the registration's error, in words
  }
  if (nvml.link_state) {
    for (unsigned link = 0; link < kMaxNvLinks; ++link) {
      int state = 0;
      if (nvml.link_state(dev, link, &state) != kSuccess) continue;  // no such link
      NvLinkCounters l;
      l.link = static_cast<int>(link);
      l.active = state == 1;
      const auto errors = [&](int counter) {
        return nvml.count(nvml.link_errors != nullptr, [&](uint64_t& v) {
          unsigned long long n = 0;
          const Return r = nvml.link_errors(dev, link, counter, &n);
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
  const nvml::Session session(library);
  if (!session.started()) {
    out.unavailable = session.why_not();
    return out;
  }
  out.library = session.library();
  const Nvml nvml(session);
  for (const std::string& bdf : bdfs)
    out.gpus.push_back(read_one(nvml, bdf));
  return out;
}

}  // namespace commtool::health
