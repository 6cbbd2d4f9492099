// GPU test of the CUPTI layer against a real driver: the ids it hands out are the ids CUPTI's
// records carry, every record lands on the steady_clock timeline, API calls carry gettid, and
// nothing is dropped. Fails (does not skip) where there is no GPU or no CUPTI.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "probes/base/error.hpp"
#include "tracing/cupti/cupti_tracer.hpp"

using namespace commtool::tracing;

namespace {

bool have_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    ADD_FAILURE() << "no usable GPU here; GPU tests must run on the GPU machine";
    return false;
  }
  return cudaSetDevice(0) == cudaSuccess;
}

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// The ids the tracer gave the test's streams and events, and the monotonic window the traced
// work ran in: what every record is checked against.
struct TracedWork {
  uint32_t stream1 = 0, stream2 = 0;
  uint32_t event1 = 0, event2 = 0;
  uint64_t before_ns = 0, after_ns = 0;
};

// A memset and a device-to-device copy on s1, ending in e1; s2 waits for e1 and records e2.
// Both streams are synchronised before the window closes.
void issue_copy_and_handoff(cudaStream_t s1, cudaStream_t s2, cudaEvent_t e1, cudaEvent_t e2,
                            void* src, void* dst, size_t bytes, TracedWork& w) {
  w.before_ns = monotonic_ns();
  ASSERT_CUDA(cudaMemsetAsync(src, 0x5a, bytes, s1));
  ASSERT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s1));
  ASSERT_CUDA(cudaEventRecord(e1, s1));
  ASSERT_CUDA(cudaStreamWaitEvent(s2, e1, 0));
  ASSERT_CUDA(cudaEventRecord(e2, s2));
  ASSERT_CUDA(cudaStreamSynchronize(s2));
  ASSERT_CUDA(cudaStreamSynchronize(s1));
  w.after_ns = monotonic_ns();
}

// One memset and one copy on stream 1, inside the window; the copy named for its direction.
void expect_gpu_work_on_its_stream(const RecordSet& r, const TracedWork& w) {
  auto work_on = [&](GpuWorkKind kind, uint32_t stream) {
    return std::count_if(r.gpu.begin(), r.gpu.end(), [&](const GpuWork& g) {
      return g.kind == kind && g.stream == stream && g.start_ns >= w.before_ns &&
             g.end_ns <= w.after_ns && g.start_ns <= g.end_ns;
    });
  };
  EXPECT_EQ(work_on(GpuWorkKind::kMemset, w.stream1), 1);
  EXPECT_EQ(work_on(GpuWorkKind::kMemcpy, w.stream1), 1);
  const auto copy = std::find_if(r.gpu.begin(), r.gpu.end(),
                                 [](const GpuWork& g) { return g.kind == GpuWorkKind::kMemcpy; });
  ASSERT_NE(copy, r.gpu.end());
  EXPECT_EQ(copy->name, "memcpy DtoD");
}

// Stream 2's wait names event 1 by the id the tracer gave it, inside the window.
void expect_stream_wait_recorded(const RecordSet& r, const TracedWork& w) {
  EXPECT_TRUE(std::any_of(r.stream_waits.begin(), r.stream_waits.end(),
                          [&](const StreamWaitCall& s) {
                            return s.stream == w.stream2 && s.event == w.event1 &&
                                   s.start_ns >= w.before_ns && s.end_ns <= w.after_ns;
                          }))
      << "no stream-wait record for (stream " << w.stream2 << ", event " << w.event1 << ") among "
      << r.stream_waits.size();
}

// Both events completed inside the window, event 1 on stream 1.
void expect_events_completed_in_window(const RecordSet& r, const TracedWork& w) {
  for (uint32_t id : {w.event1, w.event2}) {
    const auto done = std::find_if(r.events.begin(), r.events.end(),
                                   [&](const EventCompletion& e) { return e.event == id; });
    ASSERT_NE(done, r.events.end()) << "no completion for event " << id;
    EXPECT_GE(done->device_ns, w.before_ns) << "event " << id << " completed before it was issued";
    EXPECT_LE(done->device_ns, w.after_ns)
        << "event " << id << " completed after the sync returned";
  }
  const auto e1_done = std::find_if(r.events.begin(), r.events.end(),
                                    [&](const EventCompletion& e) { return e.event == w.event1; });
  EXPECT_EQ(e1_done->stream, w.stream1);
}

// Every API call carries this thread's gettid and its runtime name without the version suffix;
// nothing was dropped.
void expect_api_calls_on_this_thread(const RecordSet& r) {
  ASSERT_FALSE(r.api.empty());
  const uint32_t me = CuptiTracer::this_thread_id();
  EXPECT_TRUE(std::all_of(r.api.begin(), r.api.end(), [&](const ApiCall& a) {
    return a.thread == me && a.start_ns <= a.end_ns;
  }));
  EXPECT_TRUE(std::any_of(r.api.begin(), r.api.end(),
                          [](const ApiCall& a) { return a.name == "cudaMemcpyAsync"; }));
  EXPECT_EQ(r.dropped_records, 0u);
}

}  // namespace

TEST(GpuCupti, IdsTimelineAndThreadsMatchWhatCuptiRecords) {
  if (!have_gpu()) return;
  CuptiTracer tracer;  // throws, failing the test, when CUPTI cannot be loaded or set up
  EXPECT_FALSE(tracer.clock_note().empty());
  EXPECT_FALSE(CuptiTracer::library_path().empty());

  cudaStream_t s1 = nullptr, s2 = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e1 = nullptr, e2 = nullptr;
  ASSERT_CUDA(cudaEventCreate(&e1));
  ASSERT_CUDA(cudaEventCreate(&e2));
  constexpr size_t kBytes = size_t{1} << 20;
  void* src = nullptr;
  void* dst = nullptr;
  ASSERT_CUDA(cudaMalloc(&src, kBytes));
  ASSERT_CUDA(cudaMalloc(&dst, kBytes));

  TracedWork w;
  w.stream1 = tracer.stream_id(s1);
  w.stream2 = tracer.stream_id(s2);
  EXPECT_NE(w.stream1, w.stream2);
  w.event1 = tracer.event_id(e1, s1);
  w.event2 = tracer.event_id(e2, s2);
  EXPECT_NE(w.event1, w.event2);
  tracer.take();  // drop the id probes' own records: only the work below is checked

  ASSERT_NO_FATAL_FAILURE(issue_copy_and_handoff(s1, s2, e1, e2, src, dst, kBytes, w));
  const RecordSet r = tracer.take();
  ASSERT_NO_FATAL_FAILURE(expect_gpu_work_on_its_stream(r, w));
  expect_stream_wait_recorded(r, w);
  ASSERT_NO_FATAL_FAILURE(expect_events_completed_in_window(r, w));
  ASSERT_NO_FATAL_FAILURE(expect_api_calls_on_this_thread(r));

  ASSERT_CUDA(cudaFree(src));
  ASSERT_CUDA(cudaFree(dst));
  ASSERT_CUDA(cudaEventDestroy(e1));
  ASSERT_CUDA(cudaEventDestroy(e2));
  ASSERT_CUDA(cudaStreamDestroy(s1));
  ASSERT_CUDA(cudaStreamDestroy(s2));
}

TEST(GpuCupti, SecondTracerInOneProcessIsRefused) {
  if (!have_gpu()) return;
  CuptiTracer first;
  EXPECT_THROW(CuptiTracer second, commtool::Error);
}

TEST(GpuCupti, PausedTracerRecordsNothing) {
  if (!have_gpu()) return;
  CuptiTracer tracer;
  cudaStream_t s = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* buf = nullptr;
  ASSERT_CUDA(cudaMalloc(&buf, 4096));
  tracer.take();
  tracer.pause();
  ASSERT_CUDA(cudaMemsetAsync(buf, 0, 4096, s));
  ASSERT_CUDA(cudaStreamSynchronize(s));
  EXPECT_TRUE(tracer.take().gpu.empty());
  tracer.resume();
  ASSERT_CUDA(cudaMemsetAsync(buf, 0, 4096, s));
  ASSERT_CUDA(cudaStreamSynchronize(s));
  EXPECT_EQ(tracer.take().gpu.size(), 1u);
  ASSERT_CUDA(cudaFree(buf));
  ASSERT_CUDA(cudaStreamDestroy(s));
}
