// The host-side arithmetic of commtool's CUDA-IPC all-reduce (ipc_allreduce.hpp): how two-shot
// splits a buffer between ranks, how large a buffer to allocate, and where flags live. Pure, so
// the rules the kernels rely on are unit-tested on the CPU.
//
// Two-shot split. Rank r reduces segment r of every rank's buffer, then every rank gathers the
// others' segments. Each segment starts on an `align_bytes` boundary counted from the start of
// the data (128 bytes: one cache line, so no two ranks' segments share a line and a warp's
// coalesced access to a segment starts on a line). Counted in elements, a segment
// therefore starts on a multiple of the alignment unit, lcm(align_bytes, element_bytes) /
// element_bytes elements (32 floats, 64 halves). The buffer is cut into whole units plus a
// partial tail unit; the whole units are shared out as evenly as possible, the first ranks taking
// one extra; the tail joins the last rank when every rank has a whole unit, otherwise the first
// rank without one (its start is still on a boundary). So segment sizes differ by at most one
// unit, and a small buffer fills ranks from rank 0 up: 1 element at 8 ranks goes to rank 0 and
// the other seven segments are empty. An empty segment starts where the previous one ends.
//
// Sharp edges: the split depends on element_bytes, so every rank must plan with the same count
// and type (the kernels' per-block barriers assume the same split everywhere). A rank with an
// empty segment still takes part in every barrier.
#pragma once

#include <cstddef>
#include <vector>

namespace commtool::tracing {

// 128 bytes: the cache line of NVIDIA GPUs (CUDA C++ Programming Guide, device memory
// accesses). Also what keeps two flags, or a flag and data, from sharing a line, so a store to
// one never disturbs a poll of the other.
inline constexpr size_t kIpcAlignBytes = 128;

// Most ranks two_shot_segments() accepts: the planner is not the limit (the kernels are, at
// kMaxIpcRanks), but a count beyond this is a caller's bug, not a topology.
inline constexpr int kMaxPlannedRanks = 64;

struct Segment {
  size_t first_element = 0;
  size_t elements = 0;
};

// One segment per rank, in rank order, covering [0, elements) exactly once (see the top of the
// file). Throws usage_error for ranks outside 1..kMaxPlannedRanks, element_bytes or align_bytes
// of 0, or a buffer whose byte size overflows size_t.
std::vector<Segment> two_shot_segments(size_t elements, size_t element_bytes, int ranks,
                                       size_t align_bytes = kIpcAlignBytes);

// elements * element_bytes rounded up to a multiple of align_bytes: the data part of an IPC
// buffer, so that the last segment's aligned vector loads stay inside the allocation. Throws
// usage_error for an align_bytes of 0 or on overflow.
size_t padded_bytes(size_t elements, size_t element_bytes, size_t align_bytes = kIpcAlignBytes);

// Flags: one flag per line, a line per (rank, slot), rank-major. A rank's slots are whatever its
// protocol needs (barrier x block in the kernels); the slot count is the same for every rank.
//   flag_offset(rank, slot, slots) = line_bytes * (rank * slots + slot)
// The flag region is ranks * slots lines; data starts after it, which keeps data on a line
// boundary too. constexpr and unchecked so that device code can use it (nvcc
// --expt-relaxed-constexpr); callers keep 0 <= slot < slots and 0 <= rank < ranks.
constexpr size_t flag_offset(int rank, int slot, int slots, size_t line_bytes = kIpcAlignBytes) {
  return line_bytes *
         (static_cast<size_t>(rank) * static_cast<size_t>(slots) + static_cast<size_t>(slot));
}

constexpr size_t flag_region_bytes(int ranks, int slots, size_t line_bytes = kIpcAlignBytes) {
  return line_bytes * static_cast<size_t>(ranks) * static_cast<size_t>(slots);
}

}  // namespace commtool::tracing
