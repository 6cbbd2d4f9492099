#include "tracing/trace/collective_runner.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "probes/base/cuda/cuda_check.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "tracing/collectives/collective_values.cuh"  // values::reduces
#include "tracing/collectives/nccl_worker.hpp"

namespace commtool::tracing {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kBfloat16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

// Each operation gets its own input values, so an output left from the previous one is wrong.
uint32_t seed_of(uint64_t seq) {
  return static_cast<uint32_t>(seq) + 1;
}

char* at(void* base, size_t elements, DataType t) {
  return static_cast<char*>(base) + elements * type_size(t);
}

}  // namespace

// Aborts the communicator when a blocking call outlives the timeout (see the header). One
// thread for the runner's life, armed around each blocking call, so arming costs a lock, not
// a thread start inside the interval being measured.
struct CollectiveRunner::Watchdog {
  nccl::Communicator& comm;
  std::chrono::duration<double> limit;
  std::mutex mutex;
  std::condition_variable cv;
  bool armed = false;
  bool fired = false;
  bool quit = false;
  std::thread thread;

  Watchdog(nccl::Communicator& c, std::chrono::duration<double> l) : comm(c), limit(l) {
    thread = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex);
      quit = true;
    }
    cv.notify_all();
    thread.join();
  }
  void watch() {
    std::unique_lock lock(mutex);
    while (!quit) {
      cv.wait(lock, [&] { return quit || armed; });
      if (quit) break;
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(limit);
      if (!cv.wait_until(lock, deadline, [&] { return quit || !armed; })) {
        fired = true;
        comm.abort_from_watchdog();
        cv.wait(lock, [&] { return quit || !armed; });
      }
    }
  }
  void arm() {
    {
      std::lock_guard lock(mutex);
      armed = true;
    }
    cv.notify_all();
  }
  bool disarm() {  // true if it fired
    {
      std::lock_guard lock(mutex);
      armed = false;
    }
    cv.notify_all();
    std::lock_guard lock(mutex);
    return fired;
  }
};

CollectiveRunner::CollectiveRunner(const nccl::Library& lib, nccl::Communicator& comm, int nranks,
                                   const CollectiveSpec& spec, uint64_t max_bytes,
                                   std::chrono::duration<double> timeout,
                                   workers::Progress* progress, std::optional<Fault> fault)
    : lib_(lib),
      comm_(comm),
      nranks_(nranks),
      spec_(spec),
      timeout_(timeout),
      progress_(workers::progress_or_none(progress)),
      fault_(fault),
      board_name_(values::reduces(spec.collective)
                      ? fmt::format("{} {} {}", to_string(spec.collective), to_string(spec.dtype),
                                    to_string(spec.op))
                      : fmt::format("{} {}", to_string(spec.collective), to_string(spec.dtype))),
      wrong_(sizeof(unsigned long long), -1),
      watchdog_(std::make_unique<Watchdog>(comm, timeout)) {
  const BufferLayout most = buffer_layout(spec.collective, spec.dtype, max_bytes, nranks);
  const size_t bytes = std::max(most.send_elements, most.recv_elements) * type_size(spec.dtype);
  send_ = cuda::DeviceBuffer(std::max<size_t>(bytes, 1));
  if (!spec.inplace) recv_ = cuda::DeviceBuffer(std::max<size_t>(bytes, 1));
}

CollectiveRunner::~CollectiveRunner() = default;

std::string CollectiveRunner::describe(uint64_t seq, uint64_t bytes, CompletionMode mode) const {
  return fmt::format("{} #{} ({}, {})", to_string(spec_.collective), seq,
                     measure::format_byte_size(bytes), to_string(mode));
}

bool CollectiveRunner::faulty(FaultKind kind, uint64_t seq) const {
  return fault_ && fault_->at(kind, comm_.rank(), seq);
}

ncclResult_t CollectiveRunner::issue(const BufferLayout& l) {
  const ncclDataType_t type = nccl_type(spec_.dtype);
  const int rank = comm_.rank();
  ncclComm_t comm = comm_.get();
  cudaStream_t s = nccl_.get();
  void* recv = spec_.inplace ? send_.get() : recv_.get();
  void* send = send_.get();
  switch (spec_.collective) {
    case Collective::kAllReduce:
      return lib_.all_reduce(send, recv, l.count, type, nccl_op(spec_.op), comm, s);
    case Collective::kAllGather:
      if (spec_.inplace) send = at(recv, rank * l.send_elements, spec_.dtype);
      return lib_.all_gather(send, recv, l.count, type, comm, s);
    case Collective::kReduceScatter:
      if (spec_.inplace) recv = at(send, rank * l.recv_elements, spec_.dtype);
      return lib_.reduce_scatter(send, recv, l.count, type, nccl_op(spec_.op), comm, s);
    case Collective::kBroadcast:
      return lib_.broadcast(send, recv, l.count, type, spec_.root, comm, s);
    case Collective::kReduce:
      return lib_.reduce(send, recv, l.count, type, nccl_op(spec_.op), spec_.root, comm, s);
    case Collective::kAllToAll:
      if (lib_.all_to_all != nullptr) return lib_.all_to_all(send, recv, l.count, type, comm, s);
      [[fallthrough]];
    case Collective::kSendRecv:
      break;
  }
  // Grouped point-to-point: all-to-all without ncclAlltoAll, and the sendrecv ring.
  comm_.settle(lib_.group_start(), "ncclGroupStart");
  if (spec_.collective == Collective::kAllToAll) {
    for (int p = 0; p < nranks_; ++p) {
      comm_.settle(lib_.send(at(send, p * l.count, spec_.dtype), l.count, type, p, comm, s),
                   "ncclSend");
      comm_.settle(lib_.recv(at(recv, p * l.count, spec_.dtype), l.count, type, p, comm, s),
                   "ncclRecv");
    }
  } else {
    comm_.settle(lib_.send(send, l.count, type, (rank + 1) % nranks_, comm, s), "ncclSend");
    comm_.settle(lib_.recv(recv, l.count, type, (rank + nranks_ - 1) % nranks_, comm, s),
                 "ncclRecv");
  }
  return lib_.group_end();
}

void CollectiveRunner::produce(const BufferLayout& l, uint32_t seed) {
  void* input = send_.get();
  if (spec_.inplace && spec_.collective == Collective::kAllGather) {
    input = at(send_.get(), comm_.rank() * l.send_elements, spec_.dtype);
  }
  launch_fill_input(producer_.get(), input, l.send_elements, spec_.dtype, spec_.op, comm_.rank(),
                    seed);
  CUDA_TRY(cudaEventRecord(input_ready_.get(), producer_.get()));
}

void CollectiveRunner::issue_on_board(const BufferLayout& layout, uint64_t seq) {
  BufferLayout l = layout;
  if (faulty(FaultKind::kMismatch, seq)) l.count = std::max<uint64_t>(l.count / 2, 1);
  progress_.enqueued(static_cast<int64_t>(seq), board_name_, l.count);
  progress_.busy();  // a blocking communicator's call may wait for a peer that never comes
  comm_.settle(issue(l), to_string(spec_.collective));
  if (faulty(FaultKind::kDie, seq)) ::raise(SIGKILL);
}

void CollectiveRunner::enqueue(const BufferLayout& layout, uint64_t seq) {
  CUDA_TRY(cudaStreamWaitEvent(nccl_.get(), input_ready_.get(), 0));
  CUDA_TRY(cudaEventRecord(start_.get(), nccl_.get()));
  issue_on_board(layout, seq);
  CUDA_TRY(cudaEventRecord(end_.get(), nccl_.get()));
}

bool CollectiveRunner::complete(CompletionMode mode, int poll_ms, const std::string& what,
                                uint64_t seq) {
  progress_.busy();
  auto blocking = [&](auto&& run) {
    watchdog_->arm();
    cudaError_t err = run();
    const bool fired = watchdog_->disarm();
    report_if_started(progress_, start_.get(), static_cast<int64_t>(seq));
    if (fired) {
      throw Error(ExitCode::kTimeout,
                  fmt::format("rank {}: {} did not complete within {:.1f} s; the communicator "
                              "was aborted",
                              comm_.rank(), what, timeout_.count()));
    }
    CUDA_TRY(err);
  };
  switch (mode) {
    case CompletionMode::kSync:
    case CompletionMode::kAsyncWait:
      CUDA_TRY(cudaStreamWaitEvent(consumer_.get(), end_.get(), 0));
      return false;
    case CompletionMode::kDeviceSync:
      blocking([] { return cudaDeviceSynchronize(); });
      return false;
    case CompletionMode::kBlockingWait:
      break;
  }
  if (poll_ms == 0) {
    blocking([&] { return cudaEventSynchronize(end_.get()); });
    return false;
  }
  // The loop of PyTorch up to 2.5 under TORCH_NCCL_BLOCKING_WAIT=1: query, sleep, query.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout_);
  while (true) {
    cudaError_t e = cudaEventQuery(end_.get());
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) CUDA_TRY(e);
    report_if_started(progress_, start_.get(), static_cast<int64_t>(seq));
    comm_.check_async(what);
    if (Clock::now() > deadline) {
      comm_.abort_from_watchdog();
      throw Error(ExitCode::kTimeout,
                  fmt::format("rank {}: {} did not complete within {:.1f} s; the communicator "
                              "was aborted",
                              comm_.rank(), what, timeout_.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

void CollectiveRunner::consume(const BufferLayout& l, uint32_t seed, bool ordered) {
  // After a host-side wait the consumer still orders itself on the end event (a no-op then),
  // as a framework's next kernel on another stream would.
  if (!ordered) CUDA_TRY(cudaStreamWaitEvent(consumer_.get(), end_.get(), 0));
  if (spec_.check) {
    void* recv = spec_.inplace ? send_.get() : recv_.get();
    if (spec_.inplace && spec_.collective == Collective::kReduceScatter) {
      recv = at(send_.get(), comm_.rank() * l.recv_elements, spec_.dtype);
    }
    launch_check_output(consumer_.get(), recv, l, spec_.collective, spec_.dtype, spec_.op,
                        comm_.rank(), nranks_, spec_.root, seed,
                        static_cast<unsigned long long*>(wrong_.get()));
  } else {
    launch_gpu_sleep(consumer_.get(), 0);
  }
  CUDA_TRY(cudaEventRecord(consumer_done_.get(), consumer_.get()));
}

uint64_t CollectiveRunner::finish(const std::string& what, uint64_t seq) {
  wait_for_operation(comm_, progress_, start_.get(), consumer_done_.get(),
                     static_cast<int64_t>(seq), what);
  return *static_cast<volatile unsigned long long*>(wrong_.get());
}

OperationSample CollectiveRunner::run(uint64_t bytes, CompletionMode mode, int poll_ms,
                                      uint64_t seq, OperationMark& mark) {
  const BufferLayout l = buffer_layout(spec_.collective, spec_.dtype, bytes, nranks_);
  const uint32_t seed = seed_of(seq);
  const std::string what = describe(seq, bytes, mode);
  *static_cast<volatile unsigned long long*>(wrong_.get()) = 0;

  if (faulty(FaultKind::kStall, seq)) {
    // Work ahead of the input that does not finish within anyone's bound. A host function on
    // the stream rather than a GPU sleep kernel: on a GPU that ranks share, a spinning kernel
    // also holds the other ranks' GPU work up (seen on the H200: their inputs waited seconds),
    // and the stalled rank could not be told from the ones it starves.
    const auto seconds = static_cast<uintptr_t>(timeout_.count() * 4) + 1;
    CUDA_TRY(cudaLaunchHostFunc(
        producer_.get(),
        [](void* s) { ::sleep(static_cast<unsigned>(reinterpret_cast<uintptr_t>(s))); },
        reinterpret_cast<void*>(seconds)));
  }
  produce(l, seed);

  mark.seq = seq;
  mark.enqueue_start_ns = monotonic_ns();
  enqueue(l, seq);
  if (mode == CompletionMode::kSync) complete(mode, poll_ms, what, seq);  // inside the call
  mark.enqueue_end_ns = monotonic_ns();
  mark.wait_start_ns = mark.enqueue_end_ns;
  if (mode != CompletionMode::kSync) mark.wait_polls = complete(mode, poll_ms, what, seq);
  mark.wait_end_ns = monotonic_ns();
  mark.complete_at_wait_return = cudaEventQuery(end_.get()) == cudaSuccess ? 1 : 0;
  cudaGetLastError();  // a not-ready query leaves no error behind, but be sure

  consume(l, seed, mode == CompletionMode::kSync || mode == CompletionMode::kAsyncWait);
  OperationSample s;
  s.seq = seq;
  s.bytes = bytes;
  s.mode = mode;
  s.poll_ms = mode == CompletionMode::kBlockingWait ? poll_ms : 0;
  s.host_call_us = static_cast<double>(mark.enqueue_end_ns - mark.enqueue_start_ns) / 1e3;
  s.wrong_elements = finish(what, seq);
  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, start_.get(), end_.get()));
  s.time_us = ms * 1e3;
  return s;
}

BatchSample CollectiveRunner::run_batch(uint64_t bytes, int ops, uint64_t first_seq) {
  const BufferLayout l = buffer_layout(spec_.collective, spec_.dtype, bytes, nranks_);
  const uint32_t seed = seed_of(first_seq);
  const uint64_t last = first_seq + static_cast<uint64_t>(ops) - 1;
  const std::string what =
      fmt::format("{} #{}-#{} ({}, a batch of {} back to back)", to_string(spec_.collective),
                  first_seq, last, measure::format_byte_size(bytes), ops);
  *static_cast<volatile unsigned long long*>(wrong_.get()) = 0;
  produce(l, seed);
  CUDA_TRY(cudaStreamWaitEvent(nccl_.get(), input_ready_.get(), 0));
  CUDA_TRY(cudaEventRecord(start_.get(), nccl_.get()));
  for (uint64_t seq = first_seq; seq <= last; ++seq)
    issue_on_board(l, seq);
  CUDA_TRY(cudaEventRecord(end_.get(), nccl_.get()));
  consume(l, seed, /*ordered=*/false);
  BatchSample s;
  s.first_seq = first_seq;
  s.bytes = bytes;
  s.ops = ops;
  s.wrong_elements = finish(what, last);
  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, start_.get(), end_.get()));
  s.time_us = ms * 1e3;
  return s;
}

StreamScopeSample CollectiveRunner::run_scope(uint64_t bytes, CompletionMode mode, int poll_ms,
                                              uint64_t seq, uint64_t sleep_ns) {
  const BufferLayout l = buffer_layout(spec_.collective, spec_.dtype, bytes, nranks_);
  const uint32_t seed = seed_of(seq);
  const std::string what = describe(seq, bytes, mode) + " (a stream-scope sample)";
  *static_cast<volatile unsigned long long*>(wrong_.get()) = 0;

  launch_gpu_sleep(producer_.get(), sleep_ns);
  produce(l, seed);
  enqueue(l, seq);

  StreamScopeSample s;
  s.seq = seq;
  s.mode = mode;
  s.poll_ms = mode == CompletionMode::kBlockingWait ? poll_ms : 0;
  const uint64_t wait_start = monotonic_ns();
  complete(mode, poll_ms, what, seq);
  s.host_wait_us = static_cast<double>(monotonic_ns() - wait_start) / 1e3;
  s.complete_at_wait_return = cudaEventQuery(end_.get()) == cudaSuccess;
  cudaGetLastError();
  // Stream A (the consumer) is ordered after the collective; stream B is not.
  CUDA_TRY(cudaStreamWaitEvent(consumer_.get(), end_.get(), 0));
  CUDA_TRY(cudaEventRecord(marker_a_.get(), consumer_.get()));
  CUDA_TRY(cudaEventRecord(marker_b_.get(), other_.get()));
  consume(l, seed, /*ordered=*/true);
  s.wrong_elements = finish(what, seq);
  comm_.wait(marker_b_.get(), what);
  float ms = 0;
  CUDA_TRY(cudaEventElapsedTime(&ms, marker_b_.get(), marker_a_.get()));
  s.b_before_a_us = ms * 1e3;
  return s;
}

}  // namespace commtool::tracing
