#include "probes/bandwidth/copy_runner.hpp"

#include <fmt/format.h>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/cuda/kernels.cuh"
#include "probes/base/cuda/start_gate.hpp"
#include "probes/base/cuda/wait.hpp"

namespace commtool::probe {

namespace {

// Per-job CUDA resources, on the job's device.
struct JobState {
  cuda::Stream stream;
  cuda::Event start;
  cuda::Event end;
  int sm_blocks = 0;
};

void enqueue_copies(const CopyJob& job, JobState& state, int iters) {
  for (int i = 0; i < iters; ++i) {
    if (job.engine == Engine::kSm) {
      cuda::launch_sm_copy(state.stream.get(), job.dst, job.src, job.bytes, state.sm_blocks);
      CUDA_TRY(cudaGetLastError());
    } else if (job.src_device != kHost && job.dst_device != kHost &&
               job.src_device != job.dst_device) {
      CUDA_TRY(cudaMemcpyPeerAsync(job.dst, job.dst_device, job.src, job.src_device, job.bytes,
                                   state.stream.get()));
    } else {
      CUDA_TRY(cudaMemcpyAsync(job.dst, job.src, job.bytes, cudaMemcpyDefault, state.stream.get()));
    }
  }
}

}  // namespace

struct CopyRunner::Impl {
  RunOptions options;
  cuda::StartGate gate;
  cuda::PinnedHostBuffer mismatches{sizeof(unsigned long long) * 64, -1};
  uint32_t seed = 0x5eed;
};

CopyRunner::CopyRunner(RunOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
CopyRunner::~CopyRunner() = default;

std::vector<std::vector<double>> CopyRunner::run(const std::vector<CopyJob>& jobs) {
  const RunOptions& opt = impl_->options;
  if (jobs.size() > 64) throw Error(ExitCode::kUsage, "too many concurrent copy jobs");
  std::vector<std::unique_ptr<JobState>> states;
  for (const CopyJob& job : jobs) {
    CUDA_TRY(cudaSetDevice(job.device));
    auto s = std::make_unique<JobState>();
    int sms = 0;
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, job.device));
    s->sm_blocks = opt.sm_blocks > 0 ? opt.sm_blocks : 2 * sms;
    states.push_back(std::move(s));
  }
  auto* bad = static_cast<unsigned long long*>(impl_->mismatches.get());
  const auto timeout_ns = static_cast<uint64_t>(opt.timeout.count() * 1e9);
  std::vector<std::vector<double>> gbps(jobs.size());

  const int untimed = opt.warmup > 0 ? 1 : 0;  // the warm-up batch, of opt.warmup copies
  for (int batch = 0; batch < opt.batches_run(); ++batch) {
    const int copies = batch < untimed ? opt.warmup : opt.iters;
    const uint32_t seed = ++impl_->seed;
    // Fresh data and a poisoned destination for every batch, so a copy that did not happen
    // cannot pass the check.
    for (size_t j = 0; j < jobs.size(); ++j) {
      CUDA_TRY(cudaSetDevice(jobs[j].device));
      cuda::launch_fill_pattern(states[j]->stream.get(), const_cast<void*>(jobs[j].src),
                                jobs[j].bytes, seed + static_cast<uint32_t>(j));
      CUDA_TRY(cudaGetLastError());
      CUDA_TRY(cudaMemsetAsync(jobs[j].dst, 0xa5, jobs[j].bytes, states[j]->stream.get()));
      CUDA_TRY(cudaStreamSynchronize(states[j]->stream.get()));
    }
    impl_->gate.close();
    for (size_t j = 0; j < jobs.size(); ++j) {
      CUDA_TRY(cudaSetDevice(jobs[j].device));
      impl_->gate.hold(states[j]->stream.get(), timeout_ns);
      CUDA_TRY(cudaEventRecord(states[j]->start.get(), states[j]->stream.get()));
      enqueue_copies(jobs[j], *states[j], copies);
      CUDA_TRY(cudaEventRecord(states[j]->end.get(), states[j]->stream.get()));
    }
    if (opt.before_release) opt.before_release();
    impl_->gate.open();

    for (size_t j = 0; j < jobs.size(); ++j) {
      cuda::wait_for_event(
          states[j]->end, opt.timeout,
          fmt::format("{}: {} copies of {} bytes", jobs[j].label, copies, jobs[j].bytes));
    }
    if (impl_->gate.timed_out()) {
      throw Error(ExitCode::kTimeout, "the streams were not released within the timeout");
    }
    for (size_t j = 0; j < jobs.size(); ++j) {
      CUDA_TRY(cudaSetDevice(jobs[j].device));
      bad[j] = 0;
      cuda::launch_count_mismatches(states[j]->stream.get(), jobs[j].dst, jobs[j].bytes,
                                    seed + static_cast<uint32_t>(j), bad + j);
      CUDA_TRY(cudaGetLastError());
      CUDA_TRY(cudaStreamSynchronize(states[j]->stream.get()));
      if (bad[j] != 0) {
        throw Error(ExitCode::kVerification,
                    fmt::format("{}: {} of {} words wrong after batch {} (pattern seed {:#x})",
                                jobs[j].label, bad[j], jobs[j].bytes / 4, batch, seed + j));
      }
      if (batch >= untimed) {
        double ms = cuda::elapsed_ms(states[j]->start, states[j]->end);
        gbps[j].push_back(static_cast<double>(jobs[j].bytes) * opt.iters / (ms * 1e-3) / 1e9);
      }
    }
  }
  return gbps;
}

}  // namespace commtool::probe
