// Worker tasks of the IPC all-reduce. "ipc-allreduce-check" runs both algorithms on random data
// at every size, type and buffer layout asked, several times back to back with new data each
// time (a stale flag or a missing barrier then shows as a wrong result), and counts, per case,
// the elements that differ from the float64 reference and whether every rank's output is
// bitwise the same.
// The launcher side is check_ipc_allreduce(); GPU tests and `diagnose allreduce` use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracing/allreduce/ipc_allreduce.hpp"
#include "tracing/collectives/collective_data.hpp"

namespace commtool::tracing {

inline constexpr const char* kIpcCheckTask = "ipc-allreduce-check";

void register_ipc_allreduce_tasks();

// An input element that every type holds exactly, and whose sums over up to 8 ranks half and
// float hold exactly too: k/256 for k in [-255, 255], from (rank, index, seed).
double ipc_input_value(int rank, uint64_t index, uint32_t seed);

// Where a rank's input and output lie. The kernels move 16 bytes per access only where both
// are 16-byte aligned, yet must hand every element to the same block on every rank whatever
// each rank's layout, so the check runs them all, and mixed across ranks.
enum class IpcLayout {
  kAligned,  // input and output at the start of their allocations
  kOffset,   // both one element past it: no 16-byte access there
  kMixed,    // odd ranks offset, even ranks aligned
  kInPlace,  // output is the input
};
const char* to_string(IpcLayout l);  // "aligned", "offset", "mixed", "in-place"

struct IpcCheckCase {
  IpcAlgorithm algorithm;
  DataType dtype;
  uint64_t count;
  IpcLayout layout = IpcLayout::kAligned;
  int repeats = 0;
  uint64_t wrong = 0;       // elements differing from the reference, summed over ranks
  bool ranks_agree = true;  // every rank's output bitwise equal to rank 0's
};

struct IpcCheckRequest {
  std::string executable = "/proc/self/exe";
  std::vector<int> devices;  // CUDA ordinal per rank: several ranks may share one GPU
  std::vector<uint64_t> counts;
  std::vector<DataType> dtypes;
  std::vector<IpcLayout> layouts = {IpcLayout::kAligned};
  int repeats = 3;
  double timeout_s = 30;
};

inline constexpr const char* kIpcTimeTask = "ipc-allreduce-time";

// Timing for `diagnose allreduce`: per size, warm-up then measured calls of both algorithms in
// turns, each timed with CUDA events around the launch and its output compared on the GPU with
// the expected one (computed once per size on the host).
struct IpcTimeRequest {
  std::string executable = "/proc/self/exe";
  std::vector<int> devices;     // CUDA ordinal per rank
  std::vector<uint64_t> sizes;  // bytes per rank
  DataType dtype = DataType::kFloat32;
  int iters = 20;
  int warmup = 5;
  double timeout_s = 60;
};

struct IpcTimedSize {
  uint64_t bytes = 0;
  std::vector<double> slowest_us;  // per measured call: its slowest rank's time
  uint64_t wrong_bytes = 0;        // over every call and rank
};

struct IpcTimedPath {
  IpcAlgorithm algorithm;
  std::vector<IpcTimedSize> sizes;
};

// Throws Error(kEnvironment) naming the pair when two ranks' GPUs have no P2P: the IPC paths
// are not an option there.
std::vector<IpcTimedPath> time_ipc_allreduce(const IpcTimeRequest& request);

// Runs the check on one worker per entry of `devices`. Throws the workers' errors (a stuck
// barrier: kTimeout naming the rank that never came).
std::vector<IpcCheckCase> check_ipc_allreduce(const IpcCheckRequest& request);

}  // namespace commtool::tracing
