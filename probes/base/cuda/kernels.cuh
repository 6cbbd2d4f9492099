// The few kernels the probes need, behind host functions so that only kernels.cu is compiled
// by nvcc. Each waits with a timeout read from %globaltimer: no kernel here can hang a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace commtool::cuda {

// Holds `stream` until *release (host memory mapped into the device) becomes non-zero, so work
// queued behind it on several streams starts at the same moment when the host releases it.
// After timeout_ns it gives up and sets *timed_out (also mapped host memory) to 1.
//
// Sharp edge: a spin kernel occupies one SM until released; queue it on every stream first,
// release promptly, and never wait on it from the host before releasing.
void launch_spin_until_released(cudaStream_t stream, const volatile int* release, int* timed_out,
                                uint64_t timeout_ns);

// Copies bytes from src to dst with SM loads and stores (16-byte vectors, grid-stride, tail
// handled). Either side may be peer or mapped host memory.
void launch_sm_copy(cudaStream_t stream, void* dst, const void* src, size_t bytes, int blocks);

// Writes pattern_word(i, seed) to each 32-bit word; bytes must be a multiple of 4.
void launch_fill_pattern(cudaStream_t stream, void* dst, size_t bytes, uint32_t seed);

// Adds the number of words that differ from pattern_word(i, seed) to *mismatches (device or
// mapped memory).
void launch_count_mismatches(cudaStream_t stream, const void* buf, size_t bytes, uint32_t seed,
                             unsigned long long* mismatches);

// One thread follows chain[] (each entry the index of the next) for `hops` dependent loads
// that bypass the caches (ld.global.cv), and stores into result[0] the index reached and into
// result[1] the nanoseconds the chase took (%globaltimer). chain may be host, peer or local.
void launch_pointer_chase(cudaStream_t stream, const uint64_t* chain, int hops, uint64_t* result);

// Flag ping-pong between two GPUs or processes: the initiator stores i into *peer_flag with
// release semantics (system scope) and waits to acquire i from *my_flag; the responder waits
// for i and answers. `epoch` offsets the values so a flag left by an earlier round is never
// taken for this one. result[0] = nanoseconds for all rounds, result[1] = 1 on timeout.
void launch_flag_pingpong(cudaStream_t stream, int* my_flag, int* peer_flag, int rounds, int epoch,
                          bool initiator, uint64_t timeout_ns, uint64_t* result);

}  // namespace commtool::cuda
