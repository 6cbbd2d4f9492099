// NCCL's RAS service's answer to VERBOSE STATUS (NCCL 2.24+; JSON after SET FORMAT json, 2.28.7+),
// as `ncclras -v` prints it or a client saved it: what `commtool report` reads of a job that is
// stuck now, from any of its nodes. RAS knows, per communicator, its size, the ranks that
// answered (host, pid, GPU, status, how many collectives of each kind each has issued) and the
// ranks that did not (missing: gone, unresponsive or considered dead), and the errors the ranks
// report. From that, in order: the missing ranks, ranks that issued fewer collectives of a kind
// than the others (behind), the ranks that report an error, and ranks whose status differs.
//
// The JSON of NCCL 2.28.9 is not valid where missing ranks are listed (seen on the GPU machine,
// 2026-12-07: no comma between "nvml_dev" and "status"); a value followed on the next line by a
// key gets its comma back, and the repair is said. The text form gives less (no per-rank counts):
// its Errors and Warnings sections are read, rank by rank where they name one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace commtool::crossrank {

struct RasRank {
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  int gpu = -1;                            // cuda_dev
  std::map<std::string, uint64_t> counts;  // collectives issued, by kind
  int async_error = 0;                     // an ncclResult_t; 0: none
  bool finalize_called = false, destroy_flag = false, abort_flag = false;
  bool missing = false;  // RAS has no answer from it
  bool unresponsive = false, considered_dead = false;
};

struct RasComm {
  std::string hash;
  int size = 0;
  std::vector<RasRank> ranks;  // those that answered, then the missing ones
};

struct RasStatus {
  std::string nccl_version;
  bool json = false;                  // read from the JSON form (else the text form)
  std::vector<RasComm> comms;         // JSON form
  std::vector<std::string> messages;  // text form: its Errors and Warnings lines
  std::vector<std::string> repairs;   // what was mended to read it
  bool no_communicators = false;      // RAS knew of none (the job's had ended, or not begun)
};

// Whether a file's first bytes look like a RAS answer (either form).
bool looks_like_ras(std::string_view head);

// Reads either form; a conversation saved by a client (its commands, then the answer) is read
// from the answer on. Throws Error (exit 2) naming `source` for a text that is neither.
RasStatus read_ras(std::string_view text, const std::string& source);

struct RasFinding {
  std::string text;
  std::string advice;  // what to do next about it: never empty
};

// The findings, most telling first; none when every rank of every communicator answered, issued
// as many collectives of each kind as the others and reports no error.
std::vector<RasFinding> analyse_ras(const RasStatus& s);

std::string render_ras_text(const RasStatus& s, const std::vector<RasFinding>& findings,
                            const std::string& source);

}  // namespace commtool::crossrank
