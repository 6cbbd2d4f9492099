// The host-side arithmetic of commtool's CUDA-IPC all-reduce (ipc_allreduce.hpp): how two-shot
// splits a buffer between ranks, how large a buffer to allocate, where flags live, how large a
// grid a call launches, and how many bytes its kernel reads and writes. Pure, so the rules the
// kernels rely on are unit-tested on the CPU.
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
#include <optional>
#include <string>
#include <vector>

namespace commtool::tracing {

enum class IpcAlgorithm { kOneShot, kTwoShot };

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

// ---- grid -----------------------------------------------------------------------------------
//
// The kernels move data in packs of kIpcPackBytes (one 16-byte vector load or store per thread,
// the widest a thread can issue) and deal a range's packs to blocks in steps: per step a thread
// takes kIpcElementsPerThread elements (4 packs of float, 2 of 16-bit types: as many float sums
// as fit its registers at two blocks per SM), and has those packs' loads in flight at once. A
// call launches one block per step of its whole buffer, at least 1 and at most the cap the ranks
// agreed on: small sizes then pay for no idle blocks (nor their flag waits), large ones fill the
// GPU. The grid depends only on the element count and the cap, so it is the same on every rank,
// which the per-block barriers need.
inline constexpr int kIpcThreads = 512;
inline constexpr int kIpcElementsPerThread = 16;
inline constexpr size_t kIpcPackBytes = 16;
// The flag region holds lines for this many blocks; a cap above it is lowered to it.
inline constexpr int kMaxIpcBlocks = 1024;

// Blocks of a call over `elements` per rank: ceil(elements / (kIpcThreads *
// kIpcElementsPerThread)), within [1, cap]. Throws usage_error for a cap outside
// 1..kMaxIpcBlocks.
int ipc_grid_blocks(size_t elements, int cap);

// What a rank's GPU can hold at once: its GPU (PCI bus id) and how many of the kernels' blocks
// it keeps resident (SMs x blocks per SM, the least over the kernels).
struct IpcRankGpu {
  std::string gpu;
  int resident_blocks = 0;
};

// The grid cap every rank uses: the least over ranks of resident_blocks divided by the number of
// ranks on that rank's GPU (ranks sharing a GPU may run at once, under MPS), at least 1, at most
// kMaxIpcBlocks. With every block resident at once no block waits on a peer block that cannot
// start because the waiting ones hold the GPU. Throws usage_error for no ranks or a rank
// without resident blocks.
int ipc_block_cap(const std::vector<IpcRankGpu>& ranks);

// ---- traffic --------------------------------------------------------------------------------
//
// Bytes one rank's kernel reads plus writes in one all-reduce of `bytes` per rank at `ranks`
// ranks (N = bytes, n = ranks), counted in the kernel's own loads and stores, flags left out:
//  - one rank, either algorithm: 2N. It reads its input and writes its output; no peer reads its
//    IPC buffer, so nothing is copied there.
//  - one-shot, n > 1: (n + 3)N. Input to IPC buffer (N read, N written), then n inputs read (its
//    own from the input, n - 1 from peers' buffers) and the output written.
//  - two-shot, n > 1: (5 - 2/n)N, the mean over ranks (segments differ by at most one
//    kIpcAlignBytes unit). Input to IPC buffer but the own segment ((n-1)/n N read and written);
//    the own segment from n ranks (N read) to output and IPC buffer (2N/n written); the other
//    segments from peers to output ((n-1)/n N read and written).
// At n > 1 the reads from peers cross the link between GPUs (or land on the same memory when
// ranks share a GPU), so kernel bytes / time is the kernel's traffic rate, not a DRAM or link
// rate. Throws usage_error for ranks outside 1..kMaxPlannedRanks.
double ipc_kernel_bytes(IpcAlgorithm algorithm, size_t bytes, int ranks);

// GB/s (1e9 bytes/s) of `bytes` moved in `us` microseconds; nullopt for a time that is not
// positive (no rate can be claimed from it).
std::optional<double> kernel_gbps(double bytes, double us);

}  // namespace commtool::tracing
