// The command line's names for the request fields that lower layers refuse by name (a BadValue,
// probes/base/error.hpp): probes/ and tracing/ say "tokens_per_rank 0: must be at least 1",
// and the user reads "--tokens 0: must be at least 1".
#pragma once

#include <string>

#include "probes/base/error.hpp"

namespace commtool::cli {

// "--tokens" for "tokens_per_rank"; a field without an option keeps its own name.
std::string option_for_field(const std::string& field);

// The sentence the user sees for a refused value, with the option's name.
std::string user_message(const BadValue& e);

}  // namespace commtool::cli
