// What every NCCL worker task does first: take its GPU by PCI bus id (the launcher's naming,
// which survives CUDA_VISIBLE_DEVICES reordering), keep NVLink multicast off, and agree on one
// NCCL unique id over the worker channel (rank 0 makes it, everyone receives it).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "probes/base/nccl/communicator.hpp"
#include "probes/base/nccl/nccl_library.hpp"
#include "probes/base/workers/worker.hpp"

namespace commtool::tracing {

// Makes the GPU at `bus_id` current; returns its CUDA ordinal. Error(kEnvironment) when CUDA
// in the worker cannot see it.
int select_device(const std::string& bus_id);

// NCCL_NVLS_ENABLE=0 unless the user set it: NVLink multicast stays off on shared machines
// (multicast objects can put a shared machine's GPUs out of service). Before NCCL initialises.
void keep_nvlink_multicast_off();

// Rank 0's ncclGetUniqueId, handed to every rank by an allgather on the worker channel.
ncclUniqueId shared_unique_id(workers::WorkerContext& ctx, const nccl::Library& lib);

// Tells the progress board that operation `seq` started once its `start` event (recorded on
// the NCCL stream just before the operation) has fired; returns whether it has.
bool report_if_started(workers::Progress& progress, cudaEvent_t start, int64_t seq);

// The last wait of an operation: for `done` (recorded after everything the operation queued),
// bounded as Communicator::wait bounds it, with the board told when the operation starts and
// completes. The rank is busy on the board meanwhile and idle after.
void wait_for_operation(nccl::Communicator& comm, workers::Progress& progress, cudaEvent_t start,
                        cudaEvent_t done, int64_t seq, const std::string& what);

}  // namespace commtool::tracing
