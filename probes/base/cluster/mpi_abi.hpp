// The table between commtool and its MPI plugin, libcommtool_mpi.so. MPI lives in a plugin that
// commtool loads only when it runs under MPI, so that the commtool binary needs no MPI library
// (its only shared library stays glibc) and a node without Open MPI still runs every command.
// The plugin is the one file that includes mpi.h (mpi_plugin.cpp); the rest of commtool reaches
// MPI through MpiSession (mpi_session.hpp), which loads this table.
//
// A C interface: the plugin and commtool each carry their own static libstdc++, so nothing of the
// C++ library crosses it. Rank 0 is the root of every gather and broadcast.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Every function returns 0 on success; otherwise it writes why, NUL-terminated, into
// error[0..error_size) and returns non-zero.
struct CommtoolMpiApi {
  int abi_version;  // kCommtoolMpiAbiVersion of the plugin's build
  // MPI_Init (unless the process already did), errors returned rather than fatal from then on,
  // and this process's rank and the number of ranks in MPI_COMM_WORLD.
  int (*init)(int* rank, int* size, char* error, size_t error_size);
  // Every rank's value, in rank order, into all_at_root[0..size) at rank 0 (ignored elsewhere).
  int (*gather_u64)(uint64_t mine, uint64_t* all_at_root, char* error, size_t error_size);
  // Every rank's bytes into all_at_root at rank 0, rank r's at offsets[r], counts[r] bytes long;
  // all_at_root, counts and offsets are read at rank 0 only.
  int (*gather_bytes)(const void* mine, int count, void* all_at_root, const int* counts,
                      const int* offsets, char* error, size_t error_size);
  // Rank 0's count bytes of data into data on every rank.
  int (*broadcast_bytes)(void* data, int count, char* error, size_t error_size);
  // Returns once every rank has called it, sleeping sleep_us between looks instead of spinning
  // as a blocking MPI collective does: for ranks that wait while another process on their node
  // measures, and must not take a core from it.
  int (*barrier_sleeping)(int sleep_us, char* error, size_t error_size);
  int (*finalize)(char* error, size_t error_size);
  // MPI_Get_library_version's text, for --verbose and messages.
  int (*library_version)(char* out, size_t out_size);
};

// The plugin's one exported function returns its table.
typedef const CommtoolMpiApi* (*CommtoolMpiApiEntry)(void);
}

namespace commtool::cluster {

inline constexpr int kCommtoolMpiAbiVersion = 2;
inline constexpr const char* kCommtoolMpiEntrySymbol = "commtool_mpi_api";
inline constexpr const char* kCommtoolMpiPluginName = "libcommtool_mpi.so";

}  // namespace commtool::cluster
