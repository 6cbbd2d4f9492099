#include "tracing/trace/attribution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>
#include <unordered_map>

namespace commtool::tracing {

namespace {

double us(uint64_t from, uint64_t to) {
  return to > from ? static_cast<double>(to - from) / 1e3 : 0.0;
}

// Records of one kind grouped by a key (a stream, a thread, an event id), each group in time
// order (Entry::at). A group is one hash lookup away and is searched by bisection, so an
// operation costs O(log n) however long the run: `commtool report` must re-analyse millions of
// records per second, and a scan of the whole group per operation made a long run quadratic.
// Groups are filled with a counting pass, not a sort, and a group is sorted only when its
// records did not arrive in time order (CUPTI delivers them nearly so).
template <class Entry>
class Groups {
 public:
  template <class Record, class KeyOf, class EntryOf>
  Groups(const std::vector<Record>& records, KeyOf key_of, EntryOf entry_of) {
    std::vector<uint32_t> group_of(records.size());
    std::vector<size_t> count;
    uint64_t last_key = 0;
    uint32_t last_group = UINT32_MAX;
    for (size_t i = 0; i < records.size(); ++i) {
      uint64_t key = key_of(records[i]);
      if (last_group == UINT32_MAX || key != last_key) {  // runs of one key skip the hash
        auto [it, added] = group_.try_emplace(key, static_cast<uint32_t>(count.size()));
        if (added) count.push_back(0);
        last_key = key;
        last_group = it->second;
      }
      group_of[i] = last_group;
      ++count[last_group];
    }
    begin_.assign(count.size() + 1, 0);
    for (size_t g = 0; g < count.size(); ++g)
      begin_[g + 1] = begin_[g] + count[g];
    std::vector<size_t> cursor(begin_.begin(), begin_.end() - 1);
    entries_.resize(records.size());
    for (size_t i = 0; i < records.size(); ++i)
      entries_[cursor[group_of[i]]++] = entry_of(records[i], i);
    auto earlier = [](const Entry& a, const Entry& b) { return a.at < b.at; };
    for (size_t g = 0; g < count.size(); ++g) {
      auto first = entries_.begin() + begin_[g], last = entries_.begin() + begin_[g + 1];
      if (!std::is_sorted(first, last, earlier)) std::stable_sort(first, last, earlier);
    }
  }

  std::span<const Entry> find(uint64_t key) const {
    auto it = group_.find(key);
    if (it == group_.end()) return {};
    return {entries_.data() + begin_[it->second], entries_.data() + begin_[it->second + 1]};
  }
  // Every group, in order, for a pass that needs its neighbours (a running maximum).
  template <class Fn>
  void for_each_group(Fn fn) {
    for (size_t g = 0; g + 1 < begin_.size(); ++g)
      fn(std::span<Entry>(entries_.data() + begin_[g], entries_.data() + begin_[g + 1]));
  }

 private:
  std::unordered_map<uint64_t, uint32_t> group_;  // key -> group number
  std::vector<size_t> begin_;                     // group g is [begin_[g], begin_[g + 1])
  std::vector<Entry> entries_;
};

// First entry of a time-ordered group at or after t.
template <class Entry>
const Entry* first_at_or_after(std::span<const Entry> group, uint64_t t) {
  auto it =
      std::partition_point(group.begin(), group.end(), [t](const Entry& e) { return e.at < t; });
  return it == group.end() ? nullptr : &*it;
}

struct WorkOnStream {
  uint64_t at;          // start
  uint64_t busy_until;  // the latest end of this and every earlier-starting work on the stream
};
struct Call {
  uint64_t at;  // start
  uint32_t correlation;
  uint32_t thread;
};
struct Completion {
  uint64_t at;  // device time
};
struct WaitCall {
  uint64_t at;  // host start
  uint64_t end_ns;
  size_t order;  // position in the record set: the first match in record order wins
};
struct WorkOfCall {
  uint32_t correlation;
  uint32_t stream;
  uint64_t start_ns;
  uint64_t end_ns;
};

// GPU work by the correlation id of the API call that queued it. CUPTI numbers every API call
// from one counter, so the ids of a run are dense: a table indexed by id finds a call's work in
// O(1), where a binary search per call cost half of attribution. Ids too sparse for a table
// (more than two per record) fall back to a sorted list.
class WorkByCall {
 public:
  WorkByCall(const std::vector<GpuWork>& gpu, size_t api_calls) {
    works_.reserve(gpu.size());
    for (const GpuWork& w : gpu)
      works_.push_back({w.correlation, w.stream, w.start_ns, w.end_ns});
    if (works_.empty()) return;
    auto [lo, hi] = std::minmax_element(works_.begin(), works_.end(), by_id);
    uint64_t ids = uint64_t{hi->correlation} - lo->correlation + 1;
    if (ids <= 2 * (api_calls + gpu.size()) + 1024) {
      build_table(lo->correlation, static_cast<size_t>(ids));
    } else if (!std::is_sorted(works_.begin(), works_.end(), by_id)) {
      std::sort(works_.begin(), works_.end(), by_id);
    }
  }

  std::span<const WorkOfCall> find(uint32_t correlation) const {
    if (!first_.empty()) {
      if (correlation < base_ || correlation - base_ + 1 >= first_.size()) return {};
      size_t i = correlation - base_;
      return {works_.data() + first_[i], works_.data() + first_[i + 1]};
    }
    auto first = std::partition_point(works_.begin(), works_.end(), [&](const WorkOfCall& w) {
      return w.correlation < correlation;
    });
    auto last = std::partition_point(
        first, works_.end(), [&](const WorkOfCall& w) { return w.correlation == correlation; });
    return {first, last};
  }

 private:
  static bool by_id(const WorkOfCall& a, const WorkOfCall& b) {
    return a.correlation < b.correlation;
  }
  // A counting sort by id; first_[i] .. first_[i + 1] is then the work of id base_ + i.
  void build_table(uint32_t base, size_t ids) {
    base_ = base;
    first_.assign(ids + 1, 0);
    for (const WorkOfCall& w : works_)
      ++first_[w.correlation - base + 1];
    for (size_t i = 1; i <= ids; ++i)
      first_[i] += first_[i - 1];
    std::vector<WorkOfCall> sorted(works_.size());
    for (const WorkOfCall& w : works_)
      sorted[first_[w.correlation - base]++] = w;  // first_[i] ends as the start of i + 1
    std::copy_backward(first_.begin(), first_.end() - 1, first_.end());
    first_[0] = 0;
    works_.swap(sorted);
  }

  std::vector<WorkOfCall> works_;
  uint32_t base_ = 0;
  std::vector<uint32_t> first_;  // empty: works_ is sorted by id and searched
};

uint64_t pair_key(uint32_t high, uint32_t low) {
  return uint64_t{high} << 32 | low;
}

// Indexes built once per run, so attribution is O(n log n) in the records (and near linear when
// they arrive in time order).
struct Index {
  WorkByCall by_correlation;
  Groups<WorkOnStream> by_stream;
  Groups<Call> api_by_time;  // one group: every thread's calls
  Groups<WaitCall> waits;    // by (stream, event)
  Groups<Completion> events;

  explicit Index(const RecordSet& r)
      : by_correlation(r.gpu, r.api.size()),
        by_stream(
            r.gpu, [](const GpuWork& w) { return w.stream; },
            [](const GpuWork& w, size_t) {
              return WorkOnStream{w.start_ns, w.end_ns};
            }),
        api_by_time(
            r.api, [](const ApiCall&) { return 0; },
            [](const ApiCall& a, size_t) {
              return Call{a.start_ns, a.correlation, a.thread};
            }),
        waits(
            r.stream_waits, [](const StreamWaitCall& w) { return pair_key(w.stream, w.event); },
            [](const StreamWaitCall& w, size_t i) {
              return WaitCall{w.start_ns, w.end_ns, i};
            }),
        events(
            r.events, [](const EventCompletion& e) { return e.event; },
            [](const EventCompletion& e, size_t) { return Completion{e.device_ns}; }) {
    by_stream.for_each_group([](std::span<WorkOnStream> works) {
      for (size_t i = 1; i < works.size(); ++i)
        works[i].busy_until = std::max(works[i].busy_until, works[i - 1].busy_until);
    });
  }

  // An event is re-recorded every iteration under one id: these pick the completion that
  // belongs to the operation by where it must fall.
  std::optional<uint64_t> event_last_at_or_before(uint32_t id, uint64_t t) const {
    std::span<const Completion> all = events.find(id);
    auto it = std::partition_point(all.begin(), all.end(),
                                   [t](const Completion& e) { return e.at <= t; });
    if (it == all.begin()) return std::nullopt;
    return (it - 1)->at;
  }
  std::optional<uint64_t> event_first_at_or_after(uint32_t id, uint64_t t) const {
    const Completion* e = first_at_or_after(events.find(id), t);
    return e ? std::optional(e->at) : std::nullopt;
  }

  // The end of the stream-wait call for (stream, event) issued in [from, to] on the host; of
  // several, the first in record order.
  std::optional<uint64_t> wait_between(uint32_t stream, uint32_t event, uint64_t from,
                                       uint64_t to) const {
    std::span<const WaitCall> all = waits.find(pair_key(stream, event));
    auto w = std::partition_point(all.begin(), all.end(),
                                  [from](const WaitCall& c) { return c.at < from; });
    const WaitCall* found = nullptr;
    for (; w != all.end() && w->at <= to; ++w) {
      if (!found || w->order < found->order) found = &*w;
    }
    return found ? std::optional(found->end_ns) : std::nullopt;
  }

  // When `stream` became free for new work at or after `t`: the end of the last GPU work on it
  // that started before t.
  uint64_t stream_free_at(uint32_t stream, uint64_t t) const {
    std::span<const WorkOnStream> all = by_stream.find(stream);
    auto it = std::partition_point(all.begin(), all.end(),
                                   [t](const WorkOnStream& w) { return w.at < t; });
    return it == all.begin() ? t : std::max(t, (it - 1)->busy_until);
  }

  std::optional<uint64_t> first_work_after(uint32_t stream, uint64_t t) const {
    const WorkOnStream* w = first_at_or_after(by_stream.find(stream), t);
    return w ? std::optional(w->at) : std::nullopt;
  }
};

void attribute_one(const Index& ix, const OperationMark& op, OperationIntervals& out,
                   std::vector<std::string>& warnings) {
  out.seq = op.seq;
  out.host_enqueue_us = us(op.enqueue_start_ns, op.enqueue_end_ns);
  out.host_wait_us = us(op.wait_start_ns, op.wait_end_ns);
  out.host_wait_polls = op.wait_polls;
  auto missing = [&](const char* what) {
    warnings.push_back(fmt::format("operation {}: {}", op.seq, what));
  };

  // The collective's GPU work: everything queued on the NCCL stream by the API calls made
  // during the enqueue (kernels; on one rank NCCL only copies). On any thread: a non-blocking
  // communicator's ncclGroupEnd launches from a thread of NCCL's own, and the harness's streams
  // are used by nothing else.
  uint64_t first = UINT64_MAX, last = 0;
  std::span<const Call> calls = ix.api_by_time.find(0);
  auto call = std::partition_point(calls.begin(), calls.end(),
                                   [&](const Call& c) { return c.at < op.enqueue_start_ns; });
  for (; call != calls.end() && call->at <= op.enqueue_end_ns; ++call) {
    for (const WorkOfCall& w : ix.by_correlation.find(call->correlation)) {
      if (w.stream != op.nccl_stream) continue;
      first = std::min(first, w.start_ns);
      last = std::max(last, w.end_ns);
      ++out.gpu_work_count;
      if (call->thread != op.thread) out.launched_by_other_thread = true;
    }
  }
  if (out.gpu_work_count > 0) {
    out.kernel_us = us(first, last);
    out.kernel_start_ns = first;
  } else {
    missing("no GPU work found on the NCCL stream (kernel or copy records missing)");
  }

  // The input was ready when its event completed; NCCL's work cannot start before that.
  std::optional<uint64_t> input = ix.event_last_at_or_before(
      op.input_ready_event, out.gpu_work_count > 0 ? first : op.wait_end_ns);
  std::optional<uint64_t> nccl_wait_end =
      ix.wait_between(op.nccl_stream, op.input_ready_event, op.enqueue_start_ns, op.enqueue_end_ns);
  if (input && nccl_wait_end) {
    uint64_t idle_from = ix.stream_free_at(op.nccl_stream, *nccl_wait_end);
    out.input_wait_us = us(idle_from, *input);
  } else {
    missing(input ? "no stream-wait record for the input-ready event"
                  : "no device timestamp for the input-ready event");
  }

  // The end event completes after the collective's last GPU work.
  std::optional<uint64_t> end =
      ix.event_first_at_or_after(op.end_event, out.gpu_work_count > 0 ? last : op.enqueue_start_ns);
  if (!end) {
    missing("no device timestamp for the end event");
    return;
  }
  if (std::optional<uint64_t> consumer_wait_end =
          ix.wait_between(op.consumer_stream, op.end_event, op.enqueue_start_ns, op.wait_end_ns)) {
    uint64_t idle_from = ix.stream_free_at(op.consumer_stream, *consumer_wait_end);
    out.exposed_wait_us = us(idle_from, *end);
  }
  out.complete_at_wait_return =
      op.complete_at_wait_return >= 0 ? op.complete_at_wait_return == 1 : *end <= op.wait_end_ns;
  std::optional<uint64_t> next = ix.first_work_after(op.consumer_stream, *end);
  if (input && next) out.stream_dependency_us = us(*input, *next);
}

}  // namespace

Attribution attribute(const RecordSet& records) {
  Attribution a;
  if (records.dropped_records > 0) {
    a.warnings.push_back(
        fmt::format("CUPTI dropped {} activity records: intervals may be missing or short",
                    records.dropped_records));
  }
  Index ix(records);
  std::vector<const OperationMark*> ops;
  ops.reserve(records.operations.size());
  for (const OperationMark& op : records.operations)
    ops.push_back(&op);
  auto by_seq = [](auto* x, auto* y) { return x->seq < y->seq; };
  if (!std::is_sorted(ops.begin(), ops.end(), by_seq)) {
    std::stable_sort(ops.begin(), ops.end(), by_seq);
  }
  a.operations.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    attribute_one(ix, *ops[i], a.operations[i], a.warnings);
  return a;
}

std::optional<StartLags> start_lags(const std::vector<std::optional<uint64_t>>& start_ns) {
  uint64_t first = UINT64_MAX, last = 0;
  for (const auto& s : start_ns) {
    if (!s) continue;
    first = std::min(first, *s);
    last = std::max(last, *s);
  }
  if (first == UINT64_MAX) return std::nullopt;
  StartLags out;
  out.spread_us = static_cast<double>(last - first) / 1e3;
  for (const auto& s : start_ns) {
    out.lag_us.push_back(s ? std::optional<double>(static_cast<double>(*s - first) / 1e3)
                           : std::nullopt);
  }
  return out;
}

}  // namespace commtool::tracing
