// commtool's NCCL profiler plugin (interface v5, NCCL >= 2.28). NCCL loads it through
// NCCL_PROFILER_PLUGIN=<path to this library> and calls the table below; each call goes to the
// mode of the communicator's context (plugin_modes.hpp): trace mode for `commtool trace`, record
// mode for `commtool record`. Whatever happens inside, NCCL hears ncclSuccess: the plugin must
// never fail the job it observes.
// record_sink.hpp (so record_line.hpp) before plugin_modes.hpp (so nccl_profiler_v5.hpp): read
// after it, OpKind::kP2p would draw -Wshadow for NCCL's event bit kP2p.
#include "tracing/profiler/record_sink.hpp"

#include "tracing/profiler/plugin_modes.hpp"

namespace commtool::nccl_profiler {

namespace {

Result init(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name,
            int nodes, int nranks, int rank, DebugLogger /*log*/) {
  *activation_mask = 0;
  note_nccl_address(__builtin_return_address(0));  // called from inside NCCL
  *context = record_mode::requested()
                 ? record_mode::init(comm_id, comm_name, nodes, nranks, rank, activation_mask)
                 : trace_mode::init(comm_id, nranks, rank, activation_mask);
  return kSuccess;
}

Result start_event(void* context, void** handle, EventDescrV5* descr) {
  *handle = nullptr;
  auto* c = static_cast<ContextHeader*>(context);
  if (c == nullptr) return kSuccess;
  return c->mode == PluginMode::kRecord ? record_mode::start_event(c, handle, descr)
                                        : trace_mode::start_event(c, handle, descr);
}

Result stop_event(void* handle) {
  if (handle == nullptr) return kSuccess;
  return record_mode::owns_handle(handle) ? record_mode::stop_event(handle)
                                          : trace_mode::stop_event(handle);
}

Result record_event_state(void* handle, int state, void* state_args) {
  if (handle == nullptr || !record_mode::owns_handle(handle)) return kSuccess;
  return record_mode::record_event_state(handle, state, state_args);
}

Result finalize(void* context) {
  auto* c = static_cast<ContextHeader*>(context);
  if (c == nullptr) return kSuccess;
  return c->mode == PluginMode::kRecord ? record_mode::finalize(c) : trace_mode::finalize(c);
}

}  // namespace

}  // namespace commtool::nccl_profiler

// The symbol NCCL looks up.
extern "C" {
__attribute__((visibility("default"))) commtool::nccl_profiler::ProfilerV5 ncclProfiler_v5 = {
    "commtool",
    commtool::nccl_profiler::init,
    commtool::nccl_profiler::start_event,
    commtool::nccl_profiler::stop_event,
    commtool::nccl_profiler::record_event_state,
    commtool::nccl_profiler::finalize,
};
}
