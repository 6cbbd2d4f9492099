#include "tracing/allreduce/ipc_allreduce_plan.hpp"

#include <fmt/format.h>

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

}  // namespace commtool::tracing
