#include "tracing/collectives/nccl_worker.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/error.hpp"

namespace commtool::tracing {

int select_device(const std::string& bus_id) {
  int device = -1;
  cudaError_t err = cudaDeviceGetByPCIBusId(&device, bus_id.c_str());
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(ExitCode::kEnvironment,
                fmt::format("GPU {} is not visible to CUDA in the worker: {}", bus_id,
                            cuda::describe(err)));
  }
  CUDA_TRY(cudaSetDevice(device));
  return device;
}

void keep_nvlink_multicast_off() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
}

ncclUniqueId shared_unique_id(workers::WorkerContext& ctx, const nccl::Library& lib) {
  ncclUniqueId id{};
  if (ctx.rank == 0) lib.check(lib.get_unique_id(&id), "ncclGetUniqueId");
  std::vector<std::string> all =
      ctx.comm.allgather(std::string(reinterpret_cast<const char*>(&id), sizeof id));
  std::memcpy(&id, all.at(0).data(), sizeof id);
  return id;
}

bool report_if_started(workers::Progress& progress, cudaEvent_t start, int64_t seq) {
  if (cudaEventQuery(start) != cudaSuccess) {
    cudaGetLastError();  // not ready is no error to keep
    return false;
  }
  progress.started(seq);
  return true;
}

void wait_for_operation(nccl::Communicator& comm, workers::Progress& progress, cudaEvent_t start,
                        cudaEvent_t done, int64_t seq, const std::string& what) {
  progress.busy();
  bool started = false;
  comm.wait(done, what, [&] { started = started || report_if_started(progress, start, seq); });
  progress.started(seq);
  progress.completed(seq);
  progress.idle();
}

}  // namespace commtool::tracing
