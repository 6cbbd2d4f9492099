#include "probes/base/cuda/ipc_exchange.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/error.hpp"

namespace commtool::cuda {

IpcExchange::IpcExchange(workers::Communicator& comm, void* local) : rank_(comm.rank()) {
  cudaIpcMemHandle_t handle;
  CUDA_TRY(cudaIpcGetMemHandle(&handle, local));
  std::string blob(reinterpret_cast<const char*>(&handle), sizeof handle);
  std::vector<std::string> all = comm.allgather(blob);
  peers_.assign(all.size(), nullptr);
  for (size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == rank_) {
      peers_[r] = local;
      continue;
    }
    if (all[r].size() != sizeof(cudaIpcMemHandle_t)) {
      throw Error(ExitCode::kVerification,
                  fmt::format("rank {}: IPC handle from rank {} has {} bytes, expected {}", rank_,
                              r, all[r].size(), sizeof(cudaIpcMemHandle_t)));
    }
    cudaIpcMemHandle_t peer;
    std::memcpy(&peer, all[r].data(), sizeof peer);
    CUDA_TRY(cudaIpcOpenMemHandle(&peers_[r], peer, cudaIpcMemLazyEnablePeerAccess));
  }
}

IpcExchange::~IpcExchange() {
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) != rank_ && peers_[r] != nullptr) cudaIpcCloseMemHandle(peers_[r]);
  }
}

}  // namespace commtool::cuda
