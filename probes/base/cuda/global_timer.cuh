// The GPU's nanosecond clock (%globaltimer), which every bounded wait in a kernel reads: a spin
// loop compares it with its start and gives up after its timeout, so no kernel can hang a GPU.
#pragma once

#include <cstdint>

namespace commtool::cuda {

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace commtool::cuda
