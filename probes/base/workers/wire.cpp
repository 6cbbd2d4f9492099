#include "probes/base/workers/wire.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"

namespace commtool::workers::wire {

namespace {

constexpr std::uint32_t kFirstType = static_cast<std::uint32_t>(MessageType::kHello);
constexpr std::uint32_t kLastType = static_cast<std::uint32_t>(MessageType::kShutdown);
// The highest exit code a worker may report.
constexpr int kLastExitCode = static_cast<int>(ExitCode::kTimeout);

struct Header {
  std::uint32_t magic;
  std::uint32_t type;
  std::int32_t rank;
  std::uint32_t sequence;
  std::uint64_t payload_bytes;
};
static_assert(sizeof(Header) == kHeaderBytes, "the header layout is the wire format");

Header parse_header(const char* bytes) {
  Header header;
  std::memcpy(&header, bytes, sizeof header);
  if (header.magic != kMagic) {
    throw WireError(
        WireError::Kind::kProtocol,
        fmt::format("bad magic 0x{:08x} (not a commtool worker message)", header.magic));
  }
  if (header.type < kFirstType || header.type > kLastType) {
    throw WireError(WireError::Kind::kProtocol,
                    fmt::format("unknown message type {}", header.type));
  }
  if (header.payload_bytes > kMaxPayloadBytes) {
    throw WireError(WireError::Kind::kProtocol,
                    fmt::format("payload of {} bytes exceeds the {} MiB limit",
                                header.payload_bytes, kMaxPayloadBytes >> 20));
  }
  return header;
}

Message to_message(const Header& header, std::string payload) {
  return Message{static_cast<MessageType>(header.type), header.rank, header.sequence,
                 std::move(payload)};
}

int remaining_ms(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 60'000 ? 60'000 : static_cast<int>(left);  // re-checked in the caller's loop
}

// Waits until fd is ready for `events` or the deadline passes. Returns false at the deadline.
bool wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    int wait_ms = remaining_ms(deadline);
    pollfd pfd{fd, events, 0};
    int n = ::poll(&pfd, 1, wait_ms);
    if (n > 0) return true;  // ready, or an error/hang-up the next call will report
    if (n < 0 && errno != EINTR) {
      throw WireError(WireError::Kind::kSystem, fmt::format("poll: {}", std::strerror(errno)));
    }
    if (n == 0 && wait_ms == 0) return false;
  }
}

void read_exact(int fd, char* into, std::size_t size, Deadline deadline, bool at_boundary) {
  std::size_t done = 0;
  while (done < size) {
    if (!wait_ready(fd, POLLIN, deadline)) {
      throw WireError(WireError::Kind::kTimedOut, "timed out waiting for a message");
    }
    ssize_t n = ::recv(fd, into + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n == 0 || errno == ECONNRESET) {
      throw WireError(WireError::Kind::kClosed, at_boundary && done == 0
                                                    ? "connection closed"
                                                    : "connection closed inside a message");
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      throw WireError(WireError::Kind::kSystem, fmt::format("recv: {}", std::strerror(errno)));
    }
  }
}

}  // namespace

const char* type_name(MessageType type) {
  switch (type) {
    case MessageType::kHello:
      return "HELLO";
    case MessageType::kTask:
      return "TASK";
    case MessageType::kBarrier:
      return "BARRIER";
    case MessageType::kBarrierDone:
      return "BARRIER_DONE";
    case MessageType::kAllgather:
      return "ALLGATHER";
    case MessageType::kAllgatherDone:
      return "ALLGATHER_DONE";
    case MessageType::kResult:
      return "RESULT";
    case MessageType::kError:
      return "ERROR";
    case MessageType::kShutdown:
      return "SHUTDOWN";
  }
  return "?";
}

std::string encode(const Message& message) {
  if (message.payload.size() > kMaxPayloadBytes) {
    throw WireError(WireError::Kind::kProtocol,
                    fmt::format("refusing to send a payload of {} bytes", message.payload.size()));
  }
  Header header{kMagic, static_cast<std::uint32_t>(message.type),
                static_cast<std::int32_t>(message.rank), message.sequence,
                static_cast<std::uint64_t>(message.payload.size())};
  std::string bytes(kHeaderBytes, '\0');
  std::memcpy(bytes.data(), &header, sizeof header);
  bytes += message.payload;
  return bytes;
}

std::optional<Message> FrameDecoder::next() {
  if (buffer_.size() < kHeaderBytes) return std::nullopt;
  Header header = parse_header(buffer_.data());
  std::size_t total = kHeaderBytes + static_cast<std::size_t>(header.payload_bytes);
  if (buffer_.size() < total) return std::nullopt;
  Message message = to_message(header, buffer_.substr(kHeaderBytes, total - kHeaderBytes));
  buffer_.erase(0, total);
  return message;
}

void write_message(int fd, const Message& message, Deadline deadline) {
  std::string bytes = encode(message);
  std::size_t done = 0;
  while (done < bytes.size()) {
    // MSG_NOSIGNAL: a worker that died must show up as an error here, not kill the launcher.
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      done += static_cast<std::size_t>(n);
    } else if (errno == EPIPE || errno == ECONNRESET) {
      throw WireError(WireError::Kind::kClosed, "connection closed");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLOUT, deadline)) {
        throw WireError(WireError::Kind::kTimedOut, "timed out sending a message");
      }
    } else if (errno != EINTR) {
      throw WireError(WireError::Kind::kSystem, fmt::format("send: {}", std::strerror(errno)));
    }
  }
}

Message read_message(int fd, Deadline deadline) {
  char header_bytes[kHeaderBytes];
  read_exact(fd, header_bytes, sizeof header_bytes, deadline, /*at_boundary=*/true);
  Header header = parse_header(header_bytes);
  std::string payload(static_cast<std::size_t>(header.payload_bytes), '\0');
  read_exact(fd, payload.data(), payload.size(), deadline, /*at_boundary=*/false);
  return to_message(header, std::move(payload));
}

bool receive_available(int fd, FrameDecoder& into) {
  char chunk[64 * 1024];
  // Up to one largest message per call, so that one chatty peer cannot starve the others.
  std::size_t budget = kHeaderBytes + kMaxPayloadBytes;
  for (;;) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      into.append(chunk, static_cast<std::size_t>(n));
      if (static_cast<std::size_t>(n) >= budget) return true;
      budget -= static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0 || errno == ECONNRESET) return false;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno != EINTR) {
      throw WireError(WireError::Kind::kSystem, fmt::format("recv: {}", std::strerror(errno)));
    }
  }
}

std::string encode_blobs(const std::vector<std::string>& blobs) {
  std::string out;
  auto put = [&out](std::uint64_t value) {
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
  };
  put(blobs.size());
  for (const std::string& blob : blobs) {
    put(blob.size());
    out += blob;
  }
  return out;
}

std::vector<std::string> decode_blobs(const std::string& payload) {
  std::size_t at = 0;
  auto take = [&](std::uint64_t& value) {
    if (payload.size() - at < sizeof value) {
      throw WireError(WireError::Kind::kProtocol, "truncated blob list");
    }
    std::memcpy(&value, payload.data() + at, sizeof value);
    at += sizeof value;
  };
  std::uint64_t count = 0;
  take(count);
  // Each blob needs at least its 8-byte length, which bounds a corrupt count.
  if (count > (payload.size() - at) / sizeof(std::uint64_t)) {
    throw WireError(WireError::Kind::kProtocol, "blob count exceeds the payload");
  }
  std::vector<std::string> blobs;
  blobs.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t size = 0;
    take(size);
    if (size > payload.size() - at) throw WireError(WireError::Kind::kProtocol, "truncated blob");
    blobs.push_back(payload.substr(at, static_cast<std::size_t>(size)));
    at += static_cast<std::size_t>(size);
  }
  if (at != payload.size()) throw WireError(WireError::Kind::kProtocol, "bytes after blob list");
  return blobs;
}

long decode_hello_pid(const std::string& payload) {
  try {
    const nlohmann::json hello = files::parse_json_bounded(payload, "HELLO");
    // Only a whole number: get<long> of 1e300 is undefined behaviour.
    if (!hello.is_object() || !hello.contains("pid") || !hello["pid"].is_number_integer()) {
      return -1;
    }
    return hello["pid"].get<long>();
  } catch (const nlohmann::json::exception&) {
    return -1;
  } catch (const Error&) {
    return -1;
  }
}

nlohmann::json decode_result(const std::string& payload) {
  // Bounded in depth: the launcher copies results, and a copy recurses once per level.
  try {
    return files::parse_json_bounded(payload, "RESULT");
  } catch (const nlohmann::json::exception& e) {
    throw WireError(WireError::Kind::kProtocol, e.what());
  } catch (const Error& e) {
    throw WireError(WireError::Kind::kProtocol, e.what());
  }
}

ErrorReport decode_error(const std::string& payload) {
  ErrorReport report;
  try {
    nlohmann::json error = files::parse_json_bounded(payload, "ERROR");
    // A whole number in range, checked before any conversion: get<int> would truncate 2.5 and
    // 2^32 + 2 into 2, and 1e300 is undefined behaviour.
    const nlohmann::json& code = error.at("code");
    if (!code.is_number_integer() || code.get<long long>() < 1 ||
        code.get<long long>() > kLastExitCode) {
      throw WireError(WireError::Kind::kProtocol,
                      fmt::format("error code {}", excerpt(code.dump())));
    }
    report.code = code.get<int>();
    report.message = error.at("message").get<std::string>();
    if (error.contains("field")) {
      report.field = error.at("field").get<std::string>();
      report.value = error.at("value").get<std::string>();
      report.why = error.at("why").get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw WireError(WireError::Kind::kProtocol, e.what());
  } catch (const Error& e) {
    throw WireError(WireError::Kind::kProtocol, e.what());
  }
  return report;
}

}  // namespace commtool::workers::wire
