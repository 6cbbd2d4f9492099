// The CUPTI split of a recording's operations (record_split.hpp).
#include "reports/record/record_split.hpp"

#include <algorithm>
#include <limits>

namespace commtool::reports {

namespace {

using nccl_profiler::EventLine;
using nccl_profiler::Interval;
using nccl_profiler::StreamId;
using nccl_profiler::WaitLine;
using nccl_profiler::WorkLine;

// How far back of() looks among kernels that start before an operation ends: kernels of other
// communicators' streams may start in between.
constexpr size_t kMatchLookBack = 64;

template <class Line>
bool by_correlation(const Line& a, const Line& b) {
  return a.correlation < b.correlation;
}

// The line of `lines` (sorted by correlation) queued last before `correlation`.
template <class Line>
const Line* last_before(const std::vector<Line>& lines, uint32_t correlation) {
  auto it = std::lower_bound(lines.begin(), lines.end(), correlation,
                             [](const Line& l, uint32_t c) { return l.correlation < c; });
  return it == lines.begin() ? nullptr : &*std::prev(it);
}

// The line of `lines` (sorted by correlation) queued first after `correlation`.
template <class Line>
const Line* first_after(const std::vector<Line>& lines, uint32_t correlation) {
  auto it = std::upper_bound(lines.begin(), lines.end(), correlation,
                             [](uint32_t c, const Line& l) { return c < l.correlation; });
  return it == lines.end() ? nullptr : &*it;
}

int64_t overlap(const Interval& a, const Interval& b) {
  return std::min(a.end_ns, b.end_ns) - std::max(a.start_ns, b.start_ns);
}

}  // namespace

std::vector<WaitOutcome> resolve_waits(const record::CuptiActivity& a) {
  std::map<StreamId, std::vector<WorkLine>> work;
  for (const WorkLine& w : a.work)
    work[w.stream].push_back(w);
  for (auto& [stream, lines] : work)
    std::sort(lines.begin(), lines.end(), by_correlation<WorkLine>);
  std::map<uint32_t, std::vector<EventLine>> records;  // by event id
  for (const EventLine& e : a.events)
    records[e.event].push_back(e);
  for (auto& [event, lines] : records)
    std::sort(lines.begin(), lines.end(), by_correlation<EventLine>);
  static const std::vector<WorkLine> kNone;
  auto work_on = [&](const StreamId& s) -> const std::vector<WorkLine>& {
    auto it = work.find(s);
    return it == work.end() ? kNone : it->second;
  };

  std::vector<WaitOutcome> out;
  for (const WaitLine& w : a.waits) {
    auto rec = records.find(w.event);
    if (rec == records.end()) continue;
    const EventLine* record = last_before(rec->second, w.correlation);
    if (record == nullptr) continue;  // recorded before the recording began, or never
    WaitOutcome o;
    o.wait = w;
    const WorkLine* producer = last_before(work_on(record->stream), record->correlation);
    const WorkLine* before = last_before(work_on(w.stream), w.correlation);
    const WorkLine* after = first_after(work_on(w.stream), w.correlation);
    if (producer != nullptr) o.producer = *producer;
    if (after != nullptr) o.after = *after;
    if (producer != nullptr) {
      const int64_t reached = std::max(before != nullptr ? before->gpu.end_ns : w.t_ns, w.t_ns);
      const int64_t released = after != nullptr
                                   ? std::min(producer->gpu.end_ns, after->gpu.start_ns)
                                   : producer->gpu.end_ns;
      o.waited_ns = std::max<int64_t>(0, released - reached);
    }
    out.push_back(o);
  }
  return out;
}

CuptiSplit::CuptiSplit(const record::CuptiActivity& a) {
  std::map<std::pair<StreamId, uint32_t>, size_t> index;  // (stream, correlation) -> kernel
  std::vector<WorkLine> nccl;
  for (const WorkLine& w : a.work)
    if (w.nccl) nccl.push_back(w);
  std::sort(nccl.begin(), nccl.end(),
            [](const WorkLine& x, const WorkLine& y) { return x.gpu.start_ns < y.gpu.start_ns; });
  for (const WorkLine& w : nccl) {
    // A kernel written twice (an anchor and NCCL's own) is one kernel.
    if (!index.try_emplace({w.stream, w.correlation}, kernels_.size()).second) continue;
    kernels_.push_back(Kernel{w.gpu});
  }
  for (const WaitOutcome& o : resolve_waits(a)) {
    if (o.after && o.after->nccl) {
      if (auto it = index.find({o.after->stream, o.after->correlation}); it != index.end()) {
        kernels_[it->second].input_wait_ns += o.waited_ns;
      }
    }
    if (o.producer && o.producer->nccl && !(o.producer->stream == o.wait.stream)) {
      if (auto it = index.find({o.producer->stream, o.producer->correlation}); it != index.end()) {
        kernels_[it->second].exposed_wait_ns += o.waited_ns;
        ++kernels_[it->second].exposed_waits;
      }
    }
  }
}

std::optional<OperationSplit> CuptiSplit::of(const Interval& gpu) const {
  auto end = std::upper_bound(kernels_.begin(), kernels_.end(), gpu.end_ns + kMatchSlackNs,
                              [](int64_t t, const Kernel& k) { return t < k.gpu.start_ns; });
  const Kernel* best = nullptr;
  int64_t best_overlap = std::numeric_limits<int64_t>::min();
  size_t looked = 0;
  for (auto it = end; it != kernels_.begin() && looked < kMatchLookBack; ++looked) {
    --it;
    const int64_t o = overlap(it->gpu, gpu);
    if (o >= -kMatchSlackNs && o > best_overlap) {
      best = &*it;
      best_overlap = o;
    }
  }
  if (best == nullptr) return std::nullopt;
  return OperationSplit{best->gpu, best->input_wait_ns, best->exposed_wait_ns, best->exposed_waits};
}

}  // namespace commtool::reports
