#include "tracing/profiler/cupti_anchors.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace commtool::nccl_profiler {

bool is_nccl_kernel_name(const char* name) {
  if (name == nullptr) return false;
  // An Itanium-mangled function: "_Z", the length of its name, the name.
  if (name[0] == '_' && name[1] == 'Z') {
    name += 2;
    if (!std::isdigit(static_cast<unsigned char>(*name))) return false;
    while (std::isdigit(static_cast<unsigned char>(*name)))
      ++name;
  }
  return std::strncmp(name, "nccl", 4) == 0;
}

void WorkAnchors::write(Seen& s) {
  if (s.written) return;
  s.written = true;
  emit_(s.line);
}

WorkAnchors::Seen* WorkAnchors::before(Stream& st, uint32_t correlation) {
  Seen* best = nullptr;
  for (Seen& s : st.history) {
    if (s.line.correlation < correlation &&
        (best == nullptr || s.line.correlation > best->line.correlation)) {
      best = &s;
    }
  }
  return best;
}

WorkAnchors::Seen* WorkAnchors::after(Stream& st, uint32_t correlation) {
  Seen* best = nullptr;
  for (Seen& s : st.history) {
    if (s.line.correlation > correlation &&
        (best == nullptr || s.line.correlation < best->line.correlation)) {
      best = &s;
    }
  }
  return best;
}

WorkAnchors::Stream& WorkAnchors::stream(const StreamId& id) {
  // A job that makes streams without end would grow this map; past the bound the oldest
  // streams' state is let go (their pending marks lose their anchors, nothing else).
  if (streams_.size() >= kMaxStreams && !streams_.contains(id)) streams_.clear();
  return streams_[id];
}

void WorkAnchors::work(const WorkLine& w) {
  Stream& st = stream(w.stream);
  st.history.push_back(Seen{w});
  Seen& self = st.history.back();
  if (w.nccl) write(self);
  // Marks queued before this work: it may be the work after them, and the kept work queued
  // last before each mark is the work before it. Both are written; the marks stay pending
  // until their "after" is certain, which is when this work is the first after them that has
  // arrived (a stream's works arrive in queue order, so no earlier one can still come).
  std::erase_if(st.pending, [&](uint32_t m) {
    if (m >= w.correlation) return false;
    if (Seen* b = before(st, m)) write(*b);
    if (Seen* a = after(st, m)) write(*a);
    return true;
  });
  if (st.history.size() > kHistory) st.history.pop_front();
}

void WorkAnchors::mark(const StreamId& id, uint32_t correlation) {
  Stream& st = stream(id);
  if (Seen* b = before(st, correlation)) write(*b);
  if (Seen* a = after(st, correlation)) {
    write(*a);  // the work after it arrived first; what is kept before it is all there is
    return;
  }
  st.pending.push_back(correlation);
  if (st.pending.size() > kMaxPendingMarks) st.pending.pop_front();
}

void WorkAnchors::finish() {
  for (auto& [id, st] : streams_) {
    for (uint32_t m : st.pending) {
      if (Seen* b = before(st, m)) write(*b);
    }
    st.pending.clear();
  }
}

}  // namespace commtool::nccl_profiler
