// The one error type that crosses layers. It carries the exit code the user will see, so a parser
// deep in probes/ decides "this is bad input (2)" and cli/ only prints and exits.
#pragma once

#include <stdexcept>
#include <string>

namespace commtool {

// The exit codes of README and man page. The numbers are a contract with scripts: never renumber.
enum class ExitCode : int {
  kOk = 0,
  kUsage = 2,         // bad usage or bad input (a file, a value)
  kEnvironment = 3,   // the machine lacks what was asked: no GPU, no NCCL, no P2P
  kVerification = 4,  // a measurement produced wrong data
  kTimeout = 5,       // a timeout or a hang was detected
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Bad input: names the value and what is accepted.
inline Error usage_error(const std::string& message) {
  return Error(ExitCode::kUsage, message);
}

}  // namespace commtool
