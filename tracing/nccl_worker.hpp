// What every NCCL worker task does first: take its GPU by PCI bus id (the launcher's naming,
// which survives CUDA_VISIBLE_DEVICES reordering), keep NVLink multicast off, and agree on one
// NCCL unique id over the worker channel (rank 0 makes it, everyone receives it).
#pragma once

#include <string>

#include "probes/nccl/nccl_library.hpp"
#include "probes/workers/worker.hpp"

namespace commtool::tracing {

// Makes the GPU at `bus_id` current; returns its CUDA ordinal. Error(kEnvironment) when CUDA
// in the worker cannot see it.
int select_device(const std::string& bus_id);

// NCCL_NVLS_ENABLE=0 unless the user set it: NVLink multicast stays off on shared machines
// (multicast objects can put a shared machine's GPUs out of service). Before NCCL initialises.
void keep_nvlink_multicast_off();

// Rank 0's ncclGetUniqueId, handed to every rank by an allgather on the worker channel.
ncclUniqueId shared_unique_id(workers::WorkerContext& ctx, const nccl::Library& lib);

}  // namespace commtool::tracing
