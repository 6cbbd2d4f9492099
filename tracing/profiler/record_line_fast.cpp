// parse_line's fast reader (record_line.hpp, detail::parse_line_fast): the plugin's own lines
// without a JSON document. The slow reader, which decides everything else, is record_line.cpp's.
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "tracing/profiler/record_line.hpp"
#include "tracing/profiler/record_line_keys.hpp"

namespace commtool::nccl_profiler {

namespace {

using namespace fast_reader;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxUint32 = std::numeric_limits<uint32_t>::max();

// Building an nlohmann document per line (a std::map, a std::string per key) is most of what
// `commtool report` spends on a recording. The plugin writes one fixed shape (record_line.cpp's
// LineWriter), so this scanner reads that shape only and gives up (std::nullopt) at the first
// byte it does not expect; the slow reader then decides, so what is accepted and every error
// stay its own.
// Giving up is always safe; accepting is only allowed where the slow reader returns the same
// value, which tests/test_record_line_fast_reader.cpp and tests/fuzz/fuzz_record_lines.cpp
// check.

// Every value of any kind, as read so far; which ones are set is the caller's mask.
struct ScannedValues {
  int64_t pid = 0, realtime = 0, mono = 0, t = 0, since = 0;
  int version = 0, rank = 0, nranks = 0, nodes = 0, peer = 0, root = 0, ch = 0, warps = 0, kch = 0;
  uint64_t comm = 0, index = 0, count = 0, lines = 0;
  std::optional<uint64_t> seq;
  std::string_view host, nccl, name, func, dtype, algo, proto, dev;
  OpKind kind = OpKind::kCollective;
  std::optional<Interval> api, gpu, seen;
  Interval enq;
  bool complete = false, graph = false;
  // work, wait and event lines ("nccl" is a boolean there, a string in proc lines)
  bool work_line = false, nccl_kernel = false;
  int64_t ctx = 0, stream = 0, correlation = 0, event = 0;
};

// The bytes Scanner::string takes inside a string: printable ASCII but '"' and '\\'.
constexpr std::array<bool, 256> kPlainStringByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c)
    plain[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return plain;
}();

// Each reader consumes one value at p_ and returns false, leaving p_ anywhere, where the text is
// not that value in the plugin's form or the value is out of the slow reader's range.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool at_end() const { return p_ == end_; }

  // `"name":` of `key`, where 16 bytes are left to compare at once; false leaves p_ as it was.
  bool take_key(Key key) {
    if constexpr (std::endian::native != std::endian::little) return false;
    if (end_ - p_ < 16) return false;
    const KeyPattern& k = kKeyPatterns[static_cast<size_t>(key)];
    uint64_t low = 0;
    uint64_t high = 0;
    std::memcpy(&low, p_, 8);
    std::memcpy(&high, p_ + 8, 8);
    if ((((low ^ k.low) & k.low_mask) | ((high ^ k.high) & k.high_mask)) != 0) return false;
    p_ += k.size;
    return true;
  }

  bool take(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  template <size_t N>
  bool take(const char (&literal)[N]) {
    if (static_cast<size_t>(end_ - p_) < N - 1 || std::memcmp(p_, literal, N - 1) != 0) {
      return false;
    }
    p_ += N - 1;
    return true;
  }

  // Printable ASCII without '"' or '\\': nlohmann then reads the same bytes (escapes, control
  // characters and UTF-8, which it checks, are the slow reader's).
  bool string(std::string_view& out) {
    if (!take('"')) return false;
    const char* start = p_;
    while (p_ != end_ && kPlainStringByte[static_cast<unsigned char>(*p_)])
      ++p_;
    if (p_ == end_ || *p_ != '"') return false;
    out = std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
    return true;
  }

  // An integer as JSON writes it: '-'? then 0 or a digit 1-9 and more digits; its magnitude must
  // fit in uint64_t (nlohmann reads a larger one as a double, which the slow reader refuses).
  // "-0" is left to the slow reader (nlohmann: a signed 0). What follows is the caller's: a '.'
  // or an 'e' there is no ',', '}' or ']'.
  bool number(bool& negative, uint64_t& magnitude) {
    negative = take('-');
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0') {
      ++p_;
      magnitude = 0;
      return !negative;
    }
    uint64_t value = 0;
    for (unsigned digit; p_ != end_ && (digit = static_cast<unsigned>(*p_ - '0')) < 10; ++p_) {
      if (__builtin_mul_overflow(value, 10u, &value) ||
          __builtin_add_overflow(value, digit, &value)) {
        return false;
      }
    }
    magnitude = value;
    return true;
  }

  // Fields::integer: an integer from lowest to highest.
  bool integer(int64_t lowest, int64_t highest, int64_t& out) {
    bool negative = false;
    uint64_t magnitude = 0;
    if (!number(negative, magnitude)) return false;
    if (magnitude > static_cast<uint64_t>(kMaxInt64)) return false;
    const int64_t value =
        negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    if (value < lowest || value > highest) return false;
    out = value;
    return true;
  }

  // Fields::integer32
  bool integer32(int lowest, int& out) {
    int64_t value = 0;
    if (!integer(lowest, kMaxInt, value)) return false;
    out = static_cast<int>(value);
    return true;
  }

  // Fields::count: an integer from 0 to 2^64-1.
  bool count(uint64_t& out) {
    bool negative = false;
    return number(negative, out) && !negative;
  }

  // Fields::optional_count
  bool optional_count(std::optional<uint64_t>& out) {
    if (take("null")) {
      out.reset();
      return true;
    }
    uint64_t value = 0;
    if (!count(value)) return false;
    out = value;
    return true;
  }

  // Fields::comm_id: 16 lowercase hexadecimal digits in a string.
  bool comm_id(uint64_t& out) {
    std::string_view text;
    if (!string(text) || text.size() != 16) return false;
    uint64_t id = 0;
    for (char c : text) {
      uint64_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<uint64_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<uint64_t>(c - 'a' + 10);
      } else {
        return false;
      }
      id = (id << 4) | digit;
    }
    out = id;
    return true;
  }

  // Fields::interval: [start,end], both from 0 to INT64_MAX, end not before start.
  bool interval(Interval& out) {
    Interval value;
    if (!take('[') || !integer(0, kMaxInt64, value.start_ns) || !take(',') ||
        !integer(0, kMaxInt64, value.end_ns) || !take(']') || value.end_ns < value.start_ns) {
      return false;
    }
    out = value;
    return true;
  }

  // Fields::optional_interval
  bool optional_interval(std::optional<Interval>& out) {
    if (take("null")) {
      out.reset();
      return true;
    }
    Interval value;
    if (!interval(value)) return false;
    out = value;
    return true;
  }

  // Fields::boolean
  bool boolean(bool& out) {
    if (take("true")) {
      out = true;
      return true;
    }
    if (take("false")) {
      out = false;
      return true;
    }
    return false;
  }

  // The value of `key` into `v`, with the slow reader's checks for it.
  bool value(Key key, ScannedValues& v) {
    switch (key) {
      case Key::kV:
        return integer32(0, v.version) && v.version == kRecordFormatVersion;
      case Key::kPid:
        return integer(0, kMaxInt64, v.pid);
      case Key::kHost:
        return string(v.host);
      case Key::kRealtime:
        return integer(0, kMaxInt64, v.realtime);
      case Key::kMono:
        return integer(0, kMaxInt64, v.mono);
      case Key::kNccl:
        return v.work_line ? boolean(v.nccl_kernel) : string(v.nccl);
      case Key::kComm:
        return comm_id(v.comm);
      case Key::kRank:
        return integer32(0, v.rank);
      case Key::kNranks: {
        int64_t n = 0;
        if (!integer(1, kMaxCommRanks, n)) return false;
        v.nranks = static_cast<int>(n);
        return true;
      }
      case Key::kNodes:
        return integer32(0, v.nodes);
      case Key::kName:
        return string(v.name);
      case Key::kT:
        return integer(0, kMaxInt64, v.t);
      case Key::kIndex:
        return count(v.index);
      case Key::kKind: {
        std::string_view kind;
        if (!string(kind)) return false;
        if (kind.size() == 4 && is(kind, "coll")) {
          v.kind = OpKind::kCollective;
        } else if (kind.size() == 3 && is(kind, "p2p")) {
          v.kind = OpKind::kP2p;
        } else {
          return false;
        }
        return true;
      }
      case Key::kSeq:
        return optional_count(v.seq);
      case Key::kFunc:
        return string(v.func);
      case Key::kCount:
        return count(v.count);
      case Key::kDtype:
        return string(v.dtype);
      case Key::kPeer:
        return integer32(-1, v.peer);
      case Key::kRoot:
        return integer32(-1, v.root);
      case Key::kAlgo:
        return string(v.algo);
      case Key::kProto:
        return string(v.proto);
      case Key::kCh:
        return integer32(0, v.ch);
      case Key::kWarps:
        return integer32(0, v.warps);
      case Key::kApi:
        return optional_interval(v.api);
      case Key::kEnq:
        return interval(v.enq);
      case Key::kGpu:
        return optional_interval(v.gpu);
      case Key::kSeen:
        return optional_interval(v.seen);
      case Key::kKch:
        return integer32(0, v.kch);
      case Key::kComplete:
        return boolean(v.complete);
      case Key::kGraph:
        return boolean(v.graph);
      case Key::kLines:
        return count(v.lines);
      case Key::kSince:
        return integer(0, kMaxInt64, v.since);
      // Fields::id32
      case Key::kCtx:
        return integer(0, kMaxUint32, v.ctx);
      case Key::kS:
        return integer(0, kMaxUint32, v.stream);
      case Key::kC:
        return integer(0, kMaxUint32, v.correlation);
      case Key::kEv:
        return integer(0, kMaxUint32, v.event);
      case Key::kDev:
        return string(v.dev);
      case Key::kUnknown:
        break;
    }
    return false;
  }

 private:
  const char* p_;
  const char* end_;
};

StartLine operation_of(const ScannedValues& v) {
  StartLine op;
  op.comm = v.comm;
  op.rank = v.rank;
  op.index = v.index;
  op.kind = v.kind;
  op.seq = v.seq;
  op.func = v.func;
  op.count = v.count;
  op.datatype = v.dtype;
  op.peer = v.peer;
  op.t_ns = v.t;
  return op;
}

StreamId stream_of(const ScannedValues& v) {
  return StreamId{static_cast<uint32_t>(v.ctx), static_cast<uint32_t>(v.stream)};
}

}  // namespace

namespace detail {

std::optional<RecordLine> parse_line_fast(std::string_view text) {
  Scanner s(text);
  std::string_view kind;
  if (!s.take("{\"k\":") || !s.string(kind)) return std::nullopt;
  enum class Kind { kProc, kComm, kStart, kEnd, kAlive, kFin, kDrop, kWork, kWait, kEvent };
  Kind k{};
  uint64_t expected = 0;
  std::span<const Key> order;
  if (kind.size() == 3 && is(kind, "end")) {
    k = Kind::kEnd, expected = kEndKeys, order = kEndOrder;
  } else if (kind.size() == 5 && is(kind, "start")) {
    k = Kind::kStart, expected = kStartKeys, order = kStartOrder;
  } else if (kind.size() == 5 && is(kind, "alive")) {
    k = Kind::kAlive, expected = kAliveKeys, order = kAliveOrder;
  } else if (kind.size() == 4 && is(kind, "comm")) {
    k = Kind::kComm, expected = kCommKeys, order = kCommOrder;
  } else if (kind.size() == 4 && is(kind, "proc")) {
    k = Kind::kProc, expected = kProcKeys, order = kProcOrder;
  } else if (kind.size() == 3 && is(kind, "fin")) {
    k = Kind::kFin, expected = kFinKeys, order = kFinOrder;
  } else if (kind.size() == 4 && is(kind, "drop")) {
    k = Kind::kDrop, expected = kDropKeys, order = kDropOrder;
  } else if (kind.size() == 4 && is(kind, "work")) {
    k = Kind::kWork, expected = kWorkKeys, order = kWorkOrder;
  } else if (kind.size() == 4 && is(kind, "wait")) {
    k = Kind::kWait, expected = kWaitKeys, order = kWaitOrder;
  } else if (kind.size() == 5 && is(kind, "event")) {
    k = Kind::kEvent, expected = kEventKeys, order = kEventOrder;
  } else {
    return std::nullopt;
  }
  ScannedValues v;
  v.work_line = k == Kind::kWork;
  uint64_t seen = 0;
  for (size_t i = 0; s.take(','); ++i) {
    Key key = i < order.size() ? order[i] : Key::kUnknown;
    if (key == Key::kUnknown || !s.take_key(key)) {
      std::string_view name;
      if (!s.string(name) || !s.take(':')) return std::nullopt;
      key = key_of(name);
    }
    if (key == Key::kUnknown || (expected & bit(key)) == 0 || (seen & bit(key)) != 0) {
      return std::nullopt;
    }
    if (!s.value(key, v)) return std::nullopt;
    seen |= bit(key);
  }
  if (!s.take('}') || !s.at_end() || seen != expected) return std::nullopt;
  switch (k) {
    case Kind::kProc:
      return ProcLine{v.version,  v.pid,  std::string(v.host),
                      v.realtime, v.mono, std::string(v.nccl)};
    case Kind::kComm:
      if (v.rank >= v.nranks) return std::nullopt;  // the full reader says why
      return CommLine{v.comm,
                      v.rank,
                      v.nranks,
                      v.nodes,
                      std::string(v.name),
                      v.t,
                      std::string(v.dev),
                      std::string(v.nccl)};
    case Kind::kStart:
      return operation_of(v);
    case Kind::kEnd: {
      EndLine l;
      l.op = operation_of(v);
      l.root = v.root;
      l.algo = v.algo;
      l.proto = v.proto;
      l.channels = v.ch;
      l.warps = v.warps;
      l.api = v.api;
      l.enqueue = v.enq;
      l.gpu = v.gpu;
      l.seen = v.seen;
      l.kernel_channels = v.kch;
      l.complete = v.complete;
      l.graph_captured = v.graph;
      return l;
    }
    case Kind::kAlive:
      return AliveLine{v.t};
    case Kind::kFin:
      return FinLine{v.comm, v.rank, v.t};
    case Kind::kDrop:
      return DropLine{v.lines, v.since, v.t};
    case Kind::kWork:
      if (!v.gpu) return std::nullopt;  // Fields::interval: a work line's is never null
      return WorkLine{stream_of(v), static_cast<uint32_t>(v.correlation), *v.gpu, v.nccl_kernel};
    case Kind::kWait:
      return WaitLine{stream_of(v), static_cast<uint32_t>(v.event),
                      static_cast<uint32_t>(v.correlation), v.t};
    case Kind::kEvent:
      return EventLine{stream_of(v), static_cast<uint32_t>(v.event),
                       static_cast<uint32_t>(v.correlation)};
  }
  return std::nullopt;
}

}  // namespace detail

}  // namespace commtool::nccl_profiler
