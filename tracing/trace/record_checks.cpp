// Duplicated records (record_io.hpp, check_unique_records): a records file joined or copied
// twice would count every operation twice, and a median over doubled samples looks like any
// other. Found in one pass per kind through a hash table of record numbers; the lines are looked
// up again only to name them in the error.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <optional>
#include <utility>
#include <vector>

#include "probes/base/error.hpp"
#include "tracing/trace/record_io.hpp"

namespace commtool::tracing {

namespace {

template <size_t N>
using Key = std::array<uint64_t, N>;

template <size_t N>
uint64_t hash_of(const Key<N>& k) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t v : k) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}

// The first record (by number) whose key an earlier record has: (earlier, later).
template <class KeyOf>
std::optional<std::pair<size_t, size_t>> find_duplicate(size_t n, KeyOf key_of) {
  if (n < 2) return std::nullopt;
  const size_t slots = std::bit_ceil(2 * n);
  std::vector<uint32_t> slot(slots, 0);  // record number + 1; 0: empty
  for (size_t i = 0; i < n; ++i) {
    const auto key = key_of(i);
    for (size_t h = hash_of(key) & (slots - 1);; h = (h + 1) & (slots - 1)) {
      if (slot[h] == 0) {
        slot[h] = static_cast<uint32_t>(i + 1);
        break;
      }
      if (key_of(slot[h] - 1) == key) return std::pair<size_t, size_t>(slot[h] - 1, i);
    }
  }
  return std::nullopt;
}

}  // namespace

size_t record_line(std::string_view text, std::string_view tags, size_t index) {
  size_t line = 1;
  for (size_t at = 0; at < text.size(); ++line) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    const bool one_letter = at + 1 == nl || text[at + 1] == ' ' || text[at + 1] == '\r';
    if (line > 1 && at < nl && one_letter && tags.find(text[at]) != std::string_view::npos &&
        index-- == 0) {
      return line;
    }
    at = nl + 1;
  }
  return 0;
}

namespace {

struct Check {
  std::string_view text;
  const std::string& source;

  // kind: the record's name in errors; field and value: what identifies it.
  template <class KeyOf, class Describe>
  void unique(size_t n, std::string_view tags, const char* kind, KeyOf key_of,
              Describe describe) const {
    std::optional<std::pair<size_t, size_t>> dup = find_duplicate(n, key_of);
    if (!dup) return;
    throw usage_error(fmt::format(
        "{}:{}: {} {}: the same record as line {}; each record appears once (a file joined "
        "or copied twice?)",
        source, record_line(text, tags, dup->second), kind, describe(dup->second),
        record_line(text, tags, dup->first)));
  }
};

}  // namespace

void check_unique_records(const RecordSet& r, std::string_view text, const std::string& source) {
  const Check c{text, source};
  c.unique(
      r.operations.size(), "o", "operation", [&](size_t i) { return Key<1>{r.operations[i].seq}; },
      [&](size_t i) { return fmt::format("seq {}", r.operations[i].seq); });
  c.unique(
      r.api.size(), "a", "api",
      [&](size_t i) {
        const ApiCall& a = r.api[i];
        return Key<2>{uint64_t{a.correlation} << 32 | a.thread, a.start_ns};
      },
      [&](size_t i) {
        return fmt::format("correlation {} (start_ns {})", r.api[i].correlation, r.api[i].start_ns);
      });
  c.unique(
      r.gpu.size(), "kms", "GPU work",
      [&](size_t i) {
        const GpuWork& w = r.gpu[i];
        return Key<3>{uint64_t{w.stream} << 32 | w.correlation, w.start_ns,
                      static_cast<uint64_t>(w.kind)};
      },
      [&](size_t i) {
        return fmt::format("correlation {} (stream {}, start_ns {})", r.gpu[i].correlation,
                           r.gpu[i].stream, r.gpu[i].start_ns);
      });
  c.unique(
      r.stream_waits.size(), "w", "stream-wait",
      [&](size_t i) {
        const StreamWaitCall& w = r.stream_waits[i];
        return Key<2>{uint64_t{w.stream} << 32 | w.event, w.start_ns};
      },
      [&](size_t i) {
        const StreamWaitCall& w = r.stream_waits[i];
        return fmt::format("start_ns {} (stream {}, event {})", w.start_ns, w.stream, w.event);
      });
  c.unique(
      r.events.size(), "e", "event",
      [&](size_t i) {
        const EventCompletion& e = r.events[i];
        return Key<2>{uint64_t{e.event} << 32 | e.stream, e.device_ns};
      },
      [&](size_t i) {
        const EventCompletion& e = r.events[i];
        return fmt::format("device_ns {} (event {}, stream {})", e.device_ns, e.event, e.stream);
      });
  c.unique(
      r.ranges.size(), "r", "range",
      [&](size_t i) {
        const HostRange& h = r.ranges[i];
        return Key<3>{h.thread, h.start_ns, h.end_ns};
      },
      [&](size_t i) {
        const HostRange& h = r.ranges[i];
        return fmt::format("start_ns {} (thread {}, end_ns {})", h.start_ns, h.thread, h.end_ns);
      });
}

}  // namespace commtool::tracing
