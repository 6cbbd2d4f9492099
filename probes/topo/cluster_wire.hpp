// What each rank of `topo` under MPI sends rank 0: its host, the source it read, the facts the
// cluster view compares (node_facts.hpp), and its topology as the report rank 0 will print
// (the text report, or the topo --json document); or, when its discovery failed, the error with
// its exit code, so that rank 0 names the rank and no rank is left waiting.
//
// JSON with a format name and version. Rank 0 reads it as input from another process: every
// field is checked, and anything else is Error(kUsage) naming the rank and the field (a rank
// running another commtool build is the likely cause, and the message says which version it
// sent).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "probes/topo/node_facts.hpp"

namespace commtool::topo {

inline constexpr const char* kRankPayloadFormat = "commtool-topo-rank";
inline constexpr int kRankPayloadVersion = 1;

// A rank's payload is refused past this size: a 64-GPU topology's JSON document is about 0.5 MB.
inline constexpr uint64_t kMaxRankPayloadBytes = 64ull << 20;

struct RankPayload {
  bool ok = true;
  int exit_code = 0;   // when !ok: the exit code the failure carries
  std::string error;   // when !ok: the message, as the rank would have printed it
  std::string host;    // never empty
  std::string source;  // Topology::source: "sysfs:/sys", "nccl-xml:FILE"
  NodeFacts facts;
  std::string document;  // the rank's own report: text, or the topo --json document
};

std::string encode_rank_payload(const RankPayload& payload);

// Throws Error(kUsage) "rank R sent ...: <field>: <what is wrong>".
RankPayload decode_rank_payload(std::string_view bytes, int rank);

// Rank 0: every rank's payload, in rank order. When a rank could not read its node, throws that
// rank's error with its exit code: "rank 3 on node-b: <error> (and 2 more rank(s) failed: ranks
// 5,9)".
std::vector<RankPayload> decode_rank_payloads(const std::vector<std::string>& gathered);

}  // namespace commtool::topo
