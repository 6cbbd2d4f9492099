// The profiler plugin's two modes, behind the one table NCCL loads (plugin.cpp):
//   trace  (COMMTOOL_PROFILER_OUT): one line per collective for `commtool trace`, trace_mode.cpp
//   record (COMMTOOL_RECORD_DIR): the recording of `commtool record`, record_mode.cpp
// When both variables are set, record mode wins: `commtool record` runs a user's job, which
// has no use for trace's file, and one activation mask serves every communicator of a process
// (NCCL keeps a single one), so the two could not ask for different events anyway.
#pragma once

#include <cstdint>

#include "tracing/profiler/nccl_profiler_v5.hpp"

namespace commtool::nccl_profiler {

enum class PluginMode : uint8_t { kTrace, kRecord };

// Every context handed to NCCL starts with its mode, so startEvent and finalize know whose it is.
struct ContextHeader {
  PluginMode mode;
};

namespace trace_mode {

// Always a context; the mask is 0 when there is no output file.
ContextHeader* init(uint64_t comm_id, int nranks, int rank, int* activation_mask);
Result start_event(ContextHeader* context, void** handle, EventDescrV5* descr);
Result stop_event(void* handle);
Result finalize(ContextHeader* context);

}  // namespace trace_mode

namespace record_mode {

bool requested();  // COMMTOOL_RECORD_DIR is set and not empty
// nullptr (and a mask of 0) when recording is impossible, e.g. an unwritable directory.
ContextHeader* init(uint64_t comm_id, const char* comm_name, int nodes, int nranks, int rank,
                    int* activation_mask);
Result start_event(ContextHeader* context, void** handle, EventDescrV5* descr);
Result stop_event(void* handle);
Result record_event_state(void* handle, int state, void* state_args);
Result finalize(ContextHeader* context);

// Record mode's handles are tagged numbers, never pointers (NCCL hands handles back after the
// plugin may have let go of an event: a KernelCh event of an operation evicted under the memory
// bound, the API event a graph replay names as parent). Trace mode's handles are pointers, whose
// top bits are 0 in user space on x86-64 and aarch64.
bool owns_handle(const void* handle);

}  // namespace record_mode

}  // namespace commtool::nccl_profiler
