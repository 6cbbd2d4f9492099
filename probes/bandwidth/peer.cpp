// GPU<->GPU probes (peer.hpp): copies and pointer chases between GPUs of one process through
// peer access, and copies and flag ping-pong between worker processes through CUDA IPC.
#include "probes/bandwidth/peer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "probes/bandwidth/pointer_chase.hpp"
#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/ipc_exchange.hpp"
#include "probes/base/cuda/kernels.cuh"
#include "probes/base/cuda/start_gate.hpp"
#include "probes/base/cuda/wait.hpp"
#include "probes/base/error.hpp"
#include "probes/base/workers/communicator.hpp"

namespace commtool::probe {

namespace {

// Each of these probes allocates two buffers of `bytes` (the probe size) on the GPU.
void check_free_memory(const GpuPlacement& gpu, uint64_t bytes, const char* probe) {
  const uint64_t needed = 2 * bytes;
  CUDA_TRY(cudaSetDevice(gpu.cuda_device));
  size_t free_bytes = 0, total = 0;
  CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
  if (needed > free_bytes) {
    throw bad_value("size", std::to_string(bytes),
                    fmt::format("the {} probe needs {:.1f} GiB on GPU {}, which has {:.1f} GiB "
                                "free; give a smaller size",
                                probe, static_cast<double>(needed) / (1 << 30), gpu.index,
                                static_cast<double>(free_bytes) / (1 << 30)));
  }
}

void enable_peer(int from, int to) {
  CUDA_TRY(cudaSetDevice(from));
  cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return;
  }
  CUDA_TRY(err);
}

bool can_access(const GpuPlacement& a, const GpuPlacement& b) {
  int ab = 0, ba = 0;
  CUDA_TRY(cudaDeviceCanAccessPeer(&ab, a.cuda_device, b.cuda_device));
  CUDA_TRY(cudaDeviceCanAccessPeer(&ba, b.cuda_device, a.cuda_device));
  return ab && ba;
}

// Unidirectional CE and SM, then both ways at once, for one ordered pair; `write` is a->b.
void measure_pair(CopyRunner& runner, const RunOptions& run, const std::string& probe,
                  const CopyJob& forward, const CopyJob& backward, int a, int b,
                  std::vector<Measurement>& out) {
  for (Engine e : {Engine::kCopyEngine, Engine::kSm}) {
    CopyJob f = forward, r = backward;
    f.engine = r.engine = e;
    f.label = fmt::format("{} {} GPU {} -> GPU {}", probe, to_string(e), a, b);
    r.label = fmt::format("{} {} GPU {} -> GPU {}", probe, to_string(e), b, a);
    out.push_back(make_measurement(probe, "write", e, a, b, false, f.bytes, run.iters, "GB/s",
                                   runner.run({f})[0]));
    auto both = runner.run({f, r});
    out.push_back(make_measurement(probe, "write while reverse", e, a, b, true, f.bytes, run.iters,
                                   "GB/s", both[0]));
  }
}

}  // namespace

std::vector<Measurement> probe_p2p_bandwidth(const std::vector<GpuPlacement>& gpus, uint64_t bytes,
                                             const RunOptions& run,
                                             std::vector<PeerPair>* refused) {
  std::vector<Measurement> out;
  if (gpus.size() < 2) return out;
  struct Buffers {
    cuda::DeviceBuffer send, receive;
  };
  std::vector<Buffers> buffers;
  for (const GpuPlacement& g : gpus) {
    check_free_memory(g, bytes, "p2p");
    buffers.push_back({cuda::DeviceBuffer(bytes), cuda::DeviceBuffer(bytes)});
  }
  CopyRunner runner(run);
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (i == j) continue;
      const GpuPlacement& a = gpus[i];
      const GpuPlacement& b = gpus[j];
      if (!can_access(a, b)) {
        if (refused) refused->push_back({a.index, b.index});
        continue;
      }
      enable_peer(a.cuda_device, b.cuda_device);
      enable_peer(b.cuda_device, a.cuda_device);
      CopyJob forward{"",
                      a.cuda_device,
                      Engine::kCopyEngine,
                      buffers[j].receive.get(),
                      b.cuda_device,
                      buffers[i].send.get(),
                      a.cuda_device,
                      bytes};
      CopyJob backward{"",
                       b.cuda_device,
                       Engine::kCopyEngine,
                       buffers[i].receive.get(),
                       a.cuda_device,
                       buffers[j].send.get(),
                       b.cuda_device,
                       bytes};
      measure_pair(runner, run, "p2p", forward, backward, a.index, b.index, out);
    }
  }
  return out;
}

namespace {}  // namespace

std::vector<Measurement> probe_p2p_latency(const std::vector<GpuPlacement>& gpus,
                                           const LatencyOptions& options) {
  std::vector<Measurement> out;
  constexpr size_t kEntries = 4096;
  const std::vector<uint64_t> chain = make_chase_chain(kEntries, 11);
  uint64_t expected_end = 0;
  for (int h = 0; h < options.hops; ++h)
    expected_end = chain[expected_end];
  std::vector<cuda::DeviceBuffer> chains;
  for (const GpuPlacement& g : gpus) {
    CUDA_TRY(cudaSetDevice(g.cuda_device));
    chains.emplace_back(chain.size() * sizeof(uint64_t));
    CUDA_TRY(cudaMemcpy(chains.back().get(), chain.data(), chain.size() * sizeof(uint64_t),
                        cudaMemcpyHostToDevice));
  }
  cuda::PinnedHostBuffer result(2 * sizeof(uint64_t), -1);
  auto* r = static_cast<uint64_t*>(result.get());
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < gpus.size(); ++j) {
      if (i != j) {
        if (!can_access(gpus[i], gpus[j])) continue;
        enable_peer(gpus[i].cuda_device, gpus[j].cuda_device);
      }
      CUDA_TRY(cudaSetDevice(gpus[i].cuda_device));
      cuda::Stream stream;
      std::vector<double> samples;
      for (int rep = -1; rep < options.repeats; ++rep) {
        r[0] = r[1] = ~0ULL;
        cuda::Event done;
        cuda::launch_pointer_chase(stream.get(), static_cast<const uint64_t*>(chains[j].get()),
                                   options.hops, r);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaEventRecord(done.get(), stream.get()));
        cuda::wait_for_event(done, options.timeout, "peer pointer chase");
        if (r[0] != expected_end) {
          throw Error(ExitCode::kVerification,
                      fmt::format("pointer chase GPU {} -> GPU {} ended at slot {}, expected {}",
                                  gpus[i].index, gpus[j].index, r[0], expected_end));
        }
        if (rep >= 0) samples.push_back(static_cast<double>(r[1]) / options.hops / 1e3);
      }
      out.push_back(make_measurement("latency", i == j ? "local load" : "peer load", Engine::kSm,
                                     gpus[i].index, gpus[j].index, false, sizeof(uint64_t),
                                     options.hops, "us", samples));
    }
  }
  return out;
}

namespace {

// Flags live on their own 128-byte lines, one slot per rank: slot r of rank k's flag buffer
// is where rank r signals rank k.
constexpr size_t kFlagStride = 128;

int* flag_slot(void* base, int slot) {
  return reinterpret_cast<int*>(static_cast<char*>(base) + static_cast<size_t>(slot) * kFlagStride);
}

}  // namespace

namespace {

// CUDA IPC between two GPUs maps one's memory into the other: without P2P the open fails with
// a bare CUDA error. Every rank checks its own row and shares it, so all of them fail alike,
// naming the first pair without P2P.
void require_p2p_between_all(workers::Communicator& comm, const GpuPlacement& gpu,
                             const std::vector<std::string>& indices) {
  char bus_id[32] = {};
  CUDA_TRY(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, gpu.cuda_device));
  std::vector<std::string> buses = comm.allgather(bus_id);
  std::string row;
  for (const std::string& bus : buses) {
    int peer = 0, ok = 1;
    CUDA_TRY(cudaDeviceGetByPCIBusId(&peer, bus.c_str()));
    if (peer != gpu.cuda_device) CUDA_TRY(cudaDeviceCanAccessPeer(&ok, gpu.cuda_device, peer));
    row += ok ? '1' : '0';
  }
  std::vector<std::string> rows = comm.allgather(row);
  for (size_t a = 0; a < rows.size(); ++a) {
    for (size_t b = 0; b < rows[a].size(); ++b) {
      if (rows[a][b] == '1') continue;
      throw Error(ExitCode::kEnvironment,
                  fmt::format("CUDA IPC needs P2P between every pair of GPUs, and GPU {} cannot "
                              "access GPU {} (see `commtool topo` for the likely reason)",
                              indices[a], indices[b]));
    }
  }
}

// A rank's GPU index, for naming results, from the indices every rank shared.
int gpu_of(const std::vector<std::string>& indices, int rank) {
  return std::stoi(indices[static_cast<size_t>(rank)]);
}

// Bandwidth: each ordered pair in turn, CE and SM, one way and both ways at once; only the
// writers work, the others wait at barriers. The writing rank `a` keeps the measurement.
void measure_ipc_bandwidth(workers::Communicator& comm, const GpuPlacement& gpu,
                           const IpcOptions& options, const cuda::IpcExchange& receives,
                           const cuda::DeviceBuffer& send, const std::vector<std::string>& indices,
                           std::vector<Measurement>& out) {
  const int rank = comm.rank();
  const int size = comm.size();
  CopyRunner alone(options.run);
  // Both directions at once: the two writers meet at a barrier before every batch, so their
  // batches overlap; everybody else takes part in those barriers idle.
  RunOptions paired = options.run;
  paired.before_release = [&comm] { comm.barrier(); };
  CopyRunner together(paired);
  const int batches = options.run.batches_run();
  for (int a = 0; a < size; ++a) {
    for (int b = 0; b < size; ++b) {
      if (a == b) continue;
      for (Engine e : {Engine::kCopyEngine, Engine::kSm}) {
        for (bool both : {false, true}) {
          comm.barrier();
          const bool writer = rank == a || (both && rank == b);
          if (!writer) {
            for (int i = 0; both && i < batches; ++i)
              comm.barrier();
            continue;
          }
          const int to = rank == a ? b : a;
          CopyJob job{fmt::format("ipc {} rank {} -> rank {}", to_string(e), rank, to),
                      gpu.cuda_device,
                      e,
                      receives.at(to),
                      gpu.cuda_device,
                      send.get(),
                      gpu.cuda_device,
                      options.bytes};
          auto gbps = (both ? together : alone).run({job})[0];
          if (rank == a) {
            out.push_back(make_measurement("ipc", both ? "write while reverse" : "write", e,
                                           gpu_of(indices, a), gpu_of(indices, b), both,
                                           options.bytes, options.run.iters, "GB/s", gbps));
            out.back().src_rank = a;
            out.back().dst_rank = b;
          }
        }
      }
    }
  }
}

// One timed flag ping-pong between this rank and `peer`, through the slot each signals the other
// in; the lower rank initiates. r[0] gets the nanoseconds for all rounds; r[1], set here and
// cleared by the kernel, stays nonzero if a flag never arrived.
void run_flag_pingpong(workers::Communicator& comm, const IpcOptions& options,
                       const cuda::Stream& stream, void* own_flags,
                       const cuda::IpcExchange& flag_buffers, int peer, int epoch, uint64_t* r) {
  const int rank = comm.rank();
  const auto timeout_ns = static_cast<uint64_t>(options.run.timeout.count() * 1e9);
  r[0] = 0;
  r[1] = 1;
  cuda::Event done;
  cuda::launch_flag_pingpong(stream.get(), flag_slot(own_flags, peer),
                             flag_slot(flag_buffers.at(peer), rank), options.pingpong_rounds, epoch,
                             rank < peer, timeout_ns, r);
  CUDA_TRY(cudaGetLastError());
  CUDA_TRY(cudaEventRecord(done.get(), stream.get()));
  cuda::wait_for_event(done, options.run.timeout,
                       fmt::format("flag ping-pong rank {} <-> rank {}", std::min(rank, peer),
                                   std::max(rank, peer)));
  if (r[1] != 0) {
    throw Error(ExitCode::kTimeout,
                fmt::format("rank {}: flag ping-pong with rank {} stalled (a flag never "
                            "arrived)",
                            rank, peer));
  }
}

// Flag ping-pong: each unordered pair; the lower rank initiates and keeps the measurement.
void measure_flag_round_trips(workers::Communicator& comm, const IpcOptions& options,
                              void* own_flags, const cuda::IpcExchange& flag_buffers,
                              const std::vector<std::string>& indices,
                              std::vector<Measurement>& out) {
  const int rank = comm.rank();
  const int size = comm.size();
  cuda::Stream stream;
  cuda::PinnedHostBuffer result(2 * sizeof(uint64_t), -1);
  auto* r = static_cast<uint64_t*>(result.get());
  int epoch = 0;
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      std::vector<double> samples;
      for (int rep = -1; rep < options.pingpong_repeats; ++rep) {
        comm.barrier();
        epoch += options.pingpong_rounds;  // every rank advances it alike
        if (rank != a && rank != b) continue;
        const int peer = rank == a ? b : a;
        run_flag_pingpong(comm, options, stream, own_flags, flag_buffers, peer, epoch, r);
        if (rank == a && rep >= 0) {
          samples.push_back(static_cast<double>(r[0]) / options.pingpong_rounds / 1e3);
        }
      }
      if (rank == a) {
        out.push_back(make_measurement("ipc", "flag round trip", Engine::kSm, gpu_of(indices, a),
                                       gpu_of(indices, b), false, sizeof(int),
                                       options.pingpong_rounds, "us", samples));
        out.back().src_rank = a;
        out.back().dst_rank = b;
      }
    }
  }
}

}  // namespace

std::vector<Measurement> probe_ipc(workers::Communicator& comm, const GpuPlacement& gpu,
                                   const IpcOptions& options) {
  // Ranks' GPU indices, for naming results: everyone shares its own.
  std::vector<std::string> indices = comm.allgather(std::to_string(gpu.index));
  require_p2p_between_all(comm, gpu, indices);

  check_free_memory(gpu, options.bytes, "ipc");
  CUDA_TRY(cudaSetDevice(gpu.cuda_device));
  cuda::DeviceBuffer send(options.bytes), receive(options.bytes);
  cuda::DeviceBuffer flags(kFlagStride * static_cast<size_t>(comm.size()));
  CUDA_TRY(cudaMemset(flags.get(), 0, flags.bytes()));
  cuda::IpcExchange receives(comm, receive.get());
  cuda::IpcExchange flag_buffers(comm, flags.get());
  std::vector<Measurement> out;
  measure_ipc_bandwidth(comm, gpu, options, receives, send, indices, out);
  measure_flag_round_trips(comm, options, flags.get(), flag_buffers, indices, out);
  comm.barrier();  // nobody unmaps while a peer may still write
  return out;
}

}  // namespace commtool::probe
