// The launcher's bookkeeping of the collectives it referees: which rank waits in which barrier
// or allgather, when the last one arrives, and, when the group stalls, whom it is waiting for.
// Pure logic (no sockets, no clocks), so the rules are unit-tested directly.
//
// Barriers and allgathers are each numbered from 1 per rank. All waiting ranks must be in the
// same one: a rank that enters another collective, or reports its result while others wait,
// means the ranks disagree on their sequence of collectives and would deadlock; that is an
// error at once rather than a timeout later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace commtool::workers {

struct Collective {
  enum class Kind { kBarrier, kAllgather };
  Kind kind;
  std::uint32_t sequence;
  bool operator==(const Collective&) const = default;
};

std::string describe(const Collective& collective);  // "barrier #3"

class Rendezvous {
 public:
  explicit Rendezvous(int size);

  // Everybody has arrived: every rank's blob, in rank order (empty ones for a barrier).
  struct Release {
    Collective collective;
    std::vector<std::string> blobs;
  };
  // `rank` entered `collective`. Returns the release when it was the last to arrive. Throws
  // commtool::Error(kTimeout) when the ranks disagree (see above) or the numbering skips.
  std::optional<Release> arrive(int rank, const Collective& collective, std::string blob = {});

  // `rank` reported its result (or failure) and will take part in nothing more.
  void finish(int rank);
  bool all_finished() const;

  // Who the group waits for, for the timeout message: ranks, and what they did not do
  // ("reach barrier #3", "report a result", "make progress after allgather #1").
  struct Stall {
    std::vector<int> ranks;
    std::string missed;
  };
  Stall stall() const;

 private:
  enum class State { kRunning, kWaiting, kFinished };
  struct Rank {
    State state = State::kRunning;
    std::uint32_t barriers = 0;  // the last barrier entered
    std::uint32_t allgathers = 0;
    std::string blob;
  };
  std::optional<int> first_in(State state) const;

  std::vector<Rank> ranks_;
  std::optional<Collective> open_;  // the collective the waiting ranks are in
  std::optional<Collective> last_;  // the last one released
  int waiting_ = 0;
  int finished_ = 0;
};

}  // namespace commtool::workers
