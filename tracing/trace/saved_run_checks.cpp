#include "tracing/trace/saved_run_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "probes/base/error.hpp"
#include "tracing/collectives/collective_data.hpp"
#include "tracing/trace/record_io.hpp"

namespace commtool::tracing {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(const std::string& where, std::string_view field, std::string_view value,
                         std::string_view why) {
  throw usage_error(fmt::format("{}: {}: {}: {}", where, field, excerpt(value), why));
}

// A time or count from run.json: finite and not negative.
void not_negative(const std::string& where, const char* field, double v, const char* unit) {
  if (!std::isfinite(v) || v < 0) {
    refuse(where, fmt::format("\"{}\"", field), fmt::format("{}", v),
           fmt::format("{}; accepted: a finite number of {} of 0 or more",
                       std::isfinite(v) ? "is negative" : "is not a finite number", unit));
  }
}

void at_least(const std::string& where, const char* field, long long v, long long lo) {
  if (v < lo) {
    refuse(where, fmt::format("\"{}\"", field), std::to_string(v),
           fmt::format("is below {}; accepted: {} or more", lo, lo));
  }
}

bool has_mode(const RunMeta& m, CompletionMode mode) {
  return std::find(m.modes.begin(), m.modes.end(), mode) != m.modes.end();
}

std::string modes_list(const RunMeta& m) {
  std::string out;
  for (CompletionMode mode : m.modes)
    out += (out.empty() ? "" : ", ") + to_string(mode);
  return out;
}

// A size the run's collective, type and rank count can have: whole elements, split evenly over
// the ranks where the collective splits (trace_plan's effective sizes).
void check_sizes(const RunMeta& m, const std::string& file) {
  if (m.sizes.empty()) refuse(file, "\"meta\": \"sizes\"", "[]", "accepted: at least one size");
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    const uint64_t bytes = m.sizes[i];
    const BufferLayout l = buffer_layout(m.collective, m.dtype, bytes, m.nranks);
    const uint64_t whole = std::max(l.send_elements, l.recv_elements) * type_size(m.dtype);
    if (bytes > 0 && whole == bytes) continue;
    refuse(file, fmt::format("\"meta\": \"sizes\"[{}]", i), std::to_string(bytes),
           fmt::format("is not a size {} of {} at {} rank(s) can have; accepted: a positive whole "
                       "number of {}-byte elements{}",
                       to_string(m.collective), to_string(m.dtype), m.nranks, type_size(m.dtype),
                       whole > 0 ? fmt::format(", such as {}", whole) : ""));
  }
}

void check_meta(const RunMeta& m, const std::string& file) {
  const std::string where = file + ": \"meta\"";
  at_least(where, "nranks", m.nranks, 1);
  at_least(where, "iters", m.iters, 1);
  at_least(where, "warmup", m.warmup, 0);
  at_least(where, "poll_ms", m.poll_ms, 0);
  at_least(where, "scope_samples", m.scope_samples, 0);
  at_least(where, "batches", m.batches, 0);
  not_negative(where, "scope_sleep_ms", m.scope_sleep_ms, "milliseconds");
  if (m.root < 0 || m.root >= m.nranks) {
    refuse(where, "\"root\"", std::to_string(m.root),
           fmt::format("is not a rank of the run; accepted: 0 to {}", m.nranks - 1));
  }
  check_sizes(m, file);
}

void check_samples(const RankRun& r, const RunMeta& m, const std::string& rank_where) {
  std::unordered_set<uint64_t> seqs;
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const OperationSample& s = r.samples[i];
    const std::string where = fmt::format("{}: \"samples\"[{}]", rank_where, i);
    if (!seqs.insert(s.seq).second) {
      refuse(where, "\"seq\"", std::to_string(s.seq),
             "is sampled twice on this rank; accepted: each operation once");
    }
    if (std::find(m.sizes.begin(), m.sizes.end(), s.bytes) == m.sizes.end()) {
      refuse(where, "\"bytes\"", std::to_string(s.bytes),
             fmt::format("is not one of the run's sizes; accepted: {}", fmt::join(m.sizes, ", ")));
    }
    if (!has_mode(m, s.mode)) {
      refuse(where, "\"mode\"", to_string(s.mode),
             fmt::format("is not one of the run's modes; accepted: {}", modes_list(m)));
    }
    at_least(where, "poll_ms", s.poll_ms, 0);
    not_negative(where, "time_us", s.time_us, "microseconds");
    not_negative(where, "host_call_us", s.host_call_us, "microseconds");
  }
  for (size_t i = 0; i < r.batches.size(); ++i) {
    const BatchSample& s = r.batches[i];
    const std::string where = fmt::format("{}: \"batches\"[{}]", rank_where, i);
    if (std::find(m.sizes.begin(), m.sizes.end(), s.bytes) == m.sizes.end()) {
      refuse(where, "\"bytes\"", std::to_string(s.bytes),
             fmt::format("is not one of the run's sizes; accepted: {}", fmt::join(m.sizes, ", ")));
    }
    at_least(where, "ops", s.ops, 1);
    if (!(s.time_us > 0) || !std::isfinite(s.time_us)) {
      refuse(where, "\"time_us\"", fmt::format("{}", s.time_us),
             "is not a positive number; accepted: the batch's microseconds, above 0");
    }
  }
  seqs.clear();
  for (size_t i = 0; i < r.scope.size(); ++i) {
    const StreamScopeSample& s = r.scope[i];
    const std::string where = fmt::format("{}: \"scope\"[{}]", rank_where, i);
    if (!seqs.insert(s.seq).second) {
      refuse(where, "\"seq\"", std::to_string(s.seq),
             "is sampled twice on this rank; accepted: each operation once");
    }
    at_least(where, "poll_ms", s.poll_ms, 0);
    not_negative(where, "host_wait_us", s.host_wait_us, "microseconds");
    if (!std::isfinite(s.b_before_a_us)) {
      refuse(where, "\"b_before_a_us\"", fmt::format("{}", s.b_before_a_us),
             "is not a finite number; accepted: a finite number of microseconds");
    }
  }
}

}  // namespace

void check_run_values(const TraceRun& run, const std::string& file) {
  check_meta(run.meta, file);
  for (size_t i = 0; i < run.ranks.size(); ++i) {
    const RankRun& r = run.ranks[i];
    const std::string where = fmt::format("{}: \"ranks\"[{}]", file, i);
    at_least(where, "device", r.device, 0);
    check_samples(r, run.meta, where);
  }
}

void check_ranks(const TraceRun& run,
                 const std::vector<std::pair<std::string, long long>>& records_files,
                 const std::string& dir) {
  const int n = run.meta.nranks;
  std::set<int> listed;
  for (size_t i = 0; i < run.ranks.size(); ++i) {
    const int rank = run.ranks[i].rank;
    const std::string where = fmt::format("{}/run.json: \"ranks\"[{}]", dir, i);
    if (rank < 0 || rank >= n) {
      refuse(where, "\"rank\"", std::to_string(rank),
             fmt::format("is not a rank of the run (\"nranks\": {}); accepted: 0 to {}", n, n - 1));
    }
    if (!listed.insert(rank).second) {
      refuse(where, "\"rank\"", std::to_string(rank),
             "is listed twice; accepted: each rank of the run once");
    }
  }
  for (int rank = 0; rank < n; ++rank) {
    if (!listed.contains(rank)) {
      refuse(dir + "/run.json: \"ranks\"", "rank", std::to_string(rank),
             fmt::format("is missing: \"nranks\" is {} and the run's results for rank {} are not "
                         "there; accepted: one entry per rank, 0 to {}",
                         n, rank, n - 1));
    }
  }
  for (const auto& [path, rank] : records_files) {
    if (rank < 0 || rank >= n) {
      const std::string name = fs::path(path).filename().string();
      refuse(path, "rank", name.substr(12, name.size() - 16),
             fmt::format("is not a rank of this run (\"nranks\": {}); accepted: records files of "
                         "ranks 0 to {} only (a file from another run?)",
                         n, n - 1));
    }
  }
}

std::string check_rank_records(const RankRun& rank, const RunMeta& meta, std::string_view text,
                               const std::string& file, size_t cut_line) {
  std::string warning;
  if (cut_line > 0) {
    warning = fmt::format(
        "{}:{}: the last record is cut off (the file ends inside that line: a run killed while "
        "writing it?); analysed without it",
        file, cut_line);
  }
  if (!meta.cupti) return warning;
  std::unordered_set<uint64_t> traced;
  size_t traced_count = 0;
  for (const OperationSample& s : rank.samples) {
    if (s.traced) traced_count += traced.insert(s.seq).second ? 1 : 0;
  }
  std::unordered_set<uint64_t> marked;
  for (size_t i = 0; i < rank.records.operations.size(); ++i) {
    const uint64_t seq = rank.records.operations[i].seq;
    if (!traced.contains(seq)) {
      throw usage_error(fmt::format(
          "{}:{}: operation seq: {} is not a traced operation of rank {} in run.json; accepted: "
          "the seq of one of the rank's traced samples",
          file, record_line(text, "o", i), seq, rank.rank));
    }
    marked.insert(seq);
  }
  const size_t missing = traced_count - marked.size();
  if (missing == 0) return warning;
  if (cut_line > 0) {
    return warning + fmt::format(
                         "; {} of the {} traced operations of rank {} have no operation "
                         "record there and are left out of the completion split",
                         missing, traced_count, rank.rank);
  }
  uint64_t first = UINT64_MAX;
  for (uint64_t seq : traced) {
    if (!marked.contains(seq)) first = std::min(first, seq);
  }
  throw usage_error(fmt::format(
      "{}: operation seq {}: missing, with {} more: run.json has {} traced operations of rank "
      "{} and this file marks {}; the file is incomplete (cut short?); accepted: one operation "
      "record per traced sample",
      file, first, missing - 1, traced_count, rank.rank, marked.size()));
}

}  // namespace commtool::tracing
