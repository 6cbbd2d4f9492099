// What `commtool record` leaves behind, line by line: the profiler plugin, loaded into every
// process of a job (NCCL_PROFILER_PLUGIN), appends one JSON object per line to its own file
// <record dir>/procs/<host>-<pid>.jsonl. The plugin writes these lines; `commtool report` and the
// hang monitor of `commtool record` read them. Both sides use these types, so the format has
// one definition.
//
// Times are CLOCK_MONOTONIC nanoseconds of the writing host, except `gpu`, which holds the
// GPU's %globaltimer as NCCL's kernel stamped it. The `proc` line pairs the host's
// CLOCK_REALTIME with CLOCK_MONOTONIC, so a reader can print wall-clock times; the `seen` pair
// (host time at which NCCL's proxy thread reported each kernel stamp) lets a reader map GPU
// time onto the host clock: the smallest (seen - gpu) over nearby operations bounds the offset.
//
// Lines, by "k":
//   proc   first line of a file: who wrote it
//   comm   a communicator was initialised in this process (NCCL called the plugin's init),
//          with the rank's GPU
//   start  an operation was handed to NCCL's launch (the profiler's Coll/P2p event started):
//          written at once, so a process that hangs later still says what it had begun
//   end    everything known about one operation, written once no more is coming; not
//          always in the order of the start lines (index says which operation it ends)
//   alive  the writer thread's heartbeat, once a second: the process is still there
//   fin    a communicator was finalised
//   drop   lines the plugin could not keep (its buffer was full): how many, since when
// and, with `record --cupti`, from the plugin's CUPTI layer (tracing/profiler/cupti_mode.cpp),
// loaded into the same process through CUDA_INJECTION64_PATH:
//   cupti  the CUPTI layer's state changed: on, off (never started: why), yielded (another
//          CUPTI client asked for CUPTI and was given it); with CUPTI's dropped-record count
//   work   a kernel, copy or set on the GPU (CUPTI activity record): stream, the correlation id
//          of the call that queued it, its interval on the host clock, whether it is NCCL's
//   wait   a stream was made to wait for an event (cudaStreamWaitEvent): the host call
//   event  an event was recorded on a stream (cudaEventRecord)
// Correlation ids are CUPTI's: one counter per process, in the order the host calls were made,
// so they order a stream's work, waits and event records as they were queued. Not every GPU
// operation is written: see cupti_anchors.hpp for which are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace commtool::nccl_profiler {

// Set by `commtool record` for the job: the recording directory. Unset: no record-mode output.
inline constexpr const char* kRecordDirEnv = "COMMTOOL_RECORD_DIR";
inline constexpr int kRecordFormatVersion = 1;

// The most ranks a communicator of a recording may claim. Far above any job run so far (the
// largest publicised runs are of about 10^5 GPUs), low enough that what grows with a
// communicator's ranks (who never showed up) stays a few tens of MB: a 2 kB file claiming
// 2^31 ranks once made `report` allocate 8 GB.
inline constexpr int kMaxCommRanks = 1 << 22;

struct Interval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool operator==(const Interval&) const = default;
};

struct ProcLine {
  int version = kRecordFormatVersion;
  int64_t pid = 0;
  std::string host;
  int64_t realtime_ns = 0;   // CLOCK_REALTIME ...
  int64_t monotonic_ns = 0;  // ... and CLOCK_MONOTONIC read together
  std::string nccl_version;  // as NCCL reported it, if known; else empty
  bool operator==(const ProcLine&) const = default;
};

struct CommLine {
  uint64_t comm = 0;  // NCCL's communicator id (the same in every rank of one communicator)
  int rank = 0;
  int nranks = 0;
  int nodes = 0;
  std::string name;  // the communicator's name, if the application gave one
  int64_t t_ns = 0;
  // The GPU of this rank ("GPU-" and its UUID, as nvidia-smi -L prints it), from the CUDA
  // context current at NCCL's init; empty when the plugin could not tell (no CUDA driver in
  // the process, no current context) and in recordings made before it was written ("dev").
  std::string gpu;
  // The version of the NCCL that initialised it ("2.28.9"), or empty where unknown ("nccl";
  // absent from the first recordings' lines).
  std::string nccl_version;
  bool operator==(const CommLine&) const = default;
};

enum class OpKind { kCollective, kP2p };

// Identity of one operation of one rank: `index` counts every operation (collective or p2p)
// this rank started on the communicator, from 0; `seq` is NCCL's per-function sequence number
// (collectives only: NCCL counts AllReduce, Broadcast, ... separately).
struct StartLine {
  uint64_t comm = 0;
  int rank = 0;
  uint64_t index = 0;
  OpKind kind = OpKind::kCollective;
  std::optional<uint64_t> seq;  // collectives only
  std::string func;             // "AllReduce", "Send", ...
  uint64_t count = 0;           // elements
  std::string datatype;         // "ncclFloat32", ...
  int peer = -1;                // p2p only
  int64_t t_ns = 0;
  bool operator==(const StartLine&) const = default;
};

struct EndLine {
  StartLine op;  // the same identity and description as its start line (t_ns: the start)
  int root = -1;
  std::string algo;   // collectives: "RING", "TREE", ...; empty for p2p
  std::string proto;  // "LL", "LL128", "SIMPLE"; empty for p2p
  int channels = 0;   // channels NCCL planned
  int warps = 0;
  // The application's NCCL call (CollApi/P2pApi event), host. NCCL 2.28 ends it once the
  // operation is queued, before `enqueue` starts. Null when NCCL named no API event, and for
  // graph replays, whose API event is the capture's call.
  std::optional<Interval> api;
  // NCCL planning and launching it (Coll/P2p event), host; [start, start] when the plugin gave
  // up before NCCL stopped the event.
  Interval enqueue;
  std::optional<Interval> gpu;   // first kernel channel start .. last stop, GPU %globaltimer
  std::optional<Interval> seen;  // host time the first start and the last stop were reported
  int kernel_channels = 0;       // channels whose start and stop were reported
  // false: not every planned channel reported its start and end, and the plugin stopped
  // waiting: the communicator was finalised, the process followed too many operations at once
  // (the oldest is ended), or no channel was reported and none will be (a 1-rank communicator,
  // which copies without a kernel; or a later operation of the communicator completed first,
  // and NCCL runs them in order). gpu/seen then cover only what was reported: null if nothing.
  bool complete = true;
  // NCCL's API event said the call was captured into a CUDA graph: this is one of its replays.
  // Known while the plugin still holds the capture's API event (the last 64 Ki API events).
  bool graph_captured = false;
  bool operator==(const EndLine&) const = default;
};

struct AliveLine {
  int64_t t_ns = 0;
  bool operator==(const AliveLine&) const = default;
};

struct FinLine {
  uint64_t comm = 0;
  int rank = 0;
  int64_t t_ns = 0;
  bool operator==(const FinLine&) const = default;
};

struct DropLine {
  uint64_t lines = 0;  // lines lost since the previous drop line
  int64_t since_ns = 0;
  int64_t t_ns = 0;
  bool operator==(const DropLine&) const = default;
};

enum class CuptiState { kOn, kOff, kYielded };

struct CuptiLine {
  CuptiState state = CuptiState::kOn;
  std::string why;  // off: the reason; yielded: who asked; on: the CUPTI library's path
  uint64_t dropped =
      0;  // activity records CUPTI dropped so far (cuptiActivityGetNumDroppedRecords)
  int64_t t_ns = 0;
  bool operator==(const CuptiLine&) const = default;
};

// CUPTI's ids of a stream: the context's and the stream's (streams are numbered per context).
struct StreamId {
  uint32_t context = 0;
  uint32_t stream = 0;
  bool operator==(const StreamId&) const = default;
  auto operator<=>(const StreamId&) const = default;
};

struct WorkLine {
  StreamId stream;
  uint32_t correlation = 0;
  Interval gpu;       // on the host clock: CUPTI takes its timestamps from CLOCK_MONOTONIC
  bool nccl = false;  // a kernel whose name begins with "nccl"
  bool operator==(const WorkLine&) const = default;
};

struct WaitLine {
  StreamId stream;  // the stream made to wait
  uint32_t event = 0;
  uint32_t correlation = 0;
  int64_t t_ns = 0;  // the host call's start
  bool operator==(const WaitLine&) const = default;
};

struct EventLine {
  StreamId stream;  // where the event was recorded
  uint32_t event = 0;
  uint32_t correlation = 0;
  bool operator==(const EventLine&) const = default;
};

using RecordLine = std::variant<ProcLine, CommLine, StartLine, EndLine, AliveLine, FinLine,
                                DropLine, CuptiLine, WorkLine, WaitLine, EventLine>;

const char* to_string(CuptiState state);

// One line, no trailing newline. Communicator ids are written as 16 lowercase hex digits in a
// string (JSON numbers lose 64-bit integers in most readers). Strings are escaped as JSON
// requires (control characters as \u00XX); bytes that are not UTF-8 become U+FFFD, so a name
// from the application can never make a line unreadable.
std::string to_line(const RecordLine& line);

// Appends the line and a newline to `out` without allocating when `out` has room: the plugin
// formats on NCCL's threads and must stay cheap.
void append_line(std::string& out, const RecordLine& line);

// Reads one line. Throws commtool::Error (exit 2) naming the key and value for a line that is
// JSON but not a valid record line (a missing key, a wrong type, an unknown "k", a negative
// count, an interval that ends before it starts, a format version other than this one);
// `std::nullopt` for a line that is not JSON at all (the cut last line of a process that was
// killed mid-write; the reader decides whether that is legal). Keys it does not know are
// ignored, so a later version may add some.
std::optional<RecordLine> parse_line(std::string_view text);

namespace detail {

// parse_line's two readers, exposed so tests can hold them to each other. parse_line tries the
// fast one and falls back on the slow one, which alone defines what is accepted and every error.

// The reference: a JSON document (nlohmann), read key by key. parse_line's contract above.
std::optional<RecordLine> parse_line_slow(std::string_view text);

// Exactly the lines the plugin writes for names without escapes: one flat object, no
// whitespace, "k" first, every key of the kind once and no other, strings of printable ASCII
// without a backslash, integers without sign or fraction but a leading '-' where -1 is legal,
// [start,end] or null, true/false; every value in range. Returns what parse_line_slow returns
// for such a line, or std::nullopt for anything else, which means "ask the slow reader" (never
// "not JSON"). Throws nothing but std::bad_alloc.
std::optional<RecordLine> parse_line_fast(std::string_view text);

}  // namespace detail

}  // namespace commtool::nccl_profiler
