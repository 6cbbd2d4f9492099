// The worker side of commtool's IPC all-reduce (ipc_allreduce_task.hpp): the check task (is
// every output exact and alike on every rank?) and the time task (one-shot against two-shot per
// size), and the launcher's calls that run them and gather the ranks' results.
#include "tracing/allreduce/ipc_allreduce_task.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/memory.hpp"
#include "probes/base/error.hpp"
#include "probes/base/measure/statistics.hpp"
#include "probes/base/workers/launcher.hpp"
#include "probes/base/workers/worker.hpp"

namespace commtool::tracing {

namespace {

using nlohmann::json;

// One element of type t from a double it holds exactly, as raw bytes.
void store(DataType t, double v, unsigned char* at) {
  if (t == DataType::kFloat32) {
    const float f = static_cast<float>(v);
    std::memcpy(at, &f, sizeof f);
  } else if (t == DataType::kBfloat16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(static_cast<float>(v));
    std::memcpy(at, &b, sizeof b);
  } else {
    const __half h = __float2half_rn(static_cast<float>(v));
    std::memcpy(at, &h, sizeof h);
  }
}

// The reference: the exact sum rounded once to the type, as the kernel's float sum is exact
// for these inputs and then rounded once.
std::vector<unsigned char> reference(DataType t, int ranks, uint64_t count, uint32_t seed) {
  const size_t e = type_size(t);
  std::vector<unsigned char> out(count * e);
  for (uint64_t i = 0; i < count; ++i) {
    double sum = 0;
    for (int r = 0; r < ranks; ++r)
      sum += ipc_input_value(r, i, seed);
    store(t, sum, out.data() + i * e);
  }
  return out;
}

IpcLayout layout_named(const std::string& name) {
  for (IpcLayout l :
       {IpcLayout::kAligned, IpcLayout::kOffset, IpcLayout::kMixed, IpcLayout::kInPlace}) {
    if (name == to_string(l)) return l;
  }
  throw usage_error(fmt::format("IPC check layout \"{}\": not one the check knows", name));
}

// This rank's input and output for `layout` within allocations `in` and `out` (one element
// longer than any buffer asked).
std::pair<unsigned char*, unsigned char*> place(IpcLayout layout, int rank, size_t element,
                                                const cuda::DeviceBuffer& in,
                                                const cuda::DeviceBuffer& out) {
  auto* i = static_cast<unsigned char*>(in.get());
  auto* o = static_cast<unsigned char*>(out.get());
  const bool offset =
      layout == IpcLayout::kOffset || (layout == IpcLayout::kMixed && rank % 2 == 1);
  if (offset) return {i + element, o + element};
  return {i, layout == IpcLayout::kInPlace ? i : o};
}

// One case: `repeats` calls with new data each; returns {wrong elements, ranks agree}.
std::pair<uint64_t, bool> check_case(workers::WorkerContext& ctx, IpcAllReduce& ar, IpcAlgorithm a,
                                     DataType t, uint64_t count, IpcLayout layout, int repeats,
                                     uint32_t& seed, const cuda::DeviceBuffer& in_buffer,
                                     const cuda::DeviceBuffer& out_buffer) {
  cuda::Stream stream;
  cuda::Event done;
  const size_t e = type_size(t), bytes = count * e;
  std::vector<unsigned char> host(bytes), got(bytes);
  const auto [in, out] = place(layout, ctx.rank, e, in_buffer, out_buffer);
  uint64_t wrong = 0;
  bool agree = true;
  for (int k = 0; k < repeats; ++k, ++seed) {
    for (uint64_t i = 0; i < count; ++i)
      store(t, ipc_input_value(ctx.rank, i, seed), host.data() + i * e);
    CUDA_TRY(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice));
    // Poison: a skipped element is wrong (in place the input stands in for it, which at
    // more than one rank differs from the sum).
    if (out != in) CUDA_TRY(cudaMemset(out, 0xff, bytes));
    CUDA_TRY(cudaDeviceSynchronize());
    ctx.comm.barrier();
    ar.run(a, in, out, count, t, stream.get());
    CUDA_TRY(cudaEventRecord(done.get(), stream.get()));
    CUDA_TRY(cudaEventSynchronize(done.get()));  // the kernel's waits are bounded
    if (const int peer = ar.timed_out_peer(); peer >= 0) {
      throw Error(ExitCode::kTimeout,
                  fmt::format("rank {}: {} of {} elements: rank {} never reached the "
                              "barrier within {:.1f} s",
                              ctx.rank, to_string(a), count, peer, ctx.timeout.count()));
    }
    CUDA_TRY(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost));
    const std::vector<unsigned char> ref = reference(t, ctx.size, count, seed);
    for (uint64_t i = 0; i < count; ++i)
      wrong += std::memcmp(got.data() + i * e, ref.data() + i * e, e) != 0;
    // Bitwise agreement across ranks, through a digest of the output.
    uint64_t digest = 1469598103934665603ull;
    for (size_t b = 0; b < bytes; ++b)
      digest = (digest ^ got[b]) * 1099511628211ull;
    const std::vector<std::string> all = ctx.comm.allgather(std::to_string(digest));
    for (const std::string& d : all)
      agree = agree && d == all.front();
  }
  return {wrong, agree};
}

json run_check(workers::WorkerContext& ctx, const json& task) {
  CUDA_TRY(cudaSetDevice(ctx.device));
  const auto counts = task.at("counts").get<std::vector<uint64_t>>();
  const int repeats = task.at("repeats").get<int>();
  std::vector<DataType> dtypes;
  for (const json& d : task.at("dtypes"))
    dtypes.push_back(*parse_data_type(d.get<std::string>()));
  std::vector<IpcLayout> layouts;
  for (const json& l : task.at("layouts"))
    layouts.push_back(layout_named(l.get<std::string>()));
  uint64_t max_bytes = 1;
  for (uint64_t c : counts)
    max_bytes = std::max<uint64_t>(max_bytes, c * 4);

  IpcAllReduce ar(ctx.comm, max_bytes, ctx.timeout);
  const cuda::DeviceBuffer in(max_bytes + 4), out(max_bytes + 4);  // room for an offset
  json cases = json::array();
  uint32_t seed = 1;
  for (IpcAlgorithm a : {IpcAlgorithm::kOneShot, IpcAlgorithm::kTwoShot}) {
    for (DataType t : dtypes) {
      for (IpcLayout layout : layouts) {
        for (uint64_t count : counts) {
          const auto [wrong, agree] =
              check_case(ctx, ar, a, t, count, layout, repeats, seed, in, out);
          cases.push_back({{"algorithm", to_string(a)},
                           {"dtype", to_string(t)},
                           {"layout", to_string(layout)},
                           {"count", count},
                           {"repeats", repeats},
                           {"wrong", wrong},
                           {"ranks_agree", agree}});
        }
      }
    }
  }
  ctx.comm.barrier();  // no rank unmaps a buffer a peer still reads
  return {{"rank", ctx.rank}, {"cases", cases}};
}

// The algorithms run_time times, in the order they take turns and are reported.
constexpr IpcAlgorithm kTimedAlgorithms[] = {IpcAlgorithm::kOneShot, IpcAlgorithm::kTwoShot};

// Empty where this rank's GPU can map every other rank's memory (ranks on one GPU always can),
// else the first GPU it cannot access.
std::string peer_access_problem(const workers::WorkerContext& ctx,
                                const std::vector<int>& devices) {
  std::string no_peer;
  for (int d : devices) {
    int can = 1;
    if (d != ctx.device) CUDA_TRY(cudaDeviceCanAccessPeer(&can, ctx.device, d));
    if (!can && no_peer.empty()) {
      no_peer = fmt::format("GPU {} cannot access GPU {} (cudaDeviceCanAccessPeer)", ctx.device, d);
    }
  }
  return no_peer;
}

// What the timed runs work on: `pristine` holds this rank's input, copied into `in` before each
// run; `expected` holds the reference that `out` is compared with on the GPU, the differing
// bytes counted into `wrong` (pinned, so the host reads it after the stream synchronises).
struct TimedBuffers {
  explicit TimedBuffers(uint64_t max_bytes)
      : pristine(max_bytes),
        in(max_bytes),
        out(max_bytes),
        expected(max_bytes),
        wrong(sizeof(unsigned long long), -1),
        counter(static_cast<unsigned long long*>(wrong.get())) {}

  cuda::DeviceBuffer pristine, in, out, expected;
  cuda::PinnedHostBuffer wrong;
  unsigned long long* counter;
  cuda::Stream stream;
  cuda::Event start, end;
};

// Writes this rank's input of `count` elements to `pristine` and the reference sum to
// `expected`; `host` is scratch of at least count elements.
void load_inputs(const workers::WorkerContext& ctx, TimedBuffers& b, DataType t, uint64_t count,
                 std::vector<unsigned char>& host) {
  constexpr uint32_t kSeed = 7;
  const size_t e = type_size(t);
  for (uint64_t i = 0; i < count; ++i)
    store(t, ipc_input_value(ctx.rank, i, kSeed), host.data() + i * e);
  CUDA_TRY(cudaMemcpy(b.pristine.get(), host.data(), count * e, cudaMemcpyHostToDevice));
  const std::vector<unsigned char> ref = reference(t, ctx.size, count, kSeed);
  CUDA_TRY(cudaMemcpy(b.expected.get(), ref.data(), count * e, cudaMemcpyHostToDevice));
}

// One timed all-reduce of `count` elements (`bytes` as asked, for the message) with
// `algorithm`, its wrong bytes counted into b.counter. Returns the GPU time in ms.
float time_one_run(workers::WorkerContext& ctx, IpcAllReduce& ar, TimedBuffers& b,
                   IpcAlgorithm algorithm, DataType t, uint64_t count, uint64_t bytes) {
  const size_t e = type_size(t);
  *static_cast<volatile unsigned long long*>(b.counter) = 0;
  ctx.comm.barrier();
  // As trace issues NCCL's all-reduce: the input is written on the GPU just before the
  // call (here a copy of it), so the start event fires when the input is ready, not
  // while the host is still launching. The output is poisoned: a skipped element shows.
  CUDA_TRY(cudaMemsetAsync(b.out.get(), 0xff, count * e, b.stream.get()));
  CUDA_TRY(cudaMemcpyAsync(b.in.get(), b.pristine.get(), count * e, cudaMemcpyDeviceToDevice,
                           b.stream.get()));
  CUDA_TRY(cudaEventRecord(b.start.get(), b.stream.get()));
  ar.run(algorithm, b.in.get(), b.out.get(), count, t, b.stream.get());
  CUDA_TRY(cudaEventRecord(b.end.get(), b.stream.get()));
  launch_count_differences(b.stream.get(), b.out.get(), b.expected.get(), count * e, b.counter);
  CUDA_TRY(cudaStreamSynchronize(b.stream.get()));  // the kernel's waits are bounded
  if (const int peer = ar.timed_out_peer(); peer >= 0) {
    throw Error(ExitCode::kTimeout,
                fmt::format("rank {}: {} of {} bytes: rank {} never reached the barrier "
                            "within {:.1f} s",
                            ctx.rank, to_string(algorithm), bytes, peer, ctx.timeout.count()));
  }
  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, b.start.get(), b.end.get()));
  return ms;
}

// Times every algorithm at one size, warmup + iters runs each, the algorithms taking turns so
// drift falls on both; appends each one's times and wrong bytes to per_algorithm[k].
void time_size(workers::WorkerContext& ctx, IpcAllReduce& ar, TimedBuffers& b, DataType t,
               uint64_t bytes, int warmup, int iters, std::vector<json>& per_algorithm) {
  const size_t e = type_size(t);
  const uint64_t count = bytes / e;
  std::vector<std::vector<double>> us(2);
  uint64_t wrong_bytes[2] = {0, 0};
  for (int i = 0; i < warmup + iters; ++i) {
    for (int k = 0; k < 2; ++k) {
      const float ms = time_one_run(ctx, ar, b, kTimedAlgorithms[k], t, count, bytes);
      if (i >= warmup) {
        us[static_cast<size_t>(k)].push_back(ms * 1e3);
        wrong_bytes[k] += *static_cast<volatile unsigned long long*>(b.counter);
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    per_algorithm[static_cast<size_t>(k)].push_back(
        {{"bytes", count * e}, {"us", us[static_cast<size_t>(k)]}, {"wrong", wrong_bytes[k]}});
  }
}

json run_time(workers::WorkerContext& ctx, const json& task) {
  CUDA_TRY(cudaSetDevice(ctx.device));
  const auto sizes = task.at("sizes").get<std::vector<uint64_t>>();
  const DataType t = *parse_data_type(task.at("dtype").get<std::string>());
  const int iters = task.at("iters").get<int>();
  const int warmup = task.at("warmup").get<int>();
  uint64_t max_bytes = type_size(t);
  for (uint64_t b : sizes)
    max_bytes = std::max(max_bytes, b);

  // Only where every pair of ranks can map each other's memory: ranks on one GPU always can.
  const std::string no_peer = peer_access_problem(ctx, task.at("devices").get<std::vector<int>>());
  for (const std::string& why : ctx.comm.allgather(no_peer)) {
    if (!why.empty()) return {{"rank", ctx.rank}, {"not_applicable", why}};
  }

  IpcAllReduce ar(ctx.comm, max_bytes, ctx.timeout);
  TimedBuffers buffers(max_bytes);
  std::vector<unsigned char> host(max_bytes);
  std::vector<json> per_algorithm(2, json::array());
  for (uint64_t bytes : sizes) {
    load_inputs(ctx, buffers, t, bytes / type_size(t), host);
    time_size(ctx, ar, buffers, t, bytes, warmup, iters, per_algorithm);
  }
  ctx.comm.barrier();  // no rank unmaps a buffer a peer still reads
  json paths = json::array();
  for (int k = 0; k < 2; ++k) {
    paths.push_back({{"algorithm", to_string(kTimedAlgorithms[k])},
                     {"sizes", per_algorithm[static_cast<size_t>(k)]}});
  }
  return {{"rank", ctx.rank}, {"paths", paths}};
}

IpcAlgorithm algorithm_named(const json& name) {
  return name == to_string(IpcAlgorithm::kOneShot) ? IpcAlgorithm::kOneShot
                                                   : IpcAlgorithm::kTwoShot;
}

std::vector<workers::WorkerSpec> specs_for(const std::vector<int>& devices) {
  std::vector<workers::WorkerSpec> specs;
  for (size_t r = 0; r < devices.size(); ++r)
    specs.push_back({static_cast<int>(r), devices[r]});
  return specs;
}

}  // namespace

std::vector<IpcTimedPath> time_ipc_allreduce(const IpcTimeRequest& q) {
  const json task = {{"name", kIpcTimeTask},        {"sizes", q.sizes}, {"devices", q.devices},
                     {"dtype", to_string(q.dtype)}, {"iters", q.iters}, {"warmup", q.warmup}};
  const std::vector<json> results = workers::run_workers_or_throw(
      q.executable, specs_for(q.devices), task, std::chrono::duration<double>(q.timeout_s));
  for (const json& r : results) {
    if (r.contains("not_applicable")) {
      throw Error(ExitCode::kEnvironment, r.at("not_applicable").get<std::string>());
    }
  }
  // Every rank ran the same paths and sizes in the same order: rank 0's give the shape.
  std::vector<IpcTimedPath> out;
  const json& first = results.front().at("paths");
  for (size_t k = 0; k < first.size(); ++k) {
    IpcTimedPath path;
    path.algorithm = algorithm_named(first[k].at("algorithm"));
    for (size_t i = 0; i < first[k].at("sizes").size(); ++i) {
      IpcTimedSize size;
      size.bytes = first[k].at("sizes")[i].at("bytes").get<uint64_t>();
      std::vector<std::vector<double>> rank_us;
      for (const json& r : results) {
        const json& s = r.at("paths")[k].at("sizes")[i];
        rank_us.push_back(s.at("us").get<std::vector<double>>());
        size.wrong_bytes += s.at("wrong").get<uint64_t>();
      }
      size.slowest_us = measure::slowest_per_operation(rank_us);
      path.sizes.push_back(std::move(size));
    }
    out.push_back(std::move(path));
  }
  return out;
}

double ipc_input_value(int rank, uint64_t index, uint32_t seed) {
  uint64_t h = (index + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) << 40) ^
               (static_cast<uint64_t>(seed) << 20);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  const int k = static_cast<int>(h % 511) - 255;
  return k / 256.0;
}

void register_ipc_allreduce_tasks() {
  workers::register_task(kIpcCheckTask, run_check);
  workers::register_task(kIpcTimeTask, run_time);
}

const char* to_string(IpcLayout l) {
  switch (l) {
    case IpcLayout::kAligned:
      return "aligned";
    case IpcLayout::kOffset:
      return "offset";
    case IpcLayout::kMixed:
      return "mixed";
    case IpcLayout::kInPlace:
      return "in-place";
  }
  return "?";
}

std::vector<IpcCheckCase> check_ipc_allreduce(const IpcCheckRequest& q) {
  json dtypes = json::array();
  for (DataType t : q.dtypes)
    dtypes.push_back(to_string(t));
  json layouts = json::array();
  for (IpcLayout l : q.layouts)
    layouts.push_back(to_string(l));
  const json task = {{"name", kIpcCheckTask},
                     {"counts", q.counts},
                     {"dtypes", dtypes},
                     {"layouts", layouts},
                     {"repeats", q.repeats}};
  const std::vector<json> results = workers::run_workers_or_throw(
      q.executable, specs_for(q.devices), task, std::chrono::duration<double>(q.timeout_s));
  std::vector<IpcCheckCase> out;
  for (const json& r : results) {
    const json& cases = r.at("cases");
    if (out.empty()) out.resize(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const json& c = cases[i];
      IpcCheckCase& o = out[i];
      o.algorithm = algorithm_named(c.at("algorithm"));
      o.dtype = *parse_data_type(c.at("dtype").get<std::string>());
      o.count = c.at("count").get<uint64_t>();
      o.layout = layout_named(c.at("layout").get<std::string>());
      o.repeats = c.at("repeats").get<int>();
      o.wrong += c.at("wrong").get<uint64_t>();
      o.ranks_agree = o.ranks_agree && c.at("ranks_agree").get<bool>();
    }
  }
  return out;
}

}  // namespace commtool::tracing
