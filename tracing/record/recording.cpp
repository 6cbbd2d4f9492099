#include "tracing/record/recording.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"

namespace fs = std::filesystem;

namespace commtool::record {

using nccl_profiler::AliveLine;
using nccl_profiler::CommLine;
using nccl_profiler::CuptiLine;
using nccl_profiler::DropLine;
using nccl_profiler::EndLine;
using nccl_profiler::EventLine;
using nccl_profiler::FinLine;
using nccl_profiler::ProcLine;
using nccl_profiler::RecordLine;
using nccl_profiler::StartLine;
using nccl_profiler::WaitLine;
using nccl_profiler::WorkLine;

namespace {

constexpr std::string_view kProcFileSuffix = ".jsonl";
// Read per call of read_more: large enough that a multi-GiB file loads at disk speed, small
// enough that the bytes of one read never matter.
constexpr size_t kReadChunk = 16 << 20;

const char* kind_name(const RecordLine& line) {
  constexpr const char* kNames[] = {"proc", "comm", "start", "end", "alive", "fin", "drop"};
  return kNames[line.index()];
}

}  // namespace

int64_t ProcessRecord::wall_ns(int64_t host_ns) const {
  return proc ? proc->realtime_ns + (host_ns - proc->monotonic_ns) : host_ns;
}

struct RecordingReader::File {
  files::AppendedFile file;
  std::string buffer;  // read, not yet consumed: the start of a line whose end has not arrived
  uint64_t line = 0;   // lines consumed
  size_t process = 0;  // in Recording::processes
  // Retention::kAll: per rank of the process (as ProcessRecord::ranks), the line of each of its
  // end lines, for naming an operation that ended twice.
  std::vector<std::vector<uint64_t>> end_line_numbers;
  // Per rank of the process: the line of its comm line, for naming a second one.
  std::vector<uint64_t> init_lines;
};

RecordingReader::RecordingReader(fs::path dir, Retention retention, ReadLimits limits)
    : retention_(retention), limits_(limits) {
  recording_.dir = std::move(dir);
}

RecordingReader::~RecordingReader() = default;
RecordingReader::RecordingReader(RecordingReader&&) noexcept = default;
RecordingReader& RecordingReader::operator=(RecordingReader&&) noexcept = default;

uint64_t RecordingReader::poll() {
  const fs::path procs = recording_.dir / kProcsDir;
  std::error_code ec;
  if (!fs::exists(procs, ec)) return 0;  // no process of the job has written yet
  if (!fs::is_directory(procs, ec)) {
    throw usage_error(
        fmt::format("{}: not a directory; a recording keeps its processes' files "
                    "there",
                    procs.string()));
  }
  std::set<std::string> known;
  for (const auto& f : files_)
    known.insert(f->file.path());
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(procs, ec)) {
    std::string path = entry.path().string();
    if (entry.path().filename().string().ends_with(kProcFileSuffix) && !known.contains(path)) {
      found.push_back(std::move(path));
    }
  }
  if (ec) throw usage_error(fmt::format("{}: cannot list: {}", procs.string(), ec.message()));
  std::sort(found.begin(), found.end());
  for (std::string& path : found) {
    auto f = std::make_unique<File>(
        File{files::AppendedFile(path, limits_.max_file_bytes), {}, 0, 0, {}, {}});
    f->process = recording_.processes.size();
    recording_.processes.emplace_back().file = std::move(path);
    files_.push_back(std::move(f));
  }
  const uint64_t before = recording_.end_lines;
  for (auto& f : files_)
    read_file(*f);
  return recording_.end_lines - before;
}

void RecordingReader::read_file(File& f) {
  for (;;) {
    const size_t n = f.file.read_more(f.buffer, kReadChunk);
    if (n == 0) break;
    size_t start = 0;
    for (size_t end; (end = f.buffer.find('\n', start)) != std::string::npos; start = end + 1) {
      if (end - start > kMaxLineBytes) {
        throw usage_error(fmt::format("{}:{}: a line of {} bytes; a record line has at most {}",
                                      f.file.path(), f.line + 1, end - start, kMaxLineBytes));
      }
      consume(f, std::string_view(f.buffer).substr(start, end - start));
    }
    f.buffer.erase(0, start);
    if (f.buffer.size() > kMaxLineBytes) {
      throw usage_error(
          fmt::format("{}:{}: more than {} bytes without a line end; a record line "
                      "has at most that many",
                      f.file.path(), f.line + 1, kMaxLineBytes));
    }
    if (n < kReadChunk) break;
  }
  // What stays is at most a partial line; the chunk's room must not stay with it, or a job of
  // a thousand processes would hold a thousand chunks between polls.
  f.buffer.shrink_to_fit();
}

namespace {

// Applies one parsed line to the process it came from. `path` and `line` name it in errors.
class Apply {
 public:
  Apply(ProcessRecord& p, Recording& rec, Retention retention, uint64_t max_operations,
        const std::string& path, uint64_t line, std::vector<std::vector<uint64_t>>& end_lines,
        std::vector<uint64_t>& init_lines)
      : p_(p),
        rec_(rec),
        retention_(retention),
        max_operations_(max_operations),
        path_(path),
        line_(line),
        end_lines_(end_lines),
        init_lines_(init_lines) {}

  void operator()(const ProcLine&) {
    throw usage_error(fmt::format("{}: a second proc line (the process's is line 1)", where()));
  }

  void operator()(const CommLine& c) {
    const size_t r = rank_of(c.comm, c.rank);
    RankRecord& rank = p_.ranks[r];
    if (rank.init) {
      throw usage_error(
          fmt::format("{}: communicator {:016x} rank {} initialised again (first on "
                      "line {})",
                      where(), c.comm, c.rank, init_lines_[r]));
    }
    rank.init = c;
    init_lines_[r] = line_;
    seen(c.t_ns);
  }

  void operator()(const StartLine& s) {
    RankRecord& rank = p_.ranks[rank_of(s.comm, s.rank)];
    if (!rank.in_flight.try_emplace(s.index, s).second) {
      throw usage_error(
          fmt::format("{}: communicator {:016x} rank {} started operation {} again "
                      "before it ended",
                      where(), s.comm, s.rank, s.index));
    }
    ++rank.started;
    if (rank.in_flight.size() > kMaxInFlightPerRank) {
      rank.in_flight.erase(rank.in_flight.begin());
      ++rank.forgotten;
    }
    seen(s.t_ns);
  }

  // By value: parse_line's line is moved in, and from here into the recording.
  void operator()(EndLine e) {
    const size_t r = rank_of(e.op.comm, e.op.rank);
    RankRecord& rank = p_.ranks[r];
    rank.in_flight.erase(e.op.index);
    ++(e.complete ? rank.completed : rank.unverified);
    if (!rank.last_ended || e.op.index >= rank.last_ended->op.index) rank.last_ended = e;
    ++rec_.end_lines;
    if (retention_ == Retention::kAll) {
      if (rec_.end_lines > max_operations_) {
        throw usage_error(
            fmt::format("{}: more than {} operations in the recording; commtool "
                        "report reads at most that many",
                        where(), max_operations_));
      }
      rank.ops.push_back(std::move(e));
      end_lines_[r].push_back(line_);
    } else {
      rank.recent.push_back(std::move(e));
      if (rank.recent.size() > kRecentEndedPerRank) rank.recent.pop_front();
    }
    seen(std::max(e.enqueue.end_ns, e.seen ? e.seen->end_ns : e.enqueue.end_ns));
  }

  void operator()(const AliveLine& a) {
    p_.last_alive_ns = std::max(p_.last_alive_ns.value_or(a.t_ns), a.t_ns);
    seen(a.t_ns);
  }

  void operator()(const FinLine& f) {
    p_.ranks[rank_of(f.comm, f.rank)].fin_ns = f.t_ns;
    seen(f.t_ns);
  }

  void operator()(const DropLine& d) {
    p_.dropped_lines += d.lines;
    if (!p_.first_drop_ns) p_.first_drop_ns = d.since_ns;
    seen(d.t_ns);
  }

  // The CUPTI layer's lines: kept for the report only (the standing view needs none). Their
  // number is bounded like the end lines': a GPU work line or two per mark, a few marks per
  // operation.
  void operator()(const CuptiLine& c) {
    p_.cupti.states.push_back(c);
    seen(c.t_ns);
  }
  void operator()(const WorkLine& w) { keep(p_.cupti.work, w); }
  void operator()(const WaitLine& w) { keep(p_.cupti.waits, w); }
  void operator()(const EventLine& e) { keep(p_.cupti.events, e); }

 private:
  size_t rank_of(uint64_t comm, int rank) {
    for (size_t i = 0; i < p_.ranks.size(); ++i) {
      if (p_.ranks[i].comm == comm && p_.ranks[i].rank == rank) return i;
    }
    RankRecord& added = p_.ranks.emplace_back();
    added.comm = comm;
    added.rank = rank;
    end_lines_.emplace_back();
    init_lines_.push_back(0);
    return p_.ranks.size() - 1;
  }

  void seen(int64_t t_ns) { p_.last_t_ns = std::max(p_.last_t_ns, t_ns); }

  template <class Line>
  void keep(std::vector<Line>& lines, const Line& l) {
    if (retention_ != Retention::kAll) return;
    if (++rec_.cupti_lines > kCuptiLinesPerOperation * max_operations_) {
      throw usage_error(
          fmt::format("{}: more than {} CUPTI lines in the recording; commtool "
                      "report reads at most that many",
                      where(), kCuptiLinesPerOperation * max_operations_));
    }
    lines.push_back(l);
  }

  std::string where() const { return fmt::format("{}:{}", path_, line_); }

  ProcessRecord& p_;
  Recording& rec_;
  Retention retention_;
  uint64_t max_operations_;
  const std::string& path_;
  uint64_t line_;
  std::vector<std::vector<uint64_t>>& end_lines_;
  std::vector<uint64_t>& init_lines_;
};

}  // namespace

void RecordingReader::consume(File& f, std::string_view text) {
  ++f.line;
  // "file:line", for errors only: formatting it for every line cost more than reading some.
  const auto where = [&f] { return fmt::format("{}:{}", f.file.path(), f.line); };
  std::optional<RecordLine> line;
  try {
    line = nccl_profiler::parse_line(text);
  } catch (const Error& e) {
    throw usage_error(fmt::format("{}: {}", where(), e.what()));
  }
  if (!line) {
    throw usage_error(
        fmt::format("{}: not a record line (not JSON): {}; only a file's last line "
                    "may be cut off, once the job has ended",
                    where(), excerpt(text)));
  }
  ProcessRecord& p = recording_.processes[f.process];
  if (!p.proc) {
    const auto* proc = std::get_if<ProcLine>(&*line);
    if (proc == nullptr) {
      throw usage_error(
          fmt::format("{}: a {} line first; a process's file starts with its proc "
                      "line",
                      where(), kind_name(*line)));
    }
    p.proc = *proc;
    ++p.lines;
    return;
  }
  std::visit(Apply(p, recording_, retention_, limits_.max_operations, f.file.path(), f.line,
                   f.end_line_numbers, f.init_lines),
             std::move(*line));
  ++p.lines;
}

void RecordingReader::finish() {
  for (auto& f : files_) {
    if (f->buffer.empty()) continue;
    // A whole record whose line end never came is kept; anything else was cut while written.
    bool whole = false;
    try {
      whole = nccl_profiler::parse_line(f->buffer).has_value();
    } catch (const Error&) {
      whole = true;  // JSON that is no record: consume() names it
    }
    if (whole) {
      consume(*f, f->buffer);
    } else {
      recording_.warnings.push_back(
          fmt::format("{}:{}: the last line is cut off ({} bytes without a line end), left out: "
                      "the process stopped while writing it",
                      f->file.path(), f->line + 1, f->buffer.size()));
    }
    f->buffer.clear();
  }
  if (retention_ != Retention::kAll) return;
  std::map<std::pair<uint64_t, int>, std::string> holder;  // (comm, rank) -> file
  for (auto& f : files_) {
    ProcessRecord& p = recording_.processes[f->process];
    for (size_t r = 0; r < p.ranks.size(); ++r) {
      RankRecord& rank = p.ranks[r];
      auto [it, fresh] = holder.try_emplace({rank.comm, rank.rank}, p.file);
      if (!fresh) {
        throw usage_error(
            fmt::format("{}: communicator {:016x} rank {} is also recorded by {}; a "
                        "rank belongs to one process",
                        p.file, rank.comm, rank.rank, it->second));
      }
      // Ordered by index with each operation's line, so that one ended twice is named.
      std::vector<size_t> order(rank.ops.size());
      for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
      const auto& ops = rank.ops;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return ops[a].op.index < ops[b].op.index; });
      const auto& lines = f->end_line_numbers[r];
      for (size_t i = 1; i < order.size(); ++i) {
        if (ops[order[i]].op.index == ops[order[i - 1]].op.index) {
          throw usage_error(
              fmt::format("{}:{}: communicator {:016x} rank {} ended operation {} "
                          "again (first on line {})",
                          p.file, lines[order[i]], rank.comm, rank.rank, ops[order[i]].op.index,
                          lines[order[i - 1]]));
        }
      }
      // Put in that order in place (following each cycle of the permutation), and without
      // the growth slack: a second copy of the operations would double the report's peak.
      for (size_t i = 0; i < order.size(); ++i) {
        if (order[i] == i) continue;
        EndLine held = std::move(rank.ops[i]);
        size_t to = i;
        for (size_t from = order[to]; from != i; to = from, from = order[to]) {
          rank.ops[to] = std::move(rank.ops[from]);
          order[to] = to;
        }
        rank.ops[to] = std::move(held);
        order[to] = to;
      }
      rank.ops.shrink_to_fit();
    }
  }
}

Recording load_recording(const fs::path& dir, ReadLimits limits) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw usage_error(fmt::format("{}: {}; give a directory written by commtool record",
                                  dir.string(),
                                  fs::exists(dir, ec) ? "not a directory" : "no such directory"));
  }
  RecordingReader reader(dir, Retention::kAll, limits);
  reader.poll();
  reader.finish();
  Recording rec = reader.take();
  if (fs::exists(dir / kRecordingMetaFile, ec)) rec.meta = read_recording_meta(dir);
  return rec;
}

}  // namespace commtool::record
