#include "probes/base/nccl/nccl_library.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "probes/base/error.hpp"

namespace commtool::nccl {

namespace {

std::vector<std::string> candidates() {
  if (const char* chosen = std::getenv("COMMTOOL_NCCL_LIBRARY"); chosen && *chosen) {
    return {chosen};
  }
  return cuda_library_candidates("libnccl.so.2");
}

}  // namespace

Library::Library() : lib_(candidates()) {
  if (!lib_) {
    throw Error(ExitCode::kEnvironment,
                "NCCL not found (" + lib_.error() +
                    "); install it or point COMMTOOL_NCCL_LIBRARY at a libnccl.so.2");
  }
  auto need = [&](auto& fn, const char* name) {
    fn = lib_.symbol<std::remove_reference_t<decltype(fn)>>(name);
    if (fn == nullptr) {
      throw Error(ExitCode::kEnvironment,
                  fmt::format("{} lacks {}: commtool needs NCCL 2.28 or newer", lib_.name(), name));
    }
  };
  need(get_version, "ncclGetVersion");
  need(error_string, "ncclGetErrorString");
  need(last_error, "ncclGetLastError");
  need(get_unique_id, "ncclGetUniqueId");
  need(comm_init_rank_config, "ncclCommInitRankConfig");
  need(comm_get_async_error, "ncclCommGetAsyncError");
  need(comm_finalize, "ncclCommFinalize");
  need(comm_destroy, "ncclCommDestroy");
  need(comm_abort, "ncclCommAbort");
  need(all_reduce, "ncclAllReduce");
  need(all_gather, "ncclAllGather");
  need(reduce_scatter, "ncclReduceScatter");
  need(broadcast, "ncclBroadcast");
  need(reduce, "ncclReduce");
  need(send, "ncclSend");
  need(recv, "ncclRecv");
  need(group_start, "ncclGroupStart");
  need(group_end, "ncclGroupEnd");
  all_to_all = lib_.symbol<decltype(all_to_all)>("ncclAlltoAll");
  path_ = lib_.path_of(reinterpret_cast<void*>(get_version));
  check(get_version(&version_), "ncclGetVersion");
}

std::string Library::version_string() const {
  return fmt::format("{}.{}.{}", version_ / 10000, (version_ % 10000) / 100, version_ % 100);
}

void Library::check(ncclResult_t result, const char* call) const {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const char* detail = last_error ? last_error(nullptr) : nullptr;
  throw Error(ExitCode::kEnvironment,
              fmt::format("{} failed: {}{}{}", call, error_string(result),
                          detail && *detail ? ": " : "", detail ? detail : ""));
}

}  // namespace commtool::nccl
