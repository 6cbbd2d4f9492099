// How fast `commtool report DIR` re-analyses saved records: parse_records and attribute on a
// synthetic run shaped like a real one, timed apart and together. The target: at least five
// million records per second on one CPU core.
//
//   bench_report [OPERATIONS [RANKS]]   default 125000 operations, 17 records each (2.1 M
//                                       records); with RANKS also a saved run of that many
//                                       operations on each of RANKS ranks
//
// The saved run is the whole of `commtool report DIR`: run.json with a traced and an untraced
// sample per operation over 25 sizes and 4 modes, a records file per rank, read back by
// load_run (every check included), analysed and rendered as text.
//
// Two figures, because they differ by 4x on some virtual machines: "cold" is the first
// parse + attribute in the process, paying the kernel for every fresh page it touches (what one
// `commtool report` run pays); "warm" is the median of 5 repeats with the allocator keeping its
// memory (mallopt below), which is the code's own cost. On bare metal a page fault costs ~0.2 us
// and the two are close; under a paravirtualised kernel a fault can cost 10 us, and the ~200 MB a
// run of this size allocates then costs more than parsing it.
#include <malloc.h>
#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include <filesystem>

#include "reports/trace/trace_report.hpp"
#include "tracing/trace/attribution.hpp"
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/trace_analysis.hpp"

using namespace commtool::tracing;

namespace {

// Ids as one rank of a PyTorch job shows them: one host thread, a compute stream that both
// makes the input and consumes the result, NCCL's stream, and events re-recorded every
// iteration under the same ids.
constexpr uint32_t kThread = 4242, kCompute = 7, kNccl = 13;
constexpr uint32_t kInputEvent = 100, kEndEvent = 101, kTimingEvent = 102;
constexpr uint64_t kEpochNs = 1'700'000'000'000'000'000;  // CUPTI timestamps are 19 digits
constexpr uint64_t kPeriodNs = 50'000;                    // one collective every 50 us

const char* const kComputeKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
const char* const kNcclKernel =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

// Per operation: 8 API calls, 2 GPU works, 2 stream waits, 3 event completions, 1 NVTX range,
// 1 operation mark.
void add_operation(RecordSet& r, uint64_t seq) {
  uint64_t b = kEpochNs + seq * kPeriodNs;
  uint32_t c = static_cast<uint32_t>(1000 + seq * 8);
  const char* calls[8] = {"cudaLaunchKernel",    "cudaEventRecord",  "cudaStreamWaitEvent",
                          "cudaEventRecord",     "cuLaunchKernelEx", "cudaEventRecord",
                          "cudaStreamWaitEvent", "cudaLaunchKernel"};
  for (uint32_t i = 0; i < 8; ++i) {
    uint64_t start = b + i * 1000;
    r.api.push_back({c + i, kThread, start, start + 800 + (seq * 37 + i) % 200, calls[i]});
  }
  r.gpu.push_back({GpuWorkKind::kKernel, kCompute, c, b + 8'000, b + 28'000, kComputeKernel});
  r.gpu.push_back({GpuWorkKind::kKernel, kNccl, c + 4, b + 28'500, b + 43'500, kNcclKernel});
  r.stream_waits.push_back({kNccl, kInputEvent, b + 2'000, b + 2'800});
  r.stream_waits.push_back({kCompute, kEndEvent, b + 6'000, b + 6'800});
  r.events.push_back({kInputEvent, kCompute, b + 28'000});
  r.events.push_back({kTimingEvent, kNccl, b + 28'400});
  r.events.push_back({kEndEvent, kNccl, b + 43'600});
  r.ranges.push_back({kThread, b + 3'900, b + 5'000, "NCCL", "ncclAllReduce"});
  OperationMark op;
  op.seq = seq;
  op.thread = kThread;
  op.producer_stream = kCompute;
  op.nccl_stream = kNccl;
  op.consumer_stream = kCompute;
  op.input_ready_event = kInputEvent;
  op.end_event = kEndEvent;
  op.enqueue_start_ns = b + 1'900;
  op.enqueue_end_ns = b + 5'900;
  op.wait_start_ns = b + 6'000;
  op.wait_end_ns = b + 6'900;
  r.operations.push_back(op);
}

size_t record_count(const RecordSet& r) {
  return r.gpu.size() + r.api.size() + r.stream_waits.size() + r.events.size() +
         r.operations.size() + r.ranges.size();
}

template <class Fn>
double median_seconds(Fn fn) {
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[2];
}

void print(const char* what, size_t records, double seconds) {
  std::printf("%-20s %8.1f ms  %6.2f M records/s\n", what, seconds * 1e3,
              static_cast<double>(records) / seconds / 1e6);
}

// `ops` operations per rank, each traced (with its records) and untraced, spread over 25 sizes
// (8 B to 128 MiB) and the four modes, ranks' records alike but for their ids' meaning.
TraceRun saved_shape(uint64_t ops, int ranks) {
  TraceRun run;
  RunMeta& m = run.meta;
  m.nranks = ranks;
  for (uint64_t b = 8; b <= (128u << 20); b *= 2)
    m.sizes.push_back(b);
  m.modes = {CompletionMode::kSync, CompletionMode::kAsyncWait, CompletionMode::kDeviceSync,
             CompletionMode::kBlockingWait};
  m.iters = static_cast<int>(std::max<uint64_t>(1, ops / (m.sizes.size() * m.modes.size())));
  for (int rank = 0; rank < ranks; ++rank) {
    RankRun r;
    r.rank = rank;
    r.bus_id = "0000:00:06.0";
    r.gpu_name = "bench";
    for (uint64_t seq = 0; seq < ops; ++seq) {
      add_operation(r.records, seq);
      const uint64_t group = seq * m.sizes.size() * m.modes.size() / ops;
      const uint64_t bytes = m.sizes[group / m.modes.size()];
      const CompletionMode mode = m.modes[group % m.modes.size()];
      const double t = 10.0 + static_cast<double>(seq % 97);
      r.samples.push_back({seq, bytes, mode, 0, true, t, 5.0, 0});
      r.samples.push_back({ops + seq, bytes, mode, 0, false, t / 2, 4.0, 0});
    }
    run.ranks.push_back(std::move(r));
  }
  return run;
}

void bench_saved_run(uint64_t ops, int ranks) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("commtool-bench-" + std::to_string(getpid()));
  fs::remove_all(dir);
  TraceRun run = saved_shape(ops, ranks);
  size_t records = 0;
  for (const RankRun& r : run.ranks)
    records += record_count(r.records);
  save_run(dir.string(), run);
  run = TraceRun();
  auto t0 = std::chrono::steady_clock::now();
  TraceRun back = load_run(dir.string());
  auto t1 = std::chrono::steady_clock::now();
  TraceReport report = analyse(back);
  auto t2 = std::chrono::steady_clock::now();
  const std::string text = commtool::reports::render_trace_text(report);
  auto t3 = std::chrono::steady_clock::now();
  fs::remove_all(dir);
  auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::printf("saved run: %d rank(s), %zu records, %zu lines of report\n", ranks, records,
              static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
  print("  load_run", records, s(t0, t1));
  print("  analyse", records, s(t1, t2));
  print("  render", records, s(t2, t3));
  print("  report, cold", records, s(t0, t3));
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory for the next repeat: large blocks from the heap, never returned.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT32_MAX);
  uint64_t ops = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 125'000;
  if (ops == 0) {
    std::fprintf(stderr, "usage: bench_report [OPERATIONS > 0]\n");
    return 2;
  }
  RecordSet run;
  for (uint64_t seq = 0; seq < ops; ++seq)
    add_operation(run, seq);
  size_t records = record_count(run);
  std::string text;
  double serialize_s = median_seconds([&] { text = serialize_records(run); });
  std::printf("%llu operations, %zu records, %.1f MB of text; median of 5 runs\n",
              static_cast<unsigned long long>(ops), records,
              static_cast<double>(text.size()) / 1e6);

  auto t0 = std::chrono::steady_clock::now();
  Attribution a = attribute(parse_records(text, "bench"));
  double cold_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  RecordSet parsed;
  double parse_s = median_seconds([&] { parsed = parse_records(text, "bench"); });
  double attribute_s = median_seconds([&] { a = attribute(parsed); });
  double both_s = median_seconds([&] { a = attribute(parse_records(text, "bench")); });

  print("serialize_records", records, serialize_s);
  print("parse_records", records, parse_s);
  print("attribute", records, attribute_s);
  print("parse + attribute", records, both_s);
  print("  the same, cold", records, cold_s);
  // A benchmark of the wrong answer is worthless: every operation must be fully attributed.
  bool complete =
      a.warnings.empty() && a.operations.size() == ops &&
      std::all_of(a.operations.begin(), a.operations.end(), [](const auto& op) {
        return op.kernel_us && *op.kernel_us == 15.0 && op.input_wait_us && op.exposed_wait_us;
      });
  if (!complete) {
    std::fprintf(stderr, "attribution incomplete: %zu warnings\n", a.warnings.size());
    return 1;
  }
  if (argc > 2) bench_saved_run(ops, std::max(1, std::atoi(argv[2])));
  return 0;
}
