// Work that runs once per host of an MPI job: the lowest rank of each host does it (probe's
// copies, doctor's examination), the host's other ranks wait without spinning, and rank 0
// gathers what each working rank made. Ranks that worked side by side on one node would share
// its PCIe switches, root ports and host memory, and each would report less than the node gives.
//
// Every wait is bounded: starting and learning the hosts by `timeout_s`, the work itself by
// `work_limit_s` (the work bounds its own GPU waits; this catches a rank stuck outside them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "probes/base/cluster/mpi_session.hpp"

namespace commtool::cluster {

// The lowest rank of each host, ascending, given every rank's host in rank order.
std::vector<int> lowest_rank_per_host(const std::vector<std::string>& hosts);

struct PerHostSpec {
  const char* command = "";       // for the timeout message: "probe", "doctor"
  double timeout_s = 60;          // MPI start-up and the exchange of host names
  double work_limit_s = 600;      // the longest any host's work may take
  const char* start_advice = "";  // what the timeout says while ranks start (a string literal)
  const char* work_advice = "";   // ... while the hosts work
  uint64_t max_payload_bytes = 0;
  // Called on every rank once its part is known (true: it works for its host), before the work:
  // for the -v line.
  std::function<void(bool works)> on_role;
};

struct PerHostResult {
  bool worked = false;                // this rank did its host's work
  std::vector<std::string> hosts;     // rank 0: every rank's host, in rank order
  std::vector<int> workers;           // rank 0: the ranks that worked, ascending
  std::vector<std::string> payloads;  // rank 0: every rank's payload, "" for the waiting ones
};

// Runs `work` on the lowest rank of each host and gathers its bytes to rank 0. Collective:
// every rank of `session` calls it.
PerHostResult run_once_per_host(MpiSession& session, const PerHostSpec& spec,
                                const std::function<std::string()>& work);

// How many ranks of the job are on each worker's host, by worker (rank 0's result).
std::vector<int> ranks_on_worker_hosts(const PerHostResult& r);

}  // namespace commtool::cluster
