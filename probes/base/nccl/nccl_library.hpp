// NCCL loaded at run time (libnccl.so.2, dlopen): commtool's topo and probe must run where NCCL
// is absent, and the library a user's job runs with (the system's, or PyTorch's own) is the
// one worth measuring, so the choice of library is the user's (COMMTOOL_NCCL_LIBRARY) rather
// than the linker's. Types come from nccl.h (NCCL 2.28), functions from the loaded library.
#pragma once

#include <nccl.h>

#include <string>

#include "probes/base/dynlib.hpp"

namespace commtool::nccl {

class Library {
 public:
  // Loads $COMMTOOL_NCCL_LIBRARY if set, else libnccl.so.2 from the loader path or the CUDA
  // toolkit. Throws Error(kEnvironment) naming what was tried when none loads or an entry
  // point is missing.
  Library();

  const std::string& path() const { return path_; }
  int version() const { return version_; }  // NCCL_VERSION_CODE: 22803 for 2.28.3
  std::string version_string() const;

  // Throws Error(kEnvironment) with NCCL's own words for a failed call.
  void check(ncclResult_t result, const char* call) const;

  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommFinalize) comm_finalize = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  // Optional: NCCL builds without it get an all-to-all from grouped send/recv.
  decltype(&ncclAlltoAll) all_to_all = nullptr;

 private:
  DynamicLibrary lib_;
  std::string path_;
  int version_ = 0;
};

}  // namespace commtool::nccl
