// The names of CommMode, apart from the communicator: a saved run's "comm" key is read with
// them by code (and fuzzers) that link neither NCCL nor the CUDA runtime.
#include <optional>
#include <string>

#include "probes/base/nccl/communicator.hpp"

namespace commtool::nccl {

std::string to_string(CommMode m) {
  return m == CommMode::kBlocking ? "blocking" : "nonblocking";
}

std::optional<CommMode> parse_comm_mode(const std::string& text) {
  for (CommMode m : {CommMode::kBlocking, CommMode::kNonBlocking}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

}  // namespace commtool::nccl
