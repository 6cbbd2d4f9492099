// What the launcher reads from a worker's socket: frames reassembled from bytes arriving in
// pieces, and each message's payload as the launcher reads it (HELLO's pid, RESULT's document,
// ERROR's report, ALLGATHER_DONE's blobs), barriers and allgathers refereed by the Rendezvous
// the launcher keeps. A broken or hostile worker may send any of this: the launcher must answer
// with a WireError or commtool::Error, never crash. The first byte sets the piece size.
#include "fuzz_common.hpp"
#include "probes/base/workers/rendezvous.hpp"
#include "probes/base/workers/wire.hpp"

using namespace commtool::workers;

namespace {

constexpr int kRanks = 4;

void handle(Rendezvous& rendezvous, wire::Message message) {
  // The launcher knows each connection's rank and refuses a message claiming another.
  if (message.rank < 0 || message.rank >= kRanks) return;
  switch (message.type) {
    case wire::MessageType::kHello:
      wire::decode_hello_pid(message.payload);
      return;
    case wire::MessageType::kBarrier:
      rendezvous.arrive(message.rank, {Collective::Kind::kBarrier, message.sequence});
      return;
    case wire::MessageType::kAllgather:
      if (auto release = rendezvous.arrive(
              message.rank, {Collective::Kind::kAllgather, message.sequence}, message.payload)) {
        wire::decode_blobs(wire::encode_blobs(release->blobs));
      }
      return;
    case wire::MessageType::kAllgatherDone:  // what a worker reads; decoded all the same
      wire::decode_blobs(message.payload);
      return;
    case wire::MessageType::kResult: {
      nlohmann::json result = wire::decode_result(message.payload);
      nlohmann::json copy = result;  // the launcher hands its results out by copy
      rendezvous.finish(message.rank);
      return;
    }
    case wire::MessageType::kError:
      wire::decode_error(message.payload);
      return;
    default:
      return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  wire::FrameDecoder decoder;
  Rendezvous rendezvous(kRanks);
  try {
    for (size_t at = 1; at < size; at += piece) {
      decoder.append(reinterpret_cast<const char*>(data) + at, std::min(piece, size - at));
      while (std::optional<wire::Message> message = decoder.next()) {
        try {  // the launcher fails the group with the worker's bad payload named
          commtool::fuzz::expect_error_or_value([&] { handle(rendezvous, std::move(*message)); });
        } catch (const wire::WireError& e) {
          if (e.kind() != wire::WireError::Kind::kProtocol) throw;
        }
      }
    }
  } catch (const wire::WireError& e) {  // a bad frame: the launcher drops the connection
    if (e.kind() != wire::WireError::Kind::kProtocol) throw;
  }
  return 0;
}
