// What worker-side code sees of its peers: its rank, a barrier, an allgather of small blobs
// (CUDA IPC handles are 64 bytes, an NCCL unique id 128) and a way to hand its result to the
// launcher. The launcher's socket carries these (SocketCommunicator); under MPI the launcher is
// the rank's commtool process and MPI carries them on between nodes (cluster_group.hpp), so the
// probes do not notice.
//
// Every blocking call is bounded by a timeout fixed at construction. On expiry it throws
// commtool::Error(ExitCode::kTimeout, "rank R: barrier #K timed out after S s"); when the other
// side has gone away it throws Error(kTimeout) saying so. A probe therefore never waits forever
// on a peer that died.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace commtool::workers {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Returns once every rank has entered the same barrier. Barriers are numbered from 1 in
  // the order each rank calls them, so every rank must call them in the same order.
  virtual void barrier() = 0;

  // Every rank's blob, indexed by rank (this rank's own included). Numbered like barriers.
  virtual std::vector<std::string> allgather(const std::string& blob) = 0;

  // The worker's result, once, after its last collective.
  virtual void send_result(const nlohmann::json& result) = 0;
};

}  // namespace commtool::workers
