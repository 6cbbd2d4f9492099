#include "probes/base/workers/socket_communicator.hpp"

#include <fmt/format.h>

namespace commtool::workers {

SocketCommunicator::SocketCommunicator(int fd, int rank, int size,
                                       std::chrono::duration<double> timeout)
    : fd_(fd), rank_(rank), size_(size), timeout_(timeout) {}

void SocketCommunicator::barrier() {
  std::uint32_t sequence = ++barriers_;
  std::string during = fmt::format("barrier #{}", sequence);
  send(wire::MessageType::kBarrier, sequence, {}, during);
  await(wire::MessageType::kBarrierDone, sequence, during);
}

std::vector<std::string> SocketCommunicator::allgather(const std::string& blob) {
  std::uint32_t sequence = ++allgathers_;
  std::string during = fmt::format("allgather #{}", sequence);
  send(wire::MessageType::kAllgather, sequence, blob, during);
  wire::Message answer = await(wire::MessageType::kAllgatherDone, sequence, during);
  std::vector<std::string> blobs;
  try {
    blobs = wire::decode_blobs(answer.payload);
  } catch (const wire::WireError& e) {
    fail(e, during);
  }
  if (static_cast<int>(blobs.size()) != size_) {
    throw Error(ExitCode::kTimeout, fmt::format("rank {}: {} returned {} blobs for {} ranks", rank_,
                                                during, blobs.size(), size_));
  }
  return blobs;
}

void SocketCommunicator::send_result(const nlohmann::json& result) {
  if (reported_) throw std::logic_error("send_result called twice");
  send(wire::MessageType::kResult, 0, result.dump(), "sending the result");
  reported_ = true;
}

void SocketCommunicator::send_error(const BadValue& bad) {
  nlohmann::json payload = {{"code", static_cast<int>(bad.code())},
                            {"message", bad.what()},
                            {"field", bad.field()},
                            {"value", bad.value()},
                            {"why", bad.why()}};
  send(wire::MessageType::kError, 0, payload.dump(), "reporting an error");
}

void SocketCommunicator::send_error(ExitCode code, const std::string& message) {
  nlohmann::json payload = {{"code", static_cast<int>(code)}, {"message", message}};
  send(wire::MessageType::kError, 0, payload.dump(), "reporting an error");
  reported_ = true;
}

void SocketCommunicator::wait_for_shutdown() {
  try {
    // Anything but SHUTDOWN here is a launcher bug; leaving is still the right thing to do.
    wire::read_message(fd_, deadline());
  } catch (const wire::WireError&) {
    // Closed or silent: the launcher is done with us either way.
  }
}

void SocketCommunicator::send(wire::MessageType type, std::uint32_t sequence, std::string payload,
                              const std::string& during) {
  try {
    wire::write_message(fd_, wire::Message{type, rank_, sequence, std::move(payload)}, deadline());
  } catch (const wire::WireError& e) {
    fail(e, during);
  }
}

wire::Message SocketCommunicator::await(wire::MessageType type, std::uint32_t sequence,
                                        const std::string& during) {
  wire::Message answer;
  try {
    answer = wire::read_message(fd_, deadline());
  } catch (const wire::WireError& e) {
    fail(e, during);
  }
  // One request is outstanding at a time, so the answer must be to this very collective: an
  // answer to another would mean the ranks disagree on the order of their collectives.
  if (answer.type != type || answer.sequence != sequence) {
    throw Error(ExitCode::kTimeout,
                fmt::format("rank {}: the launcher answered {} #{} during {}", rank_,
                            wire::type_name(answer.type), answer.sequence, during));
  }
  return answer;
}

void SocketCommunicator::fail(const wire::WireError& error, const std::string& during) const {
  switch (error.kind()) {
    case wire::WireError::Kind::kTimedOut:
      throw Error(ExitCode::kTimeout, fmt::format("rank {}: {} timed out after {:.1f} s", rank_,
                                                  during, timeout_.count()));
    case wire::WireError::Kind::kClosed:
      throw Error(ExitCode::kTimeout,
                  fmt::format("rank {}: the launcher went away during {}", rank_, during));
    case wire::WireError::Kind::kProtocol:
    case wire::WireError::Kind::kSystem:
      break;
  }
  throw Error(ExitCode::kTimeout,
              fmt::format("rank {}: lost the launcher during {}: {}", rank_, during, error.what()));
}

wire::Deadline SocketCommunicator::deadline() const {
  return wire::Clock::now() + std::chrono::duration_cast<wire::Clock::duration>(timeout_);
}

}  // namespace commtool::workers
