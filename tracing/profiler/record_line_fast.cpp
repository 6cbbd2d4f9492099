// parse_line's fast reader (record_line.hpp, detail::parse_line_fast): the plugin's own lines
// without a JSON document. The slow reader, which decides everything else, is record_line.cpp's.
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "tracing/profiler/record_line.hpp"

namespace commtool::nccl_profiler {

namespace {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxUint32 = std::numeric_limits<uint32_t>::max();

// Building an nlohmann document per line (a std::map, a std::string per key) is most of what
// `commtool report` spends on a recording. The plugin writes one fixed shape (record_line.cpp's
// LineWriter), so this scanner reads that shape only and gives up (std::nullopt) at the first
// byte it does not expect; the slow reader then decides, so what is accepted and every error
// stay its own.
// Giving up is always safe; accepting is only allowed where the slow reader returns the same
// value, which tests/test_record_line.cpp and tests/fuzz/fuzz_record_lines.cpp check.

// Every key any kind of line has, except "k". A key outside its kind's set, a second "k", or one
// seen twice (nlohmann keeps the last) makes the scanner give up.
enum class Key : uint8_t {
  kV,
  kPid,
  kHost,
  kRealtime,
  kMono,
  kNccl,
  kComm,
  kRank,
  kNranks,
  kNodes,
  kName,
  kT,
  kIndex,
  kKind,
  kSeq,
  kFunc,
  kCount,
  kDtype,
  kPeer,
  kRoot,
  kAlgo,
  kProto,
  kCh,
  kWarps,
  kApi,
  kEnq,
  kGpu,
  kSeen,
  kKch,
  kComplete,
  kGraph,
  kLines,
  kSince,
  kCtx,
  kS,
  kC,
  kEv,
  kUnknown
};

static_assert(static_cast<unsigned>(Key::kUnknown) < 64, "a key set is a 64-bit mask");

constexpr uint64_t bit(Key key) {
  return uint64_t{1} << static_cast<unsigned>(key);
}

template <class... Keys>
constexpr uint64_t bits(Keys... keys) {
  return (bit(keys) | ...);
}

// `s`, whose size the caller has checked, is `literal`: a compare of a constant size, which the
// compiler turns into a load or two, where string_view's == calls memcmp.
template <size_t N>
constexpr bool is(std::string_view s, const char (&literal)[N]) {
  return std::char_traits<char>::compare(s.data(), literal, N - 1) == 0;
}

constexpr Key key_of(std::string_view s) {
  switch (s.size()) {
    case 1:
      if (is(s, "v")) return Key::kV;
      if (is(s, "t")) return Key::kT;
      if (is(s, "s")) return Key::kS;
      if (is(s, "c")) return Key::kC;
      break;
    case 2:
      if (is(s, "ch")) return Key::kCh;
      if (is(s, "ev")) return Key::kEv;
      break;
    case 3:
      if (is(s, "pid")) return Key::kPid;
      if (is(s, "ctx")) return Key::kCtx;
      if (is(s, "seq")) return Key::kSeq;
      if (is(s, "api")) return Key::kApi;
      if (is(s, "enq")) return Key::kEnq;
      if (is(s, "gpu")) return Key::kGpu;
      if (is(s, "kch")) return Key::kKch;
      break;
    case 4:
      if (is(s, "comm")) return Key::kComm;
      if (is(s, "rank")) return Key::kRank;
      if (is(s, "kind")) return Key::kKind;
      if (is(s, "func")) return Key::kFunc;
      if (is(s, "peer")) return Key::kPeer;
      if (is(s, "root")) return Key::kRoot;
      if (is(s, "algo")) return Key::kAlgo;
      if (is(s, "seen")) return Key::kSeen;
      if (is(s, "host")) return Key::kHost;
      if (is(s, "mono")) return Key::kMono;
      if (is(s, "nccl")) return Key::kNccl;
      if (is(s, "name")) return Key::kName;
      break;
    case 5:
      if (is(s, "index")) return Key::kIndex;
      if (is(s, "count")) return Key::kCount;
      if (is(s, "dtype")) return Key::kDtype;
      if (is(s, "proto")) return Key::kProto;
      if (is(s, "warps")) return Key::kWarps;
      if (is(s, "graph")) return Key::kGraph;
      if (is(s, "nodes")) return Key::kNodes;
      if (is(s, "lines")) return Key::kLines;
      if (is(s, "since")) return Key::kSince;
      break;
    case 6:
      if (is(s, "nranks")) return Key::kNranks;
      break;
    case 8:
      if (is(s, "realtime")) return Key::kRealtime;
      if (is(s, "complete")) return Key::kComplete;
      break;
    default:
      break;
  }
  return Key::kUnknown;
}

// The keys of each kind: record_line.cpp's read_line reads every one of them with Fields::at, so
// each is required, and nothing else may appear (the slow reader ignores unknown keys; this one
// gives up).
constexpr uint64_t kProcKeys =
    bits(Key::kV, Key::kPid, Key::kHost, Key::kRealtime, Key::kMono, Key::kNccl);
constexpr uint64_t kCommKeys =
    bits(Key::kComm, Key::kRank, Key::kNranks, Key::kNodes, Key::kName, Key::kT);
constexpr uint64_t kStartKeys = bits(Key::kComm, Key::kRank, Key::kIndex, Key::kKind, Key::kSeq,
                                     Key::kFunc, Key::kCount, Key::kDtype, Key::kPeer, Key::kT);
constexpr uint64_t kEndKeys =
    kStartKeys | bits(Key::kRoot, Key::kAlgo, Key::kProto, Key::kCh, Key::kWarps, Key::kApi,
                      Key::kEnq, Key::kGpu, Key::kSeen, Key::kKch, Key::kComplete, Key::kGraph);
constexpr uint64_t kAliveKeys = bits(Key::kT);
constexpr uint64_t kFinKeys = bits(Key::kComm, Key::kRank, Key::kT);
constexpr uint64_t kDropKeys = bits(Key::kLines, Key::kSince, Key::kT);
// record --cupti's lines that come by the thousand; its rare `cupti` line is the slow reader's.
constexpr uint64_t kWorkKeys = bits(Key::kCtx, Key::kS, Key::kC, Key::kGpu, Key::kNccl);
constexpr uint64_t kWaitKeys = bits(Key::kCtx, Key::kS, Key::kEv, Key::kC, Key::kT);
constexpr uint64_t kEventKeys = bits(Key::kCtx, Key::kS, Key::kEv, Key::kC);

// Each key's name, by Key.
constexpr std::string_view kKeyNames[] = {
    "v",     "pid",   "host",  "realtime", "mono", "nccl", "comm",  "rank",  "nranks", "nodes",
    "name",  "t",     "index", "kind",     "seq",  "func", "count", "dtype", "peer",   "root",
    "algo",  "proto", "ch",    "warps",    "api",  "enq",  "gpu",   "seen",  "kch",    "complete",
    "graph", "lines", "since", "ctx",      "s",    "c",    "ev"};
static_assert(std::size(kKeyNames) == static_cast<size_t>(Key::kUnknown));
static_assert([] {
  for (size_t i = 0; i < std::size(kKeyNames); ++i) {
    if (key_of(kKeyNames[i]) != static_cast<Key>(i)) return false;
  }
  return true;
}());

// The keys of each kind in the order record_line.cpp's LineWriter writes them: the next key is
// nearly always the one expected, which Scanner::take_key checks in two 8-byte compares instead of
// reading a string and looking it up.
constexpr Key kProcOrder[] = {Key::kV,        Key::kPid,  Key::kHost,
                              Key::kRealtime, Key::kMono, Key::kNccl};
constexpr Key kCommOrder[] = {Key::kComm,  Key::kRank, Key::kNranks,
                              Key::kNodes, Key::kName, Key::kT};
constexpr Key kStartOrder[] = {Key::kComm, Key::kRank,  Key::kIndex, Key::kKind, Key::kSeq,
                               Key::kFunc, Key::kCount, Key::kDtype, Key::kPeer, Key::kT};
constexpr Key kEndOrder[] = {Key::kComm,     Key::kRank,  Key::kIndex, Key::kKind, Key::kSeq,
                             Key::kFunc,     Key::kCount, Key::kDtype, Key::kPeer, Key::kT,
                             Key::kRoot,     Key::kAlgo,  Key::kProto, Key::kCh,   Key::kWarps,
                             Key::kApi,      Key::kEnq,   Key::kGpu,   Key::kSeen, Key::kKch,
                             Key::kComplete, Key::kGraph};
constexpr Key kAliveOrder[] = {Key::kT};
constexpr Key kFinOrder[] = {Key::kComm, Key::kRank, Key::kT};
constexpr Key kDropOrder[] = {Key::kLines, Key::kSince, Key::kT};
constexpr Key kWorkOrder[] = {Key::kCtx, Key::kS, Key::kC, Key::kGpu, Key::kNccl};
constexpr Key kWaitOrder[] = {Key::kCtx, Key::kS, Key::kEv, Key::kC, Key::kT};
constexpr Key kEventOrder[] = {Key::kCtx, Key::kS, Key::kEv, Key::kC};

// `"name":` of a key as two little-endian 8-byte words and the masks of its bytes in them.
struct KeyPattern {
  uint64_t low = 0, high = 0, low_mask = 0, high_mask = 0;
  size_t size = 0;
};

constexpr std::array<KeyPattern, std::size(kKeyNames)> kKeyPatterns = [] {
  std::array<KeyPattern, std::size(kKeyNames)> patterns{};
  for (size_t k = 0; k < patterns.size(); ++k) {
    std::array<char, 16> text{};
    size_t n = 0;
    text[n++] = '"';
    for (char c : kKeyNames[k])
      text[n++] = c;
    text[n++] = '"';
    text[n++] = ':';
    KeyPattern& p = patterns[k];
    p.size = n;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t byte = static_cast<unsigned char>(text[i]);
      if (i < 8) {
        p.low |= byte << (8 * i);
        p.low_mask |= uint64_t{0xff} << (8 * i);
      } else {
        p.high |= byte << (8 * (i - 8));
        p.high_mask |= uint64_t{0xff} << (8 * (i - 8));
      }
    }
  }
  return patterns;
}();

// Every value of any kind, as read so far; which ones are set is the caller's mask.
struct ScannedValues {
  int64_t pid = 0, realtime = 0, mono = 0, t = 0, since = 0;
  int version = 0, rank = 0, nranks = 0, nodes = 0, peer = 0, root = 0, ch = 0, warps = 0, kch = 0;
  uint64_t comm = 0, index = 0, count = 0, lines = 0;
  std::optional<uint64_t> seq;
  std::string_view host, nccl, name, func, dtype, algo, proto;
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
      case Key::kNranks:
        return integer32(1, v.nranks);
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
      return CommLine{v.comm, v.rank, v.nranks, v.nodes, std::string(v.name), v.t};
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
