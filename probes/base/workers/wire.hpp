// How the launcher and its workers frame messages on their private Unix-domain stream socket:
// a fixed 24-byte header {magic, type, rank, sequence, payload length} and then the payload.
// Both ends are the same binary on the same host, so fields travel in native byte order.
//
// Two ways to read: read_message() blocks (with a deadline) for one whole message, as a worker
// does; FrameDecoder takes whatever bytes arrived and hands out complete messages, so the
// launcher's single poll loop never blocks on one slow worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace commtool::workers::wire {

enum class MessageType : std::uint32_t {
  kHello = 1,      // worker → launcher: rank; payload {"pid": N}
  kTask,           // launcher → worker: payload is the task JSON
  kBarrier,        // worker → launcher: entered barrier #sequence
  kBarrierDone,    // launcher → worker: everybody entered barrier #sequence
  kAllgather,      // worker → launcher: its blob for allgather #sequence
  kAllgatherDone,  // launcher → worker: every rank's blob, in rank order (encode_blobs)
  kResult,         // worker → launcher: payload is the result JSON
  kError,          // worker → launcher: payload {"code": exit code, "message": text}
  kShutdown,       // launcher → worker: the run is over, exit
};

const char* type_name(MessageType type);

struct Message {
  MessageType type = MessageType::kHello;
  int rank = 0;
  std::uint32_t sequence = 0;  // which barrier or allgather, counted from 1 per kind
  std::string payload;
};

inline constexpr std::uint32_t kMagic = 0x574d5443;  // "CTMW" in memory on little-endian
inline constexpr std::size_t kHeaderBytes = 24;
// Real payloads are JSON documents and a few 128-byte blobs per rank. A length beyond this is a
// stray or corrupted stream, not a message to allocate for.
inline constexpr std::uint64_t kMaxPayloadBytes = 64ull << 20;

class WireError : public std::runtime_error {
 public:
  enum class Kind {
    kClosed,    // the peer closed the connection (at a message boundary or inside one)
    kTimedOut,  // the deadline passed
    kProtocol,  // the bytes are not a message: bad magic, type or length
    kSystem,    // a socket call failed
  };
  WireError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The header and payload as bytes on the wire.
std::string encode(const Message& message);

// Reassembles messages from bytes that arrive in arbitrary pieces. Throws WireError(kProtocol)
// as soon as a header is complete and wrong, before waiting for its payload.
class FrameDecoder {
 public:
  void append(const char* data, std::size_t size) { buffer_.append(data, size); }
  std::optional<Message> next();
  // Bytes of an unfinished message: non-zero at EOF means the peer died mid-message.
  std::size_t pending_bytes() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

// Sends one whole message, retrying after EINTR and short writes, waiting for room until the
// deadline. Never raises SIGPIPE. Throws WireError.
void write_message(int fd, const Message& message, Deadline deadline);

// Receives one whole message, retrying after EINTR and short reads. Throws WireError: kClosed
// when the peer closed, kTimedOut at the deadline, kProtocol for a malformed header.
Message read_message(int fd, Deadline deadline);

// Moves what has arrived (up to one largest message's worth) into the decoder, without
// blocking. Returns false at end of stream (or a reset connection); true otherwise, also when
// nothing was there. Throws WireError(kSystem).
bool receive_available(int fd, FrameDecoder& into);

// The payload of ALLGATHER_DONE: a count, then each blob as a length and its bytes.
std::string encode_blobs(const std::vector<std::string>& blobs);
std::vector<std::string> decode_blobs(const std::string& payload);  // throws WireError(kProtocol)

// The payloads the launcher reads from a worker. A worker is a process of ours, but a broken
// one (or a stranger on the socket) may send anything: each decoder either returns what the
// message says or throws WireError(kProtocol), so no payload can take the launcher down.

// HELLO: {"pid": N}; -1 when the payload does not name a pid.
long decode_hello_pid(const std::string& payload);

// RESULT: the worker's result document, at most files::kMaxJsonDepth deep.
nlohmann::json decode_result(const std::string& payload);

// ERROR: {"code": C, "message": text}, and for a value the worker refused also "field",
// "value" and "why" (a BadValue's parts). C is a whole number from 1 to 5 (an exit code).
struct ErrorReport {
  int code = 0;
  std::string message;
  std::string field, value, why;  // empty unless the worker refused a value
};
ErrorReport decode_error(const std::string& payload);

}  // namespace commtool::workers::wire
