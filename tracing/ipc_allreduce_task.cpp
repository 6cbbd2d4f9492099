#include "tracing/ipc_allreduce_task.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "probes/cuda/cuda_check.hpp"
#include "probes/cuda/memory.hpp"
#include "probes/error.hpp"
#include "probes/workers/launcher.hpp"
#include "probes/workers/worker.hpp"

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

json run_check(workers::WorkerContext& ctx, const json& task) {
  CUDA_TRY(cudaSetDevice(ctx.device));
  const auto counts = task.at("counts").get<std::vector<uint64_t>>();
  const int repeats = task.at("repeats").get<int>();
  std::vector<DataType> dtypes;
  for (const json& d : task.at("dtypes"))
    dtypes.push_back(*parse_data_type(d.get<std::string>()));
  uint64_t max_bytes = 1;
  for (uint64_t c : counts)
    max_bytes = std::max<uint64_t>(max_bytes, c * 4);

  IpcAllReduce ar(ctx.comm, max_bytes, ctx.timeout);
  cuda::DeviceBuffer in(max_bytes), out(max_bytes);
  cuda::Stream stream;
  cuda::Event done;
  std::vector<unsigned char> host(max_bytes), got(max_bytes);
  json cases = json::array();
  uint32_t seed = 1;
  for (IpcAlgorithm a : {IpcAlgorithm::kOneShot, IpcAlgorithm::kTwoShot}) {
    for (DataType t : dtypes) {
      for (uint64_t count : counts) {
        const size_t bytes = count * type_size(t);
        uint64_t wrong = 0;
        bool agree = true;
        for (int k = 0; k < repeats; ++k, ++seed) {
          for (uint64_t i = 0; i < count; ++i)
            store(t, ipc_input_value(ctx.rank, i, seed), host.data() + i * type_size(t));
          CUDA_TRY(cudaMemcpy(in.get(), host.data(), bytes, cudaMemcpyHostToDevice));
          CUDA_TRY(cudaMemset(out.get(), 0xff, bytes));  // poison: a skipped element is wrong
          CUDA_TRY(cudaDeviceSynchronize());
          ctx.comm.barrier();
          ar.run(a, in.get(), out.get(), count, t, stream.get());
          CUDA_TRY(cudaEventRecord(done.get(), stream.get()));
          CUDA_TRY(cudaEventSynchronize(done.get()));  // the kernel's waits are bounded
          if (const int peer = ar.timed_out_peer(); peer >= 0) {
            throw Error(ExitCode::kTimeout,
                        fmt::format("rank {}: {} of {} elements: rank {} never reached the "
                                    "barrier within {:.1f} s",
                                    ctx.rank, to_string(a), count, peer, ctx.timeout.count()));
          }
          CUDA_TRY(cudaMemcpy(got.data(), out.get(), bytes, cudaMemcpyDeviceToHost));
          const std::vector<unsigned char> ref = reference(t, ctx.size, count, seed);
          const size_t e = type_size(t);
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
        cases.push_back({{"algorithm", to_string(a)},
                         {"dtype", to_string(t)},
                         {"count", count},
                         {"repeats", repeats},
                         {"wrong", wrong},
                         {"ranks_agree", agree}});
      }
    }
  }
  ctx.comm.barrier();  // no rank unmaps a buffer a peer still reads
  return {{"rank", ctx.rank}, {"cases", cases}};
}

}  // namespace

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
}

std::vector<IpcCheckCase> check_ipc_allreduce(const IpcCheckRequest& q) {
  std::vector<workers::WorkerSpec> specs;
  for (size_t r = 0; r < q.devices.size(); ++r)
    specs.push_back({static_cast<int>(r), q.devices[r]});
  json dtypes = json::array();
  for (DataType t : q.dtypes)
    dtypes.push_back(to_string(t));
  const json task = {
      {"name", kIpcCheckTask}, {"counts", q.counts}, {"dtypes", dtypes}, {"repeats", q.repeats}};
  workers::GroupOutcome outcome =
      workers::run_workers(q.executable, specs, task, std::chrono::duration<double>(q.timeout_s));
  if (outcome.failure) throw Error(outcome.failure->code, outcome.failure->what);
  std::vector<IpcCheckCase> out;
  for (const json& r : outcome.results) {
    const json& cases = r.at("cases");
    if (out.empty()) out.resize(cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const json& c = cases[i];
      IpcCheckCase& o = out[i];
      o.algorithm = c.at("algorithm") == to_string(IpcAlgorithm::kOneShot) ? IpcAlgorithm::kOneShot
                                                                           : IpcAlgorithm::kTwoShot;
      o.dtype = *parse_data_type(c.at("dtype").get<std::string>());
      o.count = c.at("count").get<uint64_t>();
      o.repeats = c.at("repeats").get<int>();
      o.wrong += c.at("wrong").get<uint64_t>();
      o.ranks_agree = o.ranks_agree && c.at("ranks_agree").get<bool>();
    }
  }
  return out;
}

}  // namespace commtool::tracing
