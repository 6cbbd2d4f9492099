// Asking NCCL's RAS service of a running job for its status, as `ncclras -v` does: a TCP
// connection to NCCL_RAS_ADDR (default localhost:28028, where one process of each node of the
// job listens), then, a line each, "CLIENT PROTOCOL 2" (answered "SERVER PROTOCOL 2"),
// "TIMEOUT <s>" (how long RAS may take to gather from the other nodes; answered "OK"),
// optionally "SET FORMAT json" (NCCL 2.28.7+; "OK"), and "VERBOSE STATUS", whose answer runs to
// the end of the connection. `commtool record` asks it when it sees a hang and keeps the answer
// beside the recording (tracing/crossrank/ras.hpp reads it).
//
// Every step is bounded by one deadline (connect, each send and each read), and the answer by
// kMaxRasAnswerBytes: a RAS that does not answer (seen 2026-12-07 while a rank was stopped with
// SIGSTOP) costs the caller the timeout, never a hang.
#pragma once

#include <chrono>
#include <string>

namespace commtool::record {

inline constexpr size_t kMaxRasAnswerBytes = 64u << 20;
inline constexpr const char* kDefaultRasAddress = "localhost:28028";

struct RasAnswer {
  bool ok = false;
  std::string text;  // the answer to VERBOSE STATUS
  std::string why;   // !ok: what went wrong ("connection refused", "no answer within 5.0 s")
};

// NCCL_RAS_ADDR when set (host:port, or [v6]:port), else kDefaultRasAddress.
std::string ras_address();

RasAnswer query_ras(const std::string& address, std::chrono::milliseconds timeout, bool json);

}  // namespace commtool::record
