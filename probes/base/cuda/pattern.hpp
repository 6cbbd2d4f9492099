// The data every measured transfer carries: word i of a buffer filled with seed s is
// pattern_word(i, s). A new seed per repeat means a copy that silently did nothing, or copied
// last round's data, shows up as mismatches rather than as a fast figure.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define COMMTOOL_HD __host__ __device__
#else
#define COMMTOOL_HD
#endif

namespace commtool::cuda {

// A 32-bit mix (the finaliser of MurmurHash3) of the index and the seed: cheap, and no two
// neighbouring words or seeds agree.
COMMTOOL_HD inline uint32_t pattern_word(uint64_t index, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(index) ^ static_cast<uint32_t>(index >> 32) * 0x9e3779b9u ^
               seed * 0x85ebca6bu;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

}  // namespace commtool::cuda
