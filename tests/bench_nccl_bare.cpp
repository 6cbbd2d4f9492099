// Not a test: the baseline `commtool trace` is held to (issue: "the harness adds nothing
// visible"). The same NCCL all-reduce on one GPU in a bare loop, timed the way trace times it:
// the input written by a kernel on a producer stream, the NCCL stream waiting on its event, CUDA
// events around the call on the NCCL stream, one operation at a time. None of the rest of the
// harness: no consumer stream, no output check, no worker process, no watchdog, no CUPTI.
// (Without the producer the start event fires on an idle stream while the host is still inside
// ncclAllReduce, so the interval would also hold the host's enqueue time: a different quantity.)
//   bench_nccl_bare BYTES ITERS    prints: bytes n median_us min_us max_us
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/memory.hpp"
#include "probes/base/measure/statistics.hpp"
#include "probes/base/nccl/communicator.hpp"
#include "tracing/collectives/collective_data.hpp"

int main(int argc, char** argv) {
  using namespace commtool;
  if (argc != 3) {
    fmt::print(stderr, "usage: bench_nccl_bare BYTES ITERS\n");
    return 2;
  }
  const size_t bytes = std::strtoull(argv[1], nullptr, 10);
  const int iters = std::atoi(argv[2]);
  try {
    CUDA_TRY(cudaSetDevice(0));
    nccl::Library lib;
    ncclUniqueId id{};
    lib.check(lib.get_unique_id(&id), "ncclGetUniqueId");
    nccl::Communicator comm(lib, id, 1, 0, std::chrono::seconds(60));
    cuda::DeviceBuffer send(bytes), recv(bytes);
    cuda::Stream producer, stream;
    cuda::Event input_ready, start, end;
    std::vector<double> us;
    for (int i = 0; i < iters + 5; ++i) {
      tracing::launch_fill_input(producer.get(), send.get(), bytes / 4, tracing::DataType::kFloat32,
                                 tracing::ReduceOp::kSum, 0, static_cast<uint32_t>(i));
      CUDA_TRY(cudaEventRecord(input_ready.get(), producer.get()));
      CUDA_TRY(cudaStreamWaitEvent(stream.get(), input_ready.get(), 0));
      CUDA_TRY(cudaEventRecord(start.get(), stream.get()));
      comm.settle(lib.all_reduce(send.get(), recv.get(), bytes / 4, ncclFloat32, ncclSum,
                                 comm.get(), stream.get()),
                  "ncclAllReduce");
      CUDA_TRY(cudaEventRecord(end.get(), stream.get()));
      comm.wait(end.get(), "ncclAllReduce");
      float ms = 0;
      CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), end.get()));
      if (i >= 5) us.push_back(ms * 1e3);
    }
    // The last output checked, as every measured collective is (outside the timed loop).
    cuda::PinnedHostBuffer wrong(sizeof(unsigned long long), -1);
    *static_cast<volatile unsigned long long*>(wrong.get()) = 0;
    tracing::launch_check_output(stream.get(), recv.get(),
                                 tracing::buffer_layout(tracing::Collective::kAllReduce,
                                                        tracing::DataType::kFloat32, bytes, 1),
                                 tracing::Collective::kAllReduce, tracing::DataType::kFloat32,
                                 tracing::ReduceOp::kSum, 0, 1, 0, static_cast<uint32_t>(iters + 4),
                                 static_cast<unsigned long long*>(wrong.get()));
    CUDA_TRY(cudaEventRecord(end.get(), stream.get()));
    comm.wait(end.get(), "the output check");
    if (const auto n = *static_cast<volatile unsigned long long*>(wrong.get()); n != 0) {
      fmt::print(stderr, "bench_nccl_bare: {} wrong elements in the last output\n", n);
      return 4;
    }
    measure::Summary s = measure::summarize(us);
    fmt::print("{} {} {:.2f} {:.2f} {:.2f}\n", bytes, s.n, s.median, s.min, s.max);
  } catch (const Error& e) {
    fmt::print(stderr, "bench_nccl_bare: {}\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
