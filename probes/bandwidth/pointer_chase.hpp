// The chain a latency probe follows: a random cycle through slots one 128-byte line apart, so
// every hop lands on a new line in an order no prefetcher can guess. chain[i] holds the index
// of the next slot; the host follows the same chain to know where the GPU must end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace commtool::probe {

std::vector<uint64_t> make_chase_chain(size_t entries, uint32_t seed);
uint64_t follow_chain(const std::vector<uint64_t>& chain, int hops);

}  // namespace commtool::probe
