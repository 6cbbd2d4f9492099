#include "tracing/allreduce/ipc_allreduce_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "probes/base/error.hpp"

namespace commtool::tracing {

namespace {

size_t checked_bytes(size_t elements, size_t element_bytes, size_t align_bytes) {
  if (element_bytes == 0 || align_bytes == 0) {
    throw usage_error(
        fmt::format("IPC buffer plan: element size {} and alignment {} bytes must "
                    "be positive",
                    element_bytes, align_bytes));
  }
  size_t bytes = 0;
  size_t padded = 0;
  if (__builtin_mul_overflow(elements, element_bytes, &bytes) ||
      __builtin_add_overflow(bytes, align_bytes - 1, &padded)) {
    throw usage_error(fmt::format("IPC buffer plan: {} elements of {} bytes overflow size_t",
                                  elements, element_bytes));
  }
  return bytes;
}

}  // namespace

size_t padded_bytes(size_t elements, size_t element_bytes, size_t align_bytes) {
  const size_t bytes = checked_bytes(elements, element_bytes, align_bytes);
  return (bytes + align_bytes - 1) / align_bytes * align_bytes;
}

std::vector<Segment> two_shot_segments(size_t elements, size_t element_bytes, int ranks,
                                       size_t align_bytes) {
  if (ranks < 1 || ranks > kMaxPlannedRanks) {
    throw usage_error(
        fmt::format("IPC two-shot plan for {} ranks: takes 1 to {}", ranks, kMaxPlannedRanks));
  }
  checked_bytes(elements, element_bytes, align_bytes);
  // The smallest element count whose byte size is a multiple of align_bytes.
  const size_t unit = std::lcm(align_bytes, element_bytes) / element_bytes;
  const size_t n = static_cast<size_t>(ranks);
  const size_t whole_units = elements / unit;
  const size_t tail = elements % unit;
  const size_t base = whole_units / n;
  const size_t extra = whole_units % n;  // ranks 0..extra-1 take one more unit
  // The tail's rank: the last, or the first that got no whole unit.
  const size_t tail_rank = base > 0 ? n - 1 : std::min(extra, n - 1);

  std::vector<Segment> out(n);
  size_t next = 0;
  for (size_t r = 0; r < n; ++r) {
    out[r].first_element = next;
    out[r].elements = (base + (r < extra ? 1 : 0)) * unit + (r == tail_rank ? tail : 0);
    next += out[r].elements;
  }
  return out;
}

int ipc_grid_blocks(size_t elements, int cap) {
  if (cap < 1 || cap > kMaxIpcBlocks) {
    throw usage_error(
        fmt::format("IPC grid: a cap of {} blocks; takes 1 to {}", cap, kMaxIpcBlocks));
  }
  constexpr size_t step = size_t{kIpcThreads} * kIpcElementsPerThread;
  const size_t steps = elements / step + (elements % step != 0 ? 1 : 0);
  return static_cast<int>(std::clamp<size_t>(steps, 1, static_cast<size_t>(cap)));
}

int ipc_block_cap(const std::vector<IpcRankGpu>& ranks) {
  if (ranks.empty()) throw usage_error("IPC grid cap: no ranks");
  std::map<std::string, int> sharing;
  for (const IpcRankGpu& r : ranks)
    ++sharing[r.gpu];
  int cap = kMaxIpcBlocks;
  for (const IpcRankGpu& r : ranks) {
    if (r.resident_blocks < 1) {
      throw usage_error(
          fmt::format("IPC grid cap: GPU {} keeps {} blocks resident", r.gpu, r.resident_blocks));
    }
    cap = std::min(cap, std::max(1, r.resident_blocks / sharing[r.gpu]));
  }
  return cap;
}

double ipc_kernel_bytes(IpcAlgorithm algorithm, size_t bytes, int ranks) {
  if (ranks < 1 || ranks > kMaxPlannedRanks) {
    throw usage_error(
        fmt::format("IPC kernel bytes at {} ranks: takes 1 to {}", ranks, kMaxPlannedRanks));
  }
  const double n = ranks;
  const double per_rank = static_cast<double>(bytes);
  if (ranks == 1) return 2 * per_rank;
  if (algorithm == IpcAlgorithm::kOneShot) return (n + 3) * per_rank;
  return (5 - 2 / n) * per_rank;
}

std::optional<double> kernel_gbps(double bytes, double us) {
  if (!(us > 0)) return std::nullopt;
  return bytes / (us * 1e3);  // bytes per us is 1e6 bytes/s; / 1e3 makes it 1e9
}

}  // namespace commtool::tracing
