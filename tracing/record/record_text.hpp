// How the text of a recording names things, shared by the standing view and the report so an
// operation, a set of ranks or a time reads the same in both. Text that came from the
// recording (names, hosts) is escaped (commtool::excerpt) before it reaches a terminal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracing/record/standing.hpp"

namespace commtool::record {

// A collective by its function and NCCL's sequence number: "AllReduce #1042"; without a seq
// by its index on the communicator: "AllReduce op 7"; point-to-point with the peer:
// "Send to 3 (op 7)".
std::string op_label(const OpRef& op);

// "0-2,5,7-8" (two in a row as "0,1"), as the cross-rank verdict writes ranks; ranks need not be
// sorted.
std::string rank_list(std::vector<int> ranks);

// "rank 3" or "ranks 0-2".
std::string ranks_phrase(const std::vector<int>& ranks);

// "3f2a00000000beef" and, when the application named it, " (\"tp-group\")".
std::string comm_label(uint64_t comm, const std::string& name);

// Wall-clock ns since the epoch as "12:03:05" (UTC) and as "2026-12-04 12:03:05 UTC": the
// cross-rank verdict's own (crossrank.hpp), so that a time reads the same in both.
using crossrank::utc_clock;
using crossrank::utc_date_time;

// A duration: whole seconds from 10 s up ("61 s"), one decimal below ("2.5 s").
std::string seconds_text(double s);

}  // namespace commtool::record
