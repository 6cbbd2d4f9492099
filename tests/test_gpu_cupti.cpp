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

  const uint32_t stream1 = tracer.stream_id(s1);
  const uint32_t stream2 = tracer.stream_id(s2);
  EXPECT_NE(stream1, stream2);
  const uint32_t event1 = tracer.event_id(e1, s1);
  const uint32_t event2 = tracer.event_id(e2, s2);
  EXPECT_NE(event1, event2);
  tracer.take();  // drop the id probes' own records: only the work below is checked

  const uint64_t before_ns = monotonic_ns();
  ASSERT_CUDA(cudaMemsetAsync(src, 0x5a, kBytes, s1));
  ASSERT_CUDA(cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice, s1));
  ASSERT_CUDA(cudaEventRecord(e1, s1));
  ASSERT_CUDA(cudaStreamWaitEvent(s2, e1, 0));
  ASSERT_CUDA(cudaEventRecord(e2, s2));
  ASSERT_CUDA(cudaStreamSynchronize(s2));
  ASSERT_CUDA(cudaStreamSynchronize(s1));
  const uint64_t after_ns = monotonic_ns();
  const RecordSet r = tracer.take();

  auto work_on = [&](GpuWorkKind kind, uint32_t stream) {
    return std::count_if(r.gpu.begin(), r.gpu.end(), [&](const GpuWork& w) {
      return w.kind == kind && w.stream == stream && w.start_ns >= before_ns &&
             w.end_ns <= after_ns && w.start_ns <= w.end_ns;
    });
  };
  EXPECT_EQ(work_on(GpuWorkKind::kMemset, stream1), 1);
  EXPECT_EQ(work_on(GpuWorkKind::kMemcpy, stream1), 1);
  const auto copy = std::find_if(r.gpu.begin(), r.gpu.end(),
                                 [](const GpuWork& w) { return w.kind == GpuWorkKind::kMemcpy; });
  ASSERT_NE(copy, r.gpu.end());
  EXPECT_EQ(copy->name, "memcpy DtoD");

  EXPECT_TRUE(std::any_of(r.stream_waits.begin(), r.stream_waits.end(),
                          [&](const StreamWaitCall& w) {
                            return w.stream == stream2 && w.event == event1 &&
                                   w.start_ns >= before_ns && w.end_ns <= after_ns;
                          }))
      << "no stream-wait record for (stream " << stream2 << ", event " << event1 << ") among "
      << r.stream_waits.size();

  for (uint32_t id : {event1, event2}) {
    const auto done = std::find_if(r.events.begin(), r.events.end(),
                                   [&](const EventCompletion& e) { return e.event == id; });
    ASSERT_NE(done, r.events.end()) << "no completion for event " << id;
    EXPECT_GE(done->device_ns, before_ns) << "event " << id << " completed before it was issued";
    EXPECT_LE(done->device_ns, after_ns) << "event " << id << " completed after the sync returned";
  }
  const auto e1_done = std::find_if(r.events.begin(), r.events.end(),
                                    [&](const EventCompletion& e) { return e.event == event1; });
  EXPECT_EQ(e1_done->stream, stream1);

  ASSERT_FALSE(r.api.empty());
  const uint32_t me = CuptiTracer::this_thread_id();
  EXPECT_TRUE(std::all_of(r.api.begin(), r.api.end(), [&](const ApiCall& a) {
    return a.thread == me && a.start_ns <= a.end_ns;
  }));
  EXPECT_TRUE(std::any_of(r.api.begin(), r.api.end(),
                          [](const ApiCall& a) { return a.name == "cudaMemcpyAsync"; }));
  EXPECT_EQ(r.dropped_records, 0u);

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
