#include "probes/base/workers/rendezvous.hpp"

#include <fmt/format.h>

#include "probes/base/error.hpp"

namespace commtool::workers {

namespace {

Error disagreement(const std::string& what) {
  return Error(ExitCode::kTimeout, "the ranks disagree on their collectives: " + what);
}

}  // namespace

std::string describe(const Collective& collective) {
  return fmt::format("{} #{}",
                     collective.kind == Collective::Kind::kBarrier ? "barrier" : "allgather",
                     collective.sequence);
}

Rendezvous::Rendezvous(int size) : ranks_(static_cast<std::size_t>(size)) {}

std::optional<int> Rendezvous::first_in(State state) const {
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].state == state) return static_cast<int>(r);
  }
  return std::nullopt;
}

std::optional<Rendezvous::Release> Rendezvous::arrive(int rank, const Collective& collective,
                                                      std::string blob) {
  Rank& me = ranks_.at(static_cast<std::size_t>(rank));
  if (me.state != State::kRunning) {
    throw disagreement(fmt::format(
        "rank {} entered {} while {}", rank, describe(collective),
        me.state == State::kWaiting ? "already waiting" : "having reported its result"));
  }
  std::uint32_t& count =
      collective.kind == Collective::Kind::kBarrier ? me.barriers : me.allgathers;
  if (collective.sequence != count + 1) {
    throw disagreement(
        fmt::format("rank {} entered {} after #{}", rank, describe(collective), count));
  }
  if (open_ && *open_ != collective) {
    throw disagreement(fmt::format("rank {} entered {} while rank {} waits in {}", rank,
                                   describe(collective), *first_in(State::kWaiting),
                                   describe(*open_)));
  }
  if (std::optional<int> done = first_in(State::kFinished)) {
    throw disagreement(fmt::format("rank {} entered {} but rank {} has already reported its result",
                                   rank, describe(collective), *done));
  }
  count = collective.sequence;
  me.state = State::kWaiting;
  me.blob = std::move(blob);
  open_ = collective;
  if (++waiting_ < static_cast<int>(ranks_.size())) return std::nullopt;

  Release release{collective, {}};
  for (Rank& each : ranks_) {
    release.blobs.push_back(std::move(each.blob));
    each.blob.clear();
    each.state = State::kRunning;
  }
  last_ = collective;
  open_.reset();
  waiting_ = 0;
  return release;
}

void Rendezvous::finish(int rank) {
  Rank& me = ranks_.at(static_cast<std::size_t>(rank));
  if (me.state == State::kFinished) {
    throw disagreement(fmt::format("rank {} reported a second result", rank));
  }
  if (open_) {
    throw disagreement(fmt::format("rank {} reported its result while rank {} waits in {}", rank,
                                   *first_in(State::kWaiting), describe(*open_)));
  }
  me.state = State::kFinished;
  ++finished_;
}

bool Rendezvous::all_finished() const {
  return finished_ == static_cast<int>(ranks_.size());
}

Rendezvous::Stall Rendezvous::stall() const {
  Stall stall;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].state == State::kRunning) stall.ranks.push_back(static_cast<int>(r));
  }
  if (open_) {
    stall.missed = "reach " + describe(*open_);
  } else if (finished_ > 0) {
    stall.missed = "report a result";
  } else if (last_) {
    stall.missed = "make progress after " + describe(*last_);
  } else {
    stall.missed = "make progress after receiving the task";
  }
  return stall;
}

}  // namespace commtool::workers
