// A stand-in for an NCCL library loaded privately (as PyTorch loads its own): it exports
// ncclGetVersion and calls a profiler plugin's init from inside itself, as NCCL does, so a test
// can check that the plugin finds the version of the library that called it.
#include "tracing/profiler/nccl_profiler_v5.hpp"

using commtool::nccl_profiler::ProfilerV5;

extern "C" {

__attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  *version = 22809;  // 2.28.9
  return 0;
}

// noinline: the plugin's init must be called from this library's code, not inlined elsewhere.
__attribute__((visibility("default"), noinline)) int fake_nccl_init(ProfilerV5* table,
                                                                    void** context, uint64_t comm,
                                                                    int* mask) {
  return static_cast<int>(table->init(context, comm, mask, "fake", 1, 1, 0, nullptr));
}
}
