// One MPI session of a commtool process: MPI initialised through the MPI plugin
// (mpi_abi.hpp), this process's rank among how many, its host name, the gather of every rank's
// bytes to rank 0 and the broadcast from it, and MPI_Finalize when the session ends. Move-only:
// MPI may be initialised once per process.
//
// Every gather and broadcast is collective: every rank must call it, in the same order, or the
// ranks wait for each other forever. Callers bound that wait with their watchdog.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "probes/base/dynlib.hpp"

struct CommtoolMpiApi;

namespace commtool::cluster {

class MpiSession {
 public:
  // Whether this build carries the MPI plugin (CMake found MPI; COMMTOOL_MPI).
  static bool built_with_mpi();

  // Loads the plugin ($COMMTOOL_MPI_PLUGIN, else libcommtool_mpi.so beside the build's or the
  // installation's commtool) and initialises MPI. Throws Error(kEnvironment) naming what is
  // missing: a build without MPI, the plugin, or the MPI library it needs.
  static MpiSession start();
  // start() under a watchdog: MPI_Init waits for every rank, so a rank that never comes ends
  // this process with exit 5 after `timeout_s`, naming `command` and saying `advice` (a string
  // literal) instead of hanging.
  static MpiSession start_within(const std::string& command, double timeout_s, const char* advice);

  MpiSession(MpiSession&& other) noexcept;
  MpiSession& operator=(MpiSession&& other) noexcept;
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession();  // finalizes, silently; call finalize() to hear of a failure

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  const std::string& hostname() const { return hostname_; }
  std::string library_version() const;  // "Open MPI v4.1.4, ..."; "" when MPI does not say

  // Every rank's bytes in rank order at rank 0; an empty vector on the other ranks. A rank's
  // bytes may be at most max_bytes_per_rank and all of them together at most 2 GiB (MPI counts
  // in int): rank 0 checks and tells every rank, so on a refusal rank 0 throws Error(kUsage)
  // naming the rank and its size, and the other ranks return an empty vector as usual.
  std::vector<std::string> gather_to_root(std::string_view mine, uint64_t max_bytes_per_rank);

  // Rank 0's value, on every rank.
  int32_t broadcast_from_root(int32_t value);
  // Rank 0's bytes (at most 2 GiB), on every rank; what the other ranks pass is ignored.
  std::string broadcast_from_root(std::string_view at_root);

  // Returns when every rank has called it; sleeps `pause` between looks rather than spinning, so
  // a rank waiting here leaves its node's cores to a process that measures.
  void barrier_sleeping(std::chrono::microseconds pause);

  // MPI_Finalize; throws Error(kEnvironment) with MPI's words when it fails. Once only.
  void finalize();

 private:
  MpiSession() = default;
  void check(int rc, const char* error_text) const;

  DynamicLibrary plugin_;
  const CommtoolMpiApi* api_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  std::string hostname_;
};

// The host name of this machine (gethostname), "unknown-host" when it cannot be read.
std::string this_hostname();

}  // namespace commtool::cluster
