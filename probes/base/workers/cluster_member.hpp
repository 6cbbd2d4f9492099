// One rank's worker in a group that spans an MPI job (cluster_group.hpp): the commtool process
// of that rank starts it as the local launcher starts each of its workers (same command line,
// same private socket, same progress board), and reads it one step at a time: its next
// collective, its result, or how it failed. The round between ranks is the caller's; this
// class only ever waits on its own worker, and never longer than the group's bounds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/error.hpp"
#include "probes/base/workers/child_process.hpp"
#include "probes/base/workers/private_socket.hpp"
#include "probes/base/workers/progress_board.hpp"
#include "probes/base/workers/wire.hpp"

namespace commtool::workers {

// How a rank's part of the group ended early, as the rank saw it.
struct MemberFailure {
  std::string what;  // the whole sentence, naming the rank
  ExitCode code = ExitCode::kTimeout;
  std::string field, value, why;  // a value the worker refused (a BadValue's parts)
  int64_t when_ns = 0;            // CLOCK_REALTIME: the earliest failure of a round is its cause
};

// What the worker does next.
struct MemberStep {
  enum class Kind { kBarrier, kAllgather, kResult, kFailed };
  Kind kind = Kind::kFailed;
  uint32_t sequence = 0;  // of a barrier or allgather
  std::string payload;    // an allgather's blob, or the result's JSON text
  MemberFailure failure;  // kFailed
};

class ClusterMember {
 public:
  // Starts the worker: `executable __worker ... --rank R --size N --device D`, with exactly
  // `env`. `name` names the rank in messages ("rank 1 (node-b GPU 0)"). `timeout`: the longest
  // the worker may go without a word; `step`: the bound the worker puts on each GPU wait and
  // NCCL call, which it may overrun by a second before it is stopped. Throws
  // Error(kEnvironment) when the socket or the process cannot be created.
  ClusterMember(const std::string& executable, int rank, int size, int device,
                const std::vector<std::string>& env, std::string name,
                std::chrono::duration<double> timeout, std::chrono::duration<double> step,
                const std::string& task);
  ~ClusterMember();
  ClusterMember(const ClusterMember&) = delete;
  ClusterMember& operator=(const ClusterMember&) = delete;

  // Waits, within the bounds, for the worker's next step.
  MemberStep next();
  // Lets the worker out of the barrier or allgather it is in (blobs: encode_blobs of every
  // rank's, for an allgather).
  void release(const MemberStep& at, const std::string& blobs);
  // After its result: tells the worker to leave and waits a moment for it.
  void finish();
  // Stops the worker if it runs (SIGTERM, then SIGKILL), and reaps it.
  void stop();
  // Its slot of the progress board: where it stood.
  RankProgress progress() const { return board_.read(rank_); }

 private:
  std::optional<MemberStep> step_from(wire::Message message);
  MemberStep failed(std::string what, ExitCode code = ExitCode::kTimeout) const;
  MemberStep lost();
  std::optional<MemberStep> check_board() const;
  bool accept_worker();

  int rank_;
  std::string name_;
  std::chrono::duration<double> timeout_;
  std::chrono::duration<double> step_;
  std::string task_;
  PrivateDir dir_;
  ProgressBoard board_;
  UniqueFd listener_;
  UniqueFd connection_;
  wire::FrameDecoder decoder_;
  std::vector<ChildProcess> child_;  // one; a vector for stop_children
  bool reported_ = false;
  std::string last_collective_ = "its task";  // what it was last seen at, for messages
  wire::Clock::time_point last_progress_;
};

}  // namespace commtool::workers
