// The one error type that crosses layers. It carries the exit code the user will see, so a parser
// deep in probes/ decides "this is bad input (2)" and cli/ only prints and exits.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

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

// A value from a user's file or command line as an error message may quote it: at most
// `max_chars` of it (then "... (N bytes)"), each control character or byte >= 0x7f as \xNN, so
// that a huge or binary input can neither flood nor drive the terminal.
std::string excerpt(std::string_view text, size_t max_chars = 80);

// A whole message as commtool prints it, the one escaping path every error goes through on its
// way to the terminal (cli/app.cpp): each control character but the line ends, each C1 control
// and each byte that is not UTF-8 as \xNN, and each run of non-blank characters longer than
// kMaxWordBytes cut to its first 80 with "... (N bytes)". So whatever a message quotes from a
// file or an option that its author did not excerpt() can neither drive the terminal nor flood
// it. `one_line`: line ends too are escaped (a message known to be one line, such as CLI11's).
inline constexpr size_t kMaxWordBytes = 160;
std::string printable_message(std::string_view message, bool one_line = false);

// A bad value of one field of a request, named as the request names it ("tokens_per_rank"),
// never as a user typed it: only the caller knows whether that was `--tokens 0`, a key in a file
// or an argument of a library call. what() reads "tokens_per_rank 0: must be at least 1"; cli/
// prints the same with the option's name in place of the field's (cli/app.cpp).
class BadValue : public Error {
 public:
  BadValue(std::string field, std::string value, std::string why)
      : Error(ExitCode::kUsage, field + " " + excerpt(value) + ": " + why),
        field_(std::move(field)),
        value_(std::move(value)),
        why_(std::move(why)) {}
  const std::string& field() const { return field_; }
  const std::string& value() const { return value_; }
  const std::string& why() const { return why_; }

 private:
  std::string field_, value_, why_;
};

inline BadValue bad_value(std::string field, std::string value, std::string why) {
  return BadValue(std::move(field), std::move(value), std::move(why));
}

}  // namespace commtool
