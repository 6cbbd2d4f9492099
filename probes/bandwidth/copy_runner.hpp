// Runs copies the way trustworthy bandwidth figures need (README, "commtool probe"): every
// stream is held by a spin kernel while its copies are queued, the host releases all streams at
// once, each stream's copies are timed with CUDA events, and the destination is checked against
// the pattern after every timed batch. A wrong word is an Error(kVerification); a stream that does
// not finish within the timeout is an Error(kTimeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "probes/bandwidth/measurement.hpp"
#include "probes/base/cuda/memory.hpp"

namespace commtool::probe {

// One stream's work in a batch: `iters` copies of `bytes` from src to dst.
struct CopyJob {
  std::string label;  // for error messages: "H2D CE on GPU 0"
  int device = 0;     // the GPU whose stream (CE) or SMs (SM) do the copy
  Engine engine = Engine::kCopyEngine;
  void* dst = nullptr;
  int dst_device = kHost;  // for cudaMemcpyPeerAsync; kHost for host memory
  const void* src = nullptr;
  int src_device = kHost;
  uint64_t bytes = 0;
};

struct RunOptions {
  int iters = 20;   // copies per timed batch
  int repeats = 5;  // timed batches
  int warmup = 5;   // untimed copies before them, in one batch of their own
  // The batches run, the untimed one included.
  int batches_run() const { return (warmup > 0 ? 1 : 0) + repeats; }
  std::chrono::duration<double> timeout{60.0};
  int sm_blocks = 0;  // blocks for SM copies; 0: 2 per SM of the device
  // Called once per batch after the work is queued, just before the gate opens: lets copies
  // in several processes (IPC, both directions) start together through a barrier.
  std::function<void()> before_release;
};

class CopyRunner {
 public:
  explicit CopyRunner(RunOptions options);
  ~CopyRunner();
  CopyRunner(const CopyRunner&) = delete;
  CopyRunner& operator=(const CopyRunner&) = delete;

  // Runs the jobs together, repeats times; returns per job its GB/s per batch (bytes*iters
  // over the job's own event interval), after checking every job's destination each batch.
  std::vector<std::vector<double>> run(const std::vector<CopyJob>& jobs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace commtool::probe
