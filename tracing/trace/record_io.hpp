// The saved form of a trace run (`commtool trace --save DIR`, read by `commtool report DIR`),
// and the form records travel in from worker to launcher.
//
// Records are a line-oriented text format, one record per line, fields separated by single
// spaces, names last (they may contain spaces), integers in decimal: it is greppable, diffable
// and parses at several million records per second with std::from_chars, where a JSON document
// per record would not. Metadata and per-operation samples are small and stay JSON.
//
// The first line is "commtool-records 1" (format and version). Then, one per line, in any
// order (the writer groups them by kind), with the field order of records.hpp:
//
//   k|m|s STREAM CORRELATION START_NS END_NS NAME    GpuWork: kernel, memcpy, memset
//   a CORRELATION THREAD START_NS END_NS NAME        ApiCall
//   w STREAM EVENT START_NS END_NS                   StreamWaitCall
//   e EVENT STREAM DEVICE_NS                         EventCompletion
//   o SEQ THREAD PRODUCER_STREAM NCCL_STREAM CONSUMER_STREAM INPUT_READY_EVENT END_EVENT
//     ENQUEUE_START_NS ENQUEUE_END_NS WAIT_START_NS WAIT_END_NS WAIT_POLLS(0|1)
//     COMPLETE_AT_WAIT_RETURN(-1|0|1)                OperationMark, all on one line
//   r THREAD START_NS END_NS DOMAIN_BYTES DOMAIN NAME HostRange: the domain is length-prefixed
//                                                    so that both it and the name may hold spaces
//   d COUNT                                          dropped_records (several lines add up)
//
// A name is the rest of the line after one space: it may be empty and may hold any byte but a
// line end (the writer turns '\n' and '\r' in names into spaces). Blank lines are skipped and
// "\r\n" line ends accepted.
//
// DIR holds: run.json (RunMeta and, per rank, everything but the records) and
// records-rank<R>.txt per rank. save_run writes every file under a temporary name and renames,
// so a crash leaves no half-written file behind.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "tracing/cupti/records.hpp"
#include "tracing/trace/trace_run.hpp"

namespace commtool::tracing {

// The whole record set, lines as above. The first line names the format and its version.
std::string serialize_records(const RecordSet& records);

// Throws Error(kUsage) naming `source` (a file name), the line number, the bad field and its
// value: a malformed line, an interval that ends before it starts, a duplicated record (see
// check_unique_records).
//
// A file's last line without its line end is a record cut off mid-write (a run killed while
// writing): when `cut_line` is given, that line is left out and its number stored there (0
// when the text was whole), for the caller to warn about; without it the line is parsed like
// any other (the text a worker sends is never cut).
RecordSet parse_records(std::string_view text, const std::string& source,
                        size_t* cut_line = nullptr);

// Refuses a record that appears twice, naming `source`:LINE of the second, the field and the
// value, and the line of the first. A record is identified by: an operation mark by its seq
// (the harness numbers every operation of a rank once); an API call by its correlation id and
// start; GPU work by its kind, stream, correlation id and start; a stream wait by its stream,
// event and start; an event completion by its event, stream and device time; a host range by
// its thread, start and end. `text` is what `records` was parsed from (for the line numbers).
void check_unique_records(const RecordSet& records, std::string_view text,
                          const std::string& source);

// The line number in `text` of the index-th record (from 0) whose kind tag is one of `tags`
// ("o": the operation marks, "kms": GPU work), for errors; 0 when there is none.
size_t record_line(std::string_view text, std::string_view tags, size_t index);

nlohmann::json to_json(const RankRun& rank, bool with_records);
RankRun rank_run_from_json(const nlohmann::json& j);  // records taken from "records" if present
nlohmann::json to_json(const RunMeta& meta);
RunMeta run_meta_from_json(const nlohmann::json& j);

// Throws Error(kUsage) when dir exists and is not an empty directory or a previous save, or
// Error(kEnvironment) when it cannot be written.
void save_run(const std::string& dir, const TraceRun& run);

// Whether save_run could write into `dir`, asked before a run is measured so that a bad target
// never costs the run: it must be new (in a writable directory), empty, or an earlier saved
// run. Throws usage_error naming the path and what is wrong.
void check_save_dir(const std::string& dir);
// Throws Error(kUsage) naming the file, and the line for records, when DIR is not a saved run.
TraceRun load_run(const std::string& dir);

}  // namespace commtool::tracing
