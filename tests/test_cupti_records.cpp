// The CUPTI record normaliser on records built in memory, as CUPTI 13 lays them out: what each
// kind becomes, what is skipped, how NVTX start/end records pair up, and that a measured clock
// offset moves every timestamp. No CUPTI is loaded: API names come from an injected lookup.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "probes/base/error.hpp"
#include "tracing/cupti/cupti_tracer.hpp"
#include "tracing/cupti/normalise.hpp"

using namespace commtool::tracing;
using commtool::tracing::cupti::RecordNormaliser;

namespace {

// CUPTI records are filled by CUPTI, never value-initialised: start from zeroed bytes, as a
// fresh activity buffer would be, and set the fields a test cares about.
template <typename Record>
Record blank(CUpti_ActivityKind kind) {
  Record r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  return r;
}

template <typename Record>
const CUpti_Activity* as_activity(const Record& r) {
  return reinterpret_cast<const CUpti_Activity*>(&r);
}

// A stand-in for cuptiGetCallbackName that knows two ids and counts how often it is asked.
struct FakeNames {
  std::map<std::pair<int, uint32_t>, int> asked;
  const char* operator()(CUpti_CallbackDomain domain, uint32_t cbid) {
    ++asked[{domain, cbid}];
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == 41) return "cudaMemcpyAsync_v3020";
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == 307) return "cuLaunchKernel";
    return nullptr;
  }
};

RecordNormaliser normaliser(FakeNames& names, int64_t offset_ns = 0) {
  return RecordNormaliser([&names](CUpti_CallbackDomain d, uint32_t c) { return names(d, c); },
                          offset_ns);
}

CUpti_ActivityKernel10 kernel(uint64_t start, uint64_t end) {
  auto k = blank<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = start;
  k.end = end;
  k.streamId = 13;
  k.correlationId = 99;
  k.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  return k;
}

CUpti_ActivityMarker2 marker(uint32_t flags, uint32_t id, uint64_t t, const char* name) {
  auto m = blank<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  m.flags = static_cast<CUpti_ActivityFlag>(flags);
  m.id = id;
  m.timestamp = t;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.processId = 100;
  m.objectId.pt.threadId = 4242;
  m.name = name;
  return m;
}

CUpti_ActivitySynchronization2 sync_record(CUpti_ActivitySynchronizationType type) {
  auto s = blank<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  s.type = type;
  s.start = 500;
  s.end = 520;
  s.streamId = 14;
  s.cudaEventId = 3;
  return s;
}

CUpti_ActivityCudaEvent2 event_record(uint32_t correlation, uint32_t event, uint64_t device_ns) {
  auto e = blank<CUpti_ActivityCudaEvent2>(CUPTI_ACTIVITY_KIND_CUDA_EVENT);
  e.correlationId = correlation;
  e.eventId = event;
  e.streamId = 13;
  e.deviceTimestamp = device_ns;
  return e;
}

CUpti_ActivityExternalCorrelation external(uint64_t id, uint32_t correlation) {
  auto x = blank<CUpti_ActivityExternalCorrelation>(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  x.externalId = id;
  x.correlationId = correlation;
  return x;
}

}  // namespace

TEST(CuptiRecords, ConcurrentKernelBecomesKernelWorkWithItsName) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto k = kernel(1000, 2500);
  n.add(as_activity(k), out);
  ASSERT_EQ(out.gpu.size(), 1u);
  EXPECT_EQ(out.gpu[0].kind, GpuWorkKind::kKernel);
  EXPECT_EQ(out.gpu[0].stream, 13u);
  EXPECT_EQ(out.gpu[0].correlation, 99u);
  EXPECT_EQ(out.gpu[0].start_ns, 1000u);
  EXPECT_EQ(out.gpu[0].end_ns, 2500u);
  EXPECT_EQ(out.gpu[0].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
}

TEST(CuptiRecords, KernelWithoutTimestampsIsSkipped) {
  // CUPTI writes 0 when it had no device memory to time the kernel.
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto no_start = kernel(0, 2500);
  const auto no_end = kernel(1000, 0);
  n.add(as_activity(no_start), out);
  n.add(as_activity(no_end), out);
  EXPECT_TRUE(out.gpu.empty());
}

TEST(CuptiRecords, MemcpyIsNamedByItsDirection) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  auto m = blank<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  m.start = 10;
  m.end = 20;
  m.streamId = 5;
  m.correlationId = 6;
  n.add(as_activity(m), out);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  n.add(as_activity(m), out);
  ASSERT_EQ(out.gpu.size(), 2u);
  EXPECT_EQ(out.gpu[0].kind, GpuWorkKind::kMemcpy);
  EXPECT_EQ(out.gpu[0].name, "memcpy DtoD");
  EXPECT_EQ(out.gpu[1].name, "memcpy HtoD");
  EXPECT_EQ(out.gpu[0].stream, 5u);
  EXPECT_EQ(out.gpu[0].correlation, 6u);
}

TEST(CuptiRecords, MemsetBecomesMemsetWork) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  auto m = blank<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  m.start = 30;
  m.end = 45;
  m.streamId = 8;
  n.add(as_activity(m), out);
  ASSERT_EQ(out.gpu.size(), 1u);
  EXPECT_EQ(out.gpu[0].kind, GpuWorkKind::kMemset);
  EXPECT_EQ(out.gpu[0].stream, 8u);
  EXPECT_EQ(out.gpu[0].end_ns, 45u);
}

TEST(CuptiRecords, ApiCallsCarryThreadAndNameWithoutVersionSuffix) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  auto runtime = blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  runtime.cbid = 41;
  runtime.start = 100;
  runtime.end = 180;
  runtime.threadId = 4242;
  runtime.correlationId = 77;
  auto driver = runtime;
  driver.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  driver.cbid = 307;
  n.add(as_activity(runtime), out);
  n.add(as_activity(driver), out);
  ASSERT_EQ(out.api.size(), 2u);
  EXPECT_EQ(out.api[0].name, "cudaMemcpyAsync");
  EXPECT_EQ(out.api[0].thread, 4242u);
  EXPECT_EQ(out.api[0].correlation, 77u);
  EXPECT_EQ(out.api[0].start_ns, 100u);
  EXPECT_EQ(out.api[0].end_ns, 180u);
  EXPECT_EQ(out.api[1].name, "cuLaunchKernel");  // the domain picks the name table
}

TEST(CuptiRecords, ApiNamesAreLookedUpOncePerCallbackId) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  auto call = blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  call.cbid = 41;
  call.start = 1;
  call.end = 2;
  for (int i = 0; i < 5; ++i)
    n.add(as_activity(call), out);
  EXPECT_EQ(out.api.size(), 5u);
  EXPECT_EQ((names.asked[{CUPTI_CB_DOMAIN_RUNTIME_API, 41}]), 1);
}

TEST(CuptiRecords, ApiWithoutKnownNameIsNamedByDomainAndId) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  auto call = blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  call.cbid = 9999;
  call.start = 1;
  call.end = 2;
  n.add(as_activity(call), out);
  ASSERT_EQ(out.api.size(), 1u);
  EXPECT_EQ(out.api[0].name, "driver API 9999");
}

TEST(CuptiRecords, StreamWaitEventBecomesStreamWaitCall) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto s = sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
  n.add(as_activity(s), out);
  ASSERT_EQ(out.stream_waits.size(), 1u);
  EXPECT_EQ(out.stream_waits[0].stream, 14u);
  EXPECT_EQ(out.stream_waits[0].event, 3u);
  EXPECT_EQ(out.stream_waits[0].start_ns, 500u);
  EXPECT_EQ(out.stream_waits[0].end_ns, 520u);
}

TEST(CuptiRecords, OtherSynchronisationRecordsAreIgnored) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  for (auto type : {CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
                    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
                    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN}) {
    const auto s = sync_record(type);
    n.add(as_activity(s), out);
  }
  EXPECT_TRUE(out.stream_waits.empty());
}

TEST(CuptiRecords, CudaEventWithDeviceTimestampBecomesCompletion) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto e = event_record(50, 21, 7777);
  n.add(as_activity(e), out);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].event, 21u);
  EXPECT_EQ(out.events[0].stream, 13u);
  EXPECT_EQ(out.events[0].device_ns, 7777u);
}

TEST(CuptiRecords, CudaEventWithoutDeviceTimestampIsSkipped) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto e = event_record(50, 21, 0);
  n.add(as_activity(e), out);
  EXPECT_TRUE(out.events.empty());
}

TEST(CuptiRecords, MarkerStartAndEndPairByIdIntoOneRange) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  auto start_a = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 1000, "ncclAllReduce");
  start_a.domain = "NCCL";
  const auto start_b = marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 2, 1100, "inner");
  // End records carry only the id; they arrive in the opposite order here.
  const auto end_b = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 2, 1200, nullptr);
  const auto end_a = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 1900, nullptr);
  n.add(as_activity(start_a), out);
  n.add(as_activity(start_b), out);
  EXPECT_TRUE(out.ranges.empty());  // nothing until an end arrives
  EXPECT_EQ(n.open_ranges(), 2u);
  n.add(as_activity(end_b), out);
  n.add(as_activity(end_a), out);
  ASSERT_EQ(out.ranges.size(), 2u);
  EXPECT_EQ(out.ranges[0].name, "inner");
  EXPECT_EQ(out.ranges[0].start_ns, 1100u);
  EXPECT_EQ(out.ranges[0].end_ns, 1200u);
  EXPECT_EQ(out.ranges[0].domain, "");
  EXPECT_EQ(out.ranges[1].name, "ncclAllReduce");
  EXPECT_EQ(out.ranges[1].domain, "NCCL");
  EXPECT_EQ(out.ranges[1].thread, 4242u);
  EXPECT_EQ(out.ranges[1].start_ns, 1000u);
  EXPECT_EQ(out.ranges[1].end_ns, 1900u);
  EXPECT_EQ(n.open_ranges(), 0u);
}

TEST(CuptiRecords, MarkerEndWithoutStartIsIgnored) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto end = marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 9, 1200, nullptr);
  n.add(as_activity(end), out);
  EXPECT_TRUE(out.ranges.empty());
}

TEST(CuptiRecords, InstantaneousMarkerIsAZeroLengthRange) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto mark = marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 3, 5000, "checkpoint");
  n.add(as_activity(mark), out);
  ASSERT_EQ(out.ranges.size(), 1u);
  EXPECT_EQ(out.ranges[0].name, "checkpoint");
  EXPECT_EQ(out.ranges[0].start_ns, 5000u);
  EXPECT_EQ(out.ranges[0].end_ns, 5000u);
  EXPECT_EQ(out.ranges[0].thread, 4242u);
}

TEST(CuptiRecords, ClockOffsetIsSubtractedFromEveryTimestamp) {
  // CUPTI's clock 1'000'000 ns ahead of CLOCK_MONOTONIC: every record moves back by that.
  FakeNames names;
  RecordNormaliser n = normaliser(names, 1'000'000);
  RecordSet out;
  const auto k = kernel(1'002'000, 1'003'000);
  auto api = blank<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  api.start = 1'001'000;
  api.end = 1'001'500;
  auto wait = sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
  wait.start = 1'000'500;
  wait.end = 1'000'600;
  const auto ev = event_record(1, 2, 1'004'000);
  const auto mark = marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1, 1'005'000, "m");
  for (const CUpti_Activity* r :
       {as_activity(k), as_activity(api), as_activity(wait), as_activity(ev), as_activity(mark)}) {
    n.add(r, out);
  }
  ASSERT_EQ(out.gpu.size(), 1u);
  EXPECT_EQ(out.gpu[0].start_ns, 2000u);
  EXPECT_EQ(out.gpu[0].end_ns, 3000u);
  ASSERT_EQ(out.api.size(), 1u);
  EXPECT_EQ(out.api[0].start_ns, 1000u);
  EXPECT_EQ(out.api[0].end_ns, 1500u);
  ASSERT_EQ(out.stream_waits.size(), 1u);
  EXPECT_EQ(out.stream_waits[0].start_ns, 500u);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].device_ns, 4000u);
  ASSERT_EQ(out.ranges.size(), 1u);
  EXPECT_EQ(out.ranges[0].start_ns, 5000u);
}

TEST(CuptiRecords, NegativeClockOffsetMovesTimestampsForward) {
  FakeNames names;
  RecordNormaliser n = normaliser(names, -250);
  RecordSet out;
  const auto k = kernel(1000, 2000);
  n.add(as_activity(k), out);
  ASSERT_EQ(out.gpu.size(), 1u);
  EXPECT_EQ(out.gpu[0].start_ns, 1250u);
  EXPECT_EQ(out.gpu[0].end_ns, 2250u);
}

TEST(CuptiRecords, UnknownKindsAreIgnored) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  // A kernel-shaped record under a kind that is not traced, and a kind CUPTI may add later.
  auto k = kernel(1000, 2000);
  k.kind = CUPTI_ACTIVITY_KIND_CDP_KERNEL;
  n.add(as_activity(k), out);
  auto future = kernel(1000, 2000);
  future.kind = static_cast<CUpti_ActivityKind>(0x7ffffff0);
  n.add(as_activity(future), out);
  EXPECT_TRUE(out.gpu.empty());
  EXPECT_TRUE(out.api.empty());
  EXPECT_TRUE(out.events.empty());
  EXPECT_TRUE(out.ranges.empty());
}

TEST(CuptiRecords, ExternalCorrelationJoinsToTheEventRecordedUnderIt) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  n.begin_watch();
  // The runtime call and the driver call it made both carry the external id; only one
  // recorded the event. The event record needs no device timestamp to be found.
  const auto x1 = external(0xabc, 70);
  const auto x2 = external(0xabc, 71);
  const auto other = event_record(60, 5, 100);
  const auto ours = event_record(71, 8, 0);
  n.add(as_activity(ours), out);  // order within CUPTI's buffers is not guaranteed
  n.add(as_activity(x1), out);
  n.add(as_activity(other), out);
  n.add(as_activity(x2), out);
  EXPECT_EQ(n.event_for_external_id(0xabc), std::optional<uint32_t>(8u));
  EXPECT_FALSE(n.event_for_external_id(0xabd).has_value());
  n.end_watch();
}

TEST(CuptiRecords, CorrelationsAreForgottenOutsideAWatch) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  const auto x = external(0xabc, 70);
  const auto e = event_record(70, 8, 100);
  n.add(as_activity(x), out);  // before any watch: not kept
  n.add(as_activity(e), out);
  n.begin_watch();
  EXPECT_FALSE(n.event_for_external_id(0xabc).has_value());
  n.add(as_activity(x), out);
  n.add(as_activity(e), out);
  EXPECT_TRUE(n.event_for_external_id(0xabc).has_value());
  n.end_watch();  // the last watch closing clears what it kept
  EXPECT_FALSE(n.event_for_external_id(0xabc).has_value());
}

TEST(CuptiRecords, OtherExternalCorrelationKindsAreNotOurs) {
  FakeNames names;
  RecordNormaliser n = normaliser(names);
  RecordSet out;
  n.begin_watch();
  auto x = external(0xabc, 70);
  x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
  const auto e = event_record(70, 8, 100);
  n.add(as_activity(x), out);
  n.add(as_activity(e), out);
  EXPECT_FALSE(n.event_for_external_id(0xabc).has_value());
  n.end_watch();
}

TEST(CuptiRecords, RuntimeVersionSuffixIsDroppedButDriverSuffixStays) {
  EXPECT_EQ(cupti::api_display_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(cupti::api_display_name("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(cupti::api_display_name("cudaGraphLaunch_v10000"), "cudaGraphLaunch");
  EXPECT_EQ(cupti::api_display_name("cuMemAlloc_v2"), "cuMemAlloc_v2");
  EXPECT_EQ(cupti::api_display_name("cuStreamWaitEvent"), "cuStreamWaitEvent");
  EXPECT_EQ(cupti::api_display_name(nullptr), "");
}

namespace {

// Points COMMTOOL_CUPTI_LIBRARY somewhere for one test and puts the old value back.
class CuptiLibraryOverride {
 public:
  explicit CuptiLibraryOverride(const char* path) {
    if (const char* old = std::getenv(kName)) old_ = old;
    setenv(kName, path, 1);
  }
  ~CuptiLibraryOverride() {
    if (old_) {
      setenv(kName, old_->c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }
  CuptiLibraryOverride(const CuptiLibraryOverride&) = delete;
  CuptiLibraryOverride& operator=(const CuptiLibraryOverride&) = delete;

 private:
  static constexpr const char* kName = "COMMTOOL_CUPTI_LIBRARY";
  std::optional<std::string> old_;
};

constexpr const char* kMissingCupti = "/nonexistent/commtool-test/libcupti.so.13";

}  // namespace

TEST(CuptiLibrary, UnloadableOverrideIsAnEnvironmentErrorNamingThePath) {
  CuptiLibraryOverride env(kMissingCupti);
  try {
    CuptiTracer::library_path();
    FAIL() << "library_path() found a library that does not exist";
  } catch (const commtool::Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kEnvironment);
    EXPECT_NE(std::string(e.what()).find(kMissingCupti), std::string::npos) << e.what();
  }
}

TEST(CuptiLibrary, FailedConstructionLeavesRoomForTheNextTracer) {
  // The second attempt must fail for the same reason as the first, not as "a second tracer".
  CuptiLibraryOverride env(kMissingCupti);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      CuptiTracer tracer;
      FAIL() << "a tracer was built from a library that does not exist";
    } catch (const commtool::Error& e) {
      EXPECT_EQ(e.code(), commtool::ExitCode::kEnvironment);
      EXPECT_NE(std::string(e.what()).find("cannot load CUPTI"), std::string::npos)
          << "attempt " << attempt << ": " << e.what();
    }
  }
}

TEST(CuptiKindsOff, NamesAreCheckedAndEachKeptOnce) {
  using commtool::tracing::parse_cupti_kinds_off;
  EXPECT_EQ(parse_cupti_kinds_off("driver,marker,driver,"),
            (std::vector<std::string>{"driver", "marker"}));
  EXPECT_TRUE(parse_cupti_kinds_off("").empty());
  // The kinds through which the harness finds its own events are never left off.
  for (const char* needed : {"event", "runtime", "sync"}) {
    try {
      parse_cupti_kinds_off(std::string("driver,") + needed);
      FAIL() << needed << " was accepted";
    } catch (const commtool::Error& e) {
      EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
      const std::string what = e.what();
      EXPECT_NE(
          what.find(std::string("\"") + needed + "\" is not a CUPTI kind that can be left off"),
          std::string::npos)
          << what;
      EXPECT_NE(what.find("accepted: kernel, memcpy, memset, driver, marker ("), std::string::npos)
          << what;
    }
  }
}
