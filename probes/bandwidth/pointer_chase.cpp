#include "probes/bandwidth/pointer_chase.hpp"

#include <algorithm>
#include <numeric>
#include <random>

namespace commtool::probe {

std::vector<uint64_t> make_chase_chain(size_t entries, uint32_t seed) {
  constexpr size_t kStride = 128 / sizeof(uint64_t);
  std::vector<size_t> order(entries);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(seed));
  std::vector<uint64_t> chain(entries * kStride, 0);
  for (size_t i = 0; i < entries; ++i) {
    chain[order[i] * kStride] = order[(i + 1) % entries] * kStride;
  }
  return chain;
}

uint64_t follow_chain(const std::vector<uint64_t>& chain, int hops) {
  uint64_t at = 0;
  for (int h = 0; h < hops; ++h)
    at = chain[at];
  return at;
}

}  // namespace commtool::probe
