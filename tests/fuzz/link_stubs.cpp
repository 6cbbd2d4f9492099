// The one definition the readers need from a translation unit the fuzzers cannot link:
// probes/base/nccl/communicator.cpp holds the NCCL communicator (it needs NCCL and the CUDA
// runtime) beside the two names of CommMode that a saved run's "comm" key is read with. These
// are copies of those two functions; test_tracing's saved-run tests check the real ones.
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
