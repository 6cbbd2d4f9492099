// Synthetic CUPTI record sets for the attribution tests and the reports built on it: one
// operation issued the way trace's and diagnose ep's harness issue it, on one timeline.
#pragma once

#include <cstdint>

#include "tracing/cupti/records.hpp"
#include "tracing/ep/ep_measure.hpp"

namespace synthetic_records {

using namespace commtool::tracing;

constexpr uint32_t kThread = 7, kProducer = 1, kNccl = 2, kConsumer = 3;
constexpr uint32_t kInputEvent = 11, kEndEvent = 12;

// One allreduce as a framework issues it, times in ns on one timeline:
//   producer kernel 0..1000 makes the input; input event completes at 1000;
//   host: enqueue 100..150 (NCCL stream waits on the input event at 105..108, the collective's
//   launch is API call `corr` at 110..140); consumer waits on the end event at 150..152;
//   NCCL work 1010..3010; end event 3015; consumer kernel 3020..3100; host wait 152..160.
inline RecordSet one_operation(uint64_t shift = 0, uint64_t seq = 1, uint32_t corr = 42,
                               GpuWorkKind kind = GpuWorkKind::kKernel) {
  RecordSet r;
  auto t = [&](uint64_t ns) { return ns + shift; };
  r.gpu.push_back({GpuWorkKind::kKernel, kProducer, corr - 1, t(0), t(1000), "producer"});
  r.events.push_back({kInputEvent, kProducer, t(1000)});
  r.stream_waits.push_back({kNccl, kInputEvent, t(105), t(108)});
  r.api.push_back({corr, kThread, t(110), t(140), "cuLaunchKernelEx"});
  r.gpu.push_back({kind, kNccl, corr, t(1010), t(3010), "ncclDevKernel_AllReduce"});
  r.events.push_back({kEndEvent, kNccl, t(3015)});
  r.stream_waits.push_back({kConsumer, kEndEvent, t(150), t(152)});
  r.gpu.push_back({GpuWorkKind::kKernel, kConsumer, corr + 1, t(3020), t(3100), "consumer"});
  OperationMark op;
  op.seq = seq;
  op.thread = kThread;
  op.producer_stream = kProducer;
  op.nccl_stream = kNccl;
  op.consumer_stream = kConsumer;
  op.input_ready_event = kInputEvent;
  op.end_event = kEndEvent;
  op.enqueue_start_ns = t(100);
  op.enqueue_end_ns = t(150);
  op.wait_start_ns = t(152);
  op.wait_end_ns = t(160);
  r.operations.push_back(op);
  return r;
}

inline void merge(RecordSet& into, const RecordSet& from) {
  into.gpu.insert(into.gpu.end(), from.gpu.begin(), from.gpu.end());
  into.api.insert(into.api.end(), from.api.begin(), from.api.end());
  into.stream_waits.insert(into.stream_waits.end(), from.stream_waits.begin(),
                           from.stream_waits.end());
  into.events.insert(into.events.end(), from.events.begin(), from.events.end());
  into.operations.insert(into.operations.end(), from.operations.begin(), from.operations.end());
}

// A traced pass of diagnose ep over m.scenarios on m.nranks ranks: `turns` turns of every
// scenario's dispatch then combine, one operation each (seq from 100: the timed pass came
// first), each exchange's CUDA-event time `traced_us`. Rank r's operations run `lag_ns * r`
// later and its kernels `longer_ns * r` longer.
inline void add_ep_traces(EpMeasurement& m, int turns, uint64_t lag_ns, uint64_t longer_ns,
                          double traced_us) {
  constexpr uint64_t kTurn = 100000;  // ns between exchanges
  for (int r = 0; r < m.nranks; ++r) {
    EpRankTrace t;
    t.rank = r;
    t.clock_note = "CLOCK_MONOTONIC via the timestamp callback";
    const uint64_t lag = lag_ns * static_cast<uint64_t>(r);
    const uint64_t longer = longer_ns * static_cast<uint64_t>(r);
    uint64_t seq = 100;
    for (int i = 0; i < turns; ++i) {
      for (const EpScenarioTimes& s : m.scenarios) {
        for (EpPhase phase : {EpPhase::kDispatch, EpPhase::kCombine}) {
          RecordSet op = one_operation(seq * kTurn + lag, seq, static_cast<uint32_t>(10 * seq));
          op.gpu[1].end_ns += longer;  // the NCCL work, its end event and the consumer after it
          op.events[1].device_ns += longer;
          op.gpu[2].start_ns += longer;
          op.gpu[2].end_ns += longer;
          merge(t.records, op);
          t.exchanges.push_back({seq, s.kind, phase, traced_us});
          ++seq;
        }
      }
    }
    m.traces.push_back(std::move(t));
  }
}

}  // namespace synthetic_records
