// What one request may ask of memory, checked when it is planned, before anything is allocated.
// Options each inside their own range can multiply into terabytes (sizes x ranks sharing a GPU,
// tokens x top-k x ranks), which used to end in an allocation failure deep in a worker or in
// std::bad_alloc; now they are refused as bad input (exit 2), saying how much the request would
// need and the limit. The limits sit above what any sensible run asks and below what a machine
// survives; what a given GPU really has is only known once it is found.
#pragma once

#include <cstdint>
#include <string>

namespace commtool::measure {

// Device memory on one GPU, all the ranks it carries together: about the largest GPUs' memory.
inline constexpr uint64_t kMaxGpuBytes = 256ull << 30;
// Host memory of one request: a plan built in commtool (a generated routing), or the buffers
// its workers keep on the host (pinned copy buffers, reference data), all ranks together.
inline constexpr uint64_t kMaxHostBytes = 16ull << 30;
// Measured operations one rank keeps (times, records) until it reports: about 1 KiB each.
inline constexpr uint64_t kMaxOperationsPerRank = 1'000'000;

// a * b and a + b, stopping at 2^64 - 1 instead of wrapping.
uint64_t saturating_mul(uint64_t a, uint64_t b);
uint64_t saturating_add(uint64_t a, uint64_t b);

// A byte count for a message: exact where it is a whole number of a binary unit ("64 GiB"),
// else to one decimal ("1.5 TiB"); the saturated 2^64 - 1 reads "16 EiB or more".
std::string approx_byte_size(uint64_t bytes);

// Throws BadValue{field, value, "<what> would need <bytes>; the limit is <limit>"} when bytes is
// above limit. `what` says what needs it: "4 ranks on GPU 0 with 2 buffers of 64 GiB each".
void check_memory(const std::string& field, const std::string& value, uint64_t bytes,
                  uint64_t limit, const std::string& what);

}  // namespace commtool::measure
