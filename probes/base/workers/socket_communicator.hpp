// The single-node Communicator: collectives are refereed by the launcher over the worker's
// private socket. A barrier or allgather is one message up and one answer down; the launcher
// answers when every rank has arrived, so a worker blocks here until its peers catch up.
#pragma once

#include <chrono>
#include <cstdint>

#include "probes/base/error.hpp"
#include "probes/base/workers/communicator.hpp"
#include "probes/base/workers/wire.hpp"

namespace commtool::workers {

class SocketCommunicator final : public Communicator {
 public:
  // fd: the connected launcher socket, borrowed (the caller closes it). timeout bounds each
  // blocking call, see communicator.hpp.
  SocketCommunicator(int fd, int rank, int size, std::chrono::duration<double> timeout);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  std::vector<std::string> allgather(const std::string& blob) override;
  void send_result(const nlohmann::json& result) override;

  // The worker's failure, in place of a result: the launcher stops the run and reports it.
  void send_error(ExitCode code, const std::string& message);
  // A refused value travels with its parts (field, value, why), for the caller to name.
  void send_error(const BadValue& bad);
  // After the result: returns when the launcher says SHUTDOWN or closes the socket, or after the
  // timeout, so the worker's exit (and its GPU memory's release) follows the whole group's.
  void wait_for_shutdown();

 private:
  void send(wire::MessageType type, std::uint32_t sequence, std::string payload,
            const std::string& during);
  // The launcher's answer to collective `during`; throws Error(kTimeout) naming it otherwise.
  wire::Message await(wire::MessageType type, std::uint32_t sequence, const std::string& during);
  [[noreturn]] void fail(const wire::WireError& error, const std::string& during) const;
  wire::Deadline deadline() const;

  int fd_;
  int rank_;
  int size_;
  std::chrono::duration<double> timeout_;
  std::uint32_t barriers_ = 0;
  std::uint32_t allgathers_ = 0;
  bool reported_ = false;
};

}  // namespace commtool::workers
