// The command line's names for the request fields that lower layers refuse by name (a BadValue,
// probes/base/error.hpp): probes/ and tracing/ say "tokens_per_rank 0: must be at least 1",
// and the user reads "--tokens 0: must be at least 1".
#pragma once

#include <optional>
#include <string>

#include "probes/base/error.hpp"

namespace commtool::cli {

// "--tokens" for "tokens_per_rank"; a field without an option keeps its own name.
std::string option_for_field(const std::string& field);

// The sentence the user sees for a refused value, with the option's name.
std::string user_message(const BadValue& e);

// What a rank of an MPI job sends rank 0 instead of its result when its work failed: the exit
// code and the message as it would have printed them on one machine.
struct RankFailure {
  int exit_code = 0;
  std::string message;
};

// Runs `work`; nullopt when it ends normally, else the Error it threw (a refused value in the
// user's words).
template <class F>
std::optional<RankFailure> rank_failure(F&& work) {
  try {
    work();
  } catch (const BadValue& e) {
    return RankFailure{static_cast<int>(e.code()), user_message(e)};
  } catch (const Error& e) {
    return RankFailure{static_cast<int>(e.code()), e.what()};
  }
  return std::nullopt;
}

}  // namespace commtool::cli
