// Host<->device probes (host_device.hpp): copy bandwidth each way and both at once, a GPU
// thread's round trip to pinned host memory, and what one small copy costs the GPU.
#include "probes/bandwidth/host_device.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>

#include "probes/bandwidth/pointer_chase.hpp"
#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/kernels.cuh"
#include "probes/base/cuda/start_gate.hpp"
#include "probes/base/cuda/wait.hpp"
#include "probes/base/error.hpp"
#include "probes/topo/topology.hpp"

namespace commtool::probe {

bool pin_thread_to_cpus(const std::string& cpulist) {
  auto cpus = topo::parse_cpulist(cpulist);
  if (!cpus || cpus->empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : *cpus) {
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

namespace {

Measurement h2d_measurement(const GpuPlacement& gpu, std::string what, Engine engine,
                            bool to_device, bool bidirectional, uint64_t bytes, int iters,
                            std::vector<double> samples) {
  return make_measurement("h2d", std::move(what), engine, to_device ? kHost : gpu.index,
                          to_device ? gpu.index : kHost, bidirectional, bytes, iters, "GB/s",
                          std::move(samples));
}

}  // namespace

std::vector<Measurement> probe_host_device_bandwidth(const GpuPlacement& gpu, uint64_t bytes,
                                                     const RunOptions& run) {
  pin_thread_to_cpus(gpu.cpus);
  CUDA_TRY(cudaSetDevice(gpu.cuda_device));
  size_t free_bytes = 0, total = 0;
  CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
  if (2 * bytes > free_bytes) {
    throw bad_value("size", std::to_string(bytes),
                    fmt::format("GPU {} has {:.1f} GiB free and the host<->device probe needs two "
                                "buffers of that size",
                                gpu.index, static_cast<double>(free_bytes) / (1 << 30)));
  }
  cuda::PinnedHostBuffer host_a(bytes, gpu.numa_node), host_b(bytes, gpu.numa_node);
  cuda::DeviceBuffer dev_a(bytes), dev_b(bytes);
  CopyRunner runner(run);
  std::vector<Measurement> out;
  for (Engine e : {Engine::kCopyEngine, Engine::kSm}) {
    const std::string tag = fmt::format("{} on GPU {}", to_string(e), gpu.index);
    CopyJob h2d{"H2D " + tag,    gpu.cuda_device, e,     dev_a.get(),
                gpu.cuda_device, host_a.get(),    kHost, bytes};
    CopyJob d2h{"D2H " + tag, gpu.cuda_device, e,    host_b.get(), kHost,
                dev_b.get(),  gpu.cuda_device, bytes};
    out.push_back(
        h2d_measurement(gpu, "H2D", e, true, false, bytes, run.iters, runner.run({h2d})[0]));
    out.push_back(
        h2d_measurement(gpu, "D2H", e, false, false, bytes, run.iters, runner.run({d2h})[0]));
    auto both = runner.run({h2d, d2h});
    out.push_back(h2d_measurement(gpu, "H2D while D2H", e, true, true, bytes, run.iters, both[0]));
    out.push_back(h2d_measurement(gpu, "D2H while H2D", e, false, true, bytes, run.iters, both[1]));
  }
  return out;
}

namespace {

// Launches, records an event behind the work, and waits for it with the deadline.
template <typename Launch>
void run_with_deadline(cudaStream_t stream, std::chrono::duration<double> timeout,
                       const std::string& what, Launch launch) {
  cuda::Event done;
  launch();
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaEventRecord(done.get(), stream));
  cuda::wait_for_event(done, timeout, what);
}

Measurement latency_measurement(std::string what, Engine engine, int src, int dst, uint64_t bytes,
                                int iters, std::vector<double> samples) {
  return make_measurement("latency", std::move(what), engine, src, dst, false, bytes, iters, "us",
                          std::move(samples));
}

// SM round trip to host memory: chain_lines lines in pinned memory on the GPU's node, chased
// by one GPU thread.
Measurement host_round_trip(const GpuPlacement& gpu, const LatencyOptions& options,
                            const cuda::Stream& stream) {
  std::vector<uint64_t> chain = make_chase_chain(options.chain_lines, 7);
  cuda::PinnedHostBuffer host_chain(chain.size() * sizeof(uint64_t), gpu.numa_node);
  std::copy(chain.begin(), chain.end(), static_cast<uint64_t*>(host_chain.get()));
  cuda::PinnedHostBuffer result(2 * sizeof(uint64_t), -1);
  auto* r = static_cast<uint64_t*>(result.get());
  const uint64_t expected_end = follow_chain(chain, options.hops);
  std::vector<double> samples;
  for (int rep = -1; rep < options.repeats; ++rep) {  // rep -1: warm-up
    r[0] = r[1] = ~0ULL;
    run_with_deadline(stream.get(), options.timeout, "host pointer chase", [&] {
      cuda::launch_pointer_chase(stream.get(), static_cast<const uint64_t*>(host_chain.get()),
                                 options.hops, r);
    });
    if (r[0] != expected_end) {
      throw Error(ExitCode::kVerification,
                  fmt::format("host pointer chase on GPU {} ended at slot {}, expected {}",
                              gpu.index, r[0], expected_end));
    }
    if (rep >= 0) samples.push_back(static_cast<double>(r[1]) / options.hops / 1e3);
  }
  return latency_measurement("round trip", Engine::kSm, gpu.index, kHost, sizeof(uint64_t),
                             options.hops, samples);
}

// The words the small copies move: hw[0] is the value sent, hw[1] where D2H lands it.
struct SmallCopyWords {
  uint32_t* hw;
  void* dev_word;
};

// Queues `copies` 4-byte copies one way behind the closed gate, then opens it, so they run back
// to back; `start` and `end` bracket them on the GPU.
void run_small_copies(const LatencyOptions& options, const cuda::Stream& stream,
                      cuda::StartGate& gate, const SmallCopyWords& w, bool to_device,
                      const cuda::Event& start, const cuda::Event& end) {
  const auto timeout_ns = static_cast<uint64_t>(options.timeout.count() * 1e9);
  gate.close();
  gate.hold(stream.get(), timeout_ns);
  CUDA_TRY(cudaEventRecord(start.get(), stream.get()));
  run_with_deadline(stream.get(), options.timeout, "small copies", [&] {
    for (int i = 0; i < options.copies; ++i) {
      if (to_device) {
        CUDA_TRY(cudaMemcpyAsync(w.dev_word, w.hw, 4, cudaMemcpyHostToDevice, stream.get()));
      } else {
        CUDA_TRY(cudaMemcpyAsync(w.hw + 1, w.dev_word, 4, cudaMemcpyDeviceToHost, stream.get()));
      }
    }
    CUDA_TRY(cudaEventRecord(end.get(), stream.get()));
    gate.open();
  });
  if (gate.timed_out()) throw Error(ExitCode::kTimeout, "small copies: gate timed out");
}

// A 4-byte copy-engine copy one way, `copies` back to back per sample, each sample's value
// checked where it landed.
Measurement small_copy_latency(const GpuPlacement& gpu, const LatencyOptions& options,
                               const cuda::Stream& stream, cuda::StartGate& gate,
                               const SmallCopyWords& w, bool to_device) {
  std::vector<double> samples;
  for (int rep = -1; rep < options.repeats; ++rep) {
    const uint32_t value = 0xc0de0000u + static_cast<uint32_t>(rep + 1) * 2 + to_device;
    w.hw[0] = value;
    w.hw[1] = 0;
    CUDA_TRY(cudaMemsetAsync(w.dev_word, 0, 8, stream.get()));
    if (!to_device) {
      CUDA_TRY(cudaMemcpyAsync(w.dev_word, w.hw, 4, cudaMemcpyHostToDevice, stream.get()));
    }
    cuda::Event start, end;
    run_small_copies(options, stream, gate, w, to_device, start, end);
    uint32_t landed = 0;
    if (to_device) {
      CUDA_TRY(cudaMemcpy(&landed, w.dev_word, 4, cudaMemcpyDeviceToHost));
    } else {
      landed = w.hw[1];
    }
    if (landed != value) {
      throw Error(ExitCode::kVerification,
                  fmt::format("4-byte {} copy on GPU {} delivered {:#x}, expected {:#x}",
                              to_device ? "H2D" : "D2H", gpu.index, landed, value));
    }
    if (rep >= 0) {
      samples.push_back(static_cast<double>(cuda::elapsed_ms(start, end)) * 1e3 / options.copies);
    }
  }
  return latency_measurement(to_device ? "4 B copy H2D" : "4 B copy D2H", Engine::kCopyEngine,
                             to_device ? kHost : gpu.index, to_device ? gpu.index : kHost, 4,
                             options.copies, samples);
}

}  // namespace

std::vector<Measurement> probe_host_device_latency(const GpuPlacement& gpu,
                                                   const LatencyOptions& options) {
  pin_thread_to_cpus(gpu.cpus);
  CUDA_TRY(cudaSetDevice(gpu.cuda_device));
  cuda::Stream stream;
  std::vector<Measurement> out;
  out.push_back(host_round_trip(gpu, options, stream));

  // A 4-byte copy-engine copy each way, queued behind a gate and run back to back: what one
  // small cudaMemcpyAsync costs the GPU, without the host's enqueue rate in it.
  cuda::PinnedHostBuffer host_word(sizeof(uint32_t) * 2, gpu.numa_node);
  cuda::DeviceBuffer dev_word(sizeof(uint32_t) * 2);
  const SmallCopyWords words{static_cast<uint32_t*>(host_word.get()), dev_word.get()};
  cuda::StartGate gate;
  for (bool to_device : {true, false})
    out.push_back(small_copy_latency(gpu, options, stream, gate, words, to_device));
  return out;
}

}  // namespace commtool::probe
