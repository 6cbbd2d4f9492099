// PyTorch's Flight Recorder dumps as a cross-rank job (crossrank.hpp): what `commtool report`
// reads of a job commtool did not launch. PyTorch's NCCL watchdog writes one dump per rank when a
// collective times out (TORCH_FR_DUMP_TEMP_FILE, default /tmp/nccl_trace_rank_, followed by the
// rank), as a pickle (protocol 2; dump version "2.10" in torch 2.11); the same document can be
// had as JSON (torch._C._distributed_c10d._dump_nccl_trace_json). Both are read.
//
// The document: version, comm_lib_version (NCCL's), pg_config (per process group name: its desc
// and its ranks, a list written as text "[0, 1, 2]"), pg_status, and entries, a ring buffer of
// the latest operations (record_id, pg_id, process_group [name, desc], collective_seq_id,
// p2p_seq_id, is_p2p, profiling_name "nccl:all_reduce", input/output sizes and dtypes, state
// scheduled | started | completed, time_created_ns, timeout_ms, frames of the Python stack).
//
// Mapping: one group per process group (its name, the same on every rank), positions its
// collective_seq_id ("all_reduce #12", as PyTorch's own tools number them); point-to-point
// operations form a group of their own per process group, by p2p_seq_id. A rank is a global rank
// of the job: the dump does not say whose it is, so it is the number that ends the file's name
// (as PyTorch's analyser takes it); within a group it is its index in pg_config's ranks. What a
// rank called: the function (profiling_name without "nccl:"), the elements of its inputs, their
// dtypes; the call site is the first frame outside installed packages. A dump holding an operation
// not completed is of a job that was stuck (the watchdog writes dumps on a timeout).
//
// Lenient where the format drifts: an entry without a field it needs is left out and counted,
// a key it does not know is ignored. Bounded: kMaxFrEntries entries per file, names to the
// crossrank text's excerpts, the pickle by its reader's limits.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tracing/crossrank/crossrank.hpp"

namespace commtool::crossrank {

inline constexpr size_t kMaxFrEntries = 1'000'000;
// The highest rank a process group's ranks may name (as the recordings' kMaxCommRanks).
inline constexpr int kMaxGroupRank = 1 << 22;

struct FrDumpInfo {
  std::string file;
  int rank = -1;
  std::string version;       // the dump's own version ("2.10")
  std::string nccl_version;  // comm_lib_version
  size_t entries = 0;        // entries read
  size_t left_out = 0;       // entries without what they need
};

struct FlightRecorderJob {
  Job job;
  std::vector<FrDumpInfo> dumps;      // by rank
  std::vector<std::string> warnings;  // what was left out or repaired, file first
};

// Whether a file's first bytes look like a dump: a pickle, or a JSON object naming pg_config or
// entries near its start.
bool looks_like_flight_recorder(std::string_view head);

// The rank a dump file's name ends with ("nccl_trace_rank_12", "host-a_rank3.pickle" -> 12, 3);
// -1 when it ends with no number.
int rank_of_dump_file(const std::filesystem::path& file);

// Reads the dumps (each whole, within files::kMaxInputBytes) into one job. Throws Error (exit 2)
// naming the file: unreadable, not a dump (neither a pickle nor JSON of a dump), a name ending
// without a rank, two dumps of one rank. A file in `found` (met in a directory, not named by the
// user) that is not a dump, or has no rank in its name, is left out with a warning instead.
FlightRecorderJob read_flight_recorder(const std::vector<std::filesystem::path>& files,
                                       const std::set<std::filesystem::path>& found = {});

// For an on-call engineer: what was read (ranks, files, versions), the verdict, then per group
// where each set of ranks stood.
std::string render_flight_recorder_text(const FlightRecorderJob& fr, const Verdict& v);

}  // namespace commtool::crossrank
