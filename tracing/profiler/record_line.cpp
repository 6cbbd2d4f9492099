#include "tracing/profiler/record_line.hpp"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>

#include "probes/base/error.hpp"

namespace commtool::nccl_profiler {

namespace {

// ---- writing: runs on NCCL's threads, so it appends to `out` and nothing else allocates ----

// The length of the well-formed UTF-8 sequence at s[i], or 0 where there is none (a stray
// continuation byte, an overlong form, a surrogate, a cut sequence).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code_point = 0;
  uint32_t smallest = 0;
  if ((lead & 0xe0) == 0xc0) {
    length = 2, code_point = lead & 0x1fu, smallest = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, code_point = lead & 0x0fu, smallest = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, code_point = lead & 0x07u, smallest = 0x10000;
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(s[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    code_point = (code_point << 6) | (next & 0x3fu);
  }
  const bool surrogate = code_point >= 0xd800 && code_point <= 0xdfff;
  if (code_point < smallest || code_point > 0x10ffff || surrogate) return 0;
  return length;
}

// A JSON string. Names come from the application (the communicator's name) and the host, so
// any byte can occur: quotes and backslashes are escaped, control characters become \u00XX, and
// bytes that are not UTF-8 become U+FFFD, since a JSON reader rejects the whole line otherwise.
void append_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      out.append("\\u00");
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
      ++i;
    } else if (size_t length = utf8_sequence_length(s, i); length > 0) {
      out.append(s.substr(i, length));
      i += length;
    } else {
      out.append("\\ufffd");
      ++i;
    }
  }
  out += '"';
}

template <class Integer>
void append_integer(std::string& out, Integer value) {
  char digits[24];
  auto result = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, result.ptr);
}

void append_comm_id(std::string& out, uint64_t id) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (int shift = 60; shift >= 0; shift -= 4)
    out += kHex[(id >> shift) & 0xf];
  out += '"';
}

void append_interval(std::string& out, const std::optional<Interval>& interval) {
  if (!interval) {
    out.append("null");
    return;
  }
  out += '[';
  append_integer(out, interval->start_ns);
  out += ',';
  append_integer(out, interval->end_ns);
  out += ']';
}

// `key` is written as given: every key is a plain identifier.
void append_key(std::string& out, std::string_view key) {
  out += ',';
  out += '"';
  out.append(key);
  out.append("\":");
}

const char* kind_name(OpKind kind) {
  return kind == OpKind::kCollective ? "coll" : "p2p";
}

// The keys a start line and an end line share; `t` is the operation's start in both.
void append_operation(std::string& out, const StartLine& op) {
  append_key(out, "comm");
  append_comm_id(out, op.comm);
  append_key(out, "rank");
  append_integer(out, op.rank);
  append_key(out, "index");
  append_integer(out, op.index);
  append_key(out, "kind");
  out += '"';
  out.append(kind_name(op.kind));
  out += '"';
  append_key(out, "seq");
  if (op.seq) {
    append_integer(out, *op.seq);
  } else {
    out.append("null");
  }
  append_key(out, "func");
  append_string(out, op.func);
  append_key(out, "count");
  append_integer(out, op.count);
  append_key(out, "dtype");
  append_string(out, op.datatype);
  append_key(out, "peer");
  append_integer(out, op.peer);
  append_key(out, "t");
  append_integer(out, op.t_ns);
}

void append_bool(std::string& out, bool value) {
  out.append(value ? "true" : "false");
}

struct LineWriter {
  std::string& out;

  void operator()(const ProcLine& l) const {
    out.append("{\"k\":\"proc\"");
    append_key(out, "v");
    append_integer(out, l.version);
    append_key(out, "pid");
    append_integer(out, l.pid);
    append_key(out, "host");
    append_string(out, l.host);
    append_key(out, "realtime");
    append_integer(out, l.realtime_ns);
    append_key(out, "mono");
    append_integer(out, l.monotonic_ns);
    append_key(out, "nccl");
    append_string(out, l.nccl_version);
  }
  void operator()(const CommLine& l) const {
    out.append("{\"k\":\"comm\"");
    append_key(out, "comm");
    append_comm_id(out, l.comm);
    append_key(out, "rank");
    append_integer(out, l.rank);
    append_key(out, "nranks");
    append_integer(out, l.nranks);
    append_key(out, "nodes");
    append_integer(out, l.nodes);
    append_key(out, "name");
    append_string(out, l.name);
    append_key(out, "t");
    append_integer(out, l.t_ns);
  }
  void operator()(const StartLine& l) const {
    out.append("{\"k\":\"start\"");
    append_operation(out, l);
  }
  void operator()(const EndLine& l) const {
    out.append("{\"k\":\"end\"");
    append_operation(out, l.op);
    append_key(out, "root");
    append_integer(out, l.root);
    append_key(out, "algo");
    append_string(out, l.algo);
    append_key(out, "proto");
    append_string(out, l.proto);
    append_key(out, "ch");
    append_integer(out, l.channels);
    append_key(out, "warps");
    append_integer(out, l.warps);
    append_key(out, "api");
    append_interval(out, l.api);
    append_key(out, "enq");
    append_interval(out, l.enqueue);
    append_key(out, "gpu");
    append_interval(out, l.gpu);
    append_key(out, "seen");
    append_interval(out, l.seen);
    append_key(out, "kch");
    append_integer(out, l.kernel_channels);
    append_key(out, "complete");
    append_bool(out, l.complete);
    append_key(out, "graph");
    append_bool(out, l.graph_captured);
  }
  void operator()(const AliveLine& l) const {
    out.append("{\"k\":\"alive\"");
    append_key(out, "t");
    append_integer(out, l.t_ns);
  }
  void operator()(const FinLine& l) const {
    out.append("{\"k\":\"fin\"");
    append_key(out, "comm");
    append_comm_id(out, l.comm);
    append_key(out, "rank");
    append_integer(out, l.rank);
    append_key(out, "t");
    append_integer(out, l.t_ns);
  }
  void operator()(const DropLine& l) const {
    out.append("{\"k\":\"drop\"");
    append_key(out, "lines");
    append_integer(out, l.lines);
    append_key(out, "since");
    append_integer(out, l.since_ns);
    append_key(out, "t");
    append_integer(out, l.t_ns);
  }
};

// ---- reading ----------------------------------------------------------------------------------

using nlohmann::json;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

// One line's object, read key by key; every error names the line kind, the key and its value.
class Fields {
 public:
  Fields(const json& object, std::string_view kind) : object_(object), kind_(kind) {}

  const json& at(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      throw usage_error(fmt::format("{} line without \"{}\"", kind_, key));
    }
    return *it;
  }

  [[noreturn]] void bad(const char* key, const json& value, std::string_view why) const {
    throw usage_error(
        fmt::format("{} line: \"{}\" {}: {}", kind_, key, excerpt(value.dump()), why));
  }

  int64_t integer(const char* key, int64_t lowest, int64_t highest) const {
    return integer_value(key, at(key), lowest, highest);
  }

  int integer32(const char* key, int lowest) const {
    return static_cast<int>(integer(key, lowest, kMaxInt));
  }

  uint64_t count(const char* key) const { return count_value(key, at(key)); }

  std::optional<uint64_t> optional_count(const char* key) const {
    const json& value = at(key);
    if (value.is_null()) return std::nullopt;
    return count_value(key, value);
  }

  std::string string(const char* key) const {
    const json& value = at(key);
    if (!value.is_string()) bad(key, value, "must be a string");
    return value.get<std::string>();
  }

  bool boolean(const char* key) const {
    const json& value = at(key);
    if (!value.is_boolean()) bad(key, value, "must be true or false");
    return value.get<bool>();
  }

  uint64_t comm_id(const char* key) const {
    const json& value = at(key);
    const std::string* text = value.is_string() ? value.get_ptr<const std::string*>() : nullptr;
    const bool hex16 = text != nullptr && text->size() == 16 &&
                       text->find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex16) bad(key, value, "must be 16 lowercase hexadecimal digits in a string");
    uint64_t id = 0;
    std::from_chars(text->data(), text->data() + text->size(), id, 16);
    return id;
  }

  std::optional<Interval> optional_interval(const char* key) const {
    const json& value = at(key);
    if (value.is_null()) return std::nullopt;
    return interval_value(key, value);
  }

  Interval interval(const char* key) const { return interval_value(key, at(key)); }

 private:
  int64_t integer_value(const char* key, const json& value, int64_t lowest, int64_t highest) const {
    if (!value.is_number_integer()) bad(key, value, "must be an integer");
    // A value above int64's range is stored unsigned and would wrap if read as signed.
    const bool fits =
        !value.is_number_unsigned() || value.get<uint64_t>() <= static_cast<uint64_t>(kMaxInt64);
    const bool in_range = fits && value.get<int64_t>() >= lowest && value.get<int64_t>() <= highest;
    if (!in_range) bad(key, value, fmt::format("must be from {} to {}", lowest, highest));
    return value.get<int64_t>();
  }

  uint64_t count_value(const char* key, const json& value) const {
    if (!value.is_number_integer()) bad(key, value, "must be an integer");
    if (!value.is_number_unsigned()) bad(key, value, "must be at least 0");
    return value.get<uint64_t>();
  }

  Interval interval_value(const char* key, const json& value) const {
    if (!value.is_array() || value.size() != 2) {
      bad(key, value, "must be [start, end] in nanoseconds");
    }
    Interval interval{integer_value(key, value[0], 0, kMaxInt64),
                      integer_value(key, value[1], 0, kMaxInt64)};
    if (interval.end_ns < interval.start_ns) bad(key, value, "ends before it starts");
    return interval;
  }

  const json& object_;
  std::string_view kind_;
};

StartLine read_operation(const Fields& f) {
  StartLine op;
  op.comm = f.comm_id("comm");
  op.rank = f.integer32("rank", 0);
  op.index = f.count("index");
  const std::string kind = f.string("kind");
  if (kind == "coll") {
    op.kind = OpKind::kCollective;
  } else if (kind == "p2p") {
    op.kind = OpKind::kP2p;
  } else {
    f.bad("kind", f.at("kind"), "must be \"coll\" or \"p2p\"");
  }
  op.seq = f.optional_count("seq");
  op.func = f.string("func");
  op.count = f.count("count");
  op.datatype = f.string("dtype");
  op.peer = f.integer32("peer", -1);
  op.t_ns = f.integer("t", 0, kMaxInt64);
  return op;
}

RecordLine read_line(const json& j) {
  if (!j.is_object()) {
    throw usage_error(fmt::format("record line {}: must be a JSON object", excerpt(j.dump())));
  }
  auto k = j.find("k");
  if (k == j.end()) throw usage_error("record line without \"k\"");
  if (!k->is_string()) {
    throw usage_error(fmt::format("record line: \"k\" {}: must be a string", excerpt(k->dump())));
  }
  const std::string& kind = k->get_ref<const std::string&>();
  const Fields f(j, kind);
  if (kind == "proc") {
    ProcLine l;
    l.version = f.integer32("v", 0);
    if (l.version != kRecordFormatVersion) {
      f.bad("v", f.at("v"), fmt::format("this commtool reads version {}", kRecordFormatVersion));
    }
    l.pid = f.integer("pid", 0, kMaxInt64);
    l.host = f.string("host");
    l.realtime_ns = f.integer("realtime", 0, kMaxInt64);
    l.monotonic_ns = f.integer("mono", 0, kMaxInt64);
    l.nccl_version = f.string("nccl");
    return l;
  }
  if (kind == "comm") {
    CommLine l;
    l.comm = f.comm_id("comm");
    l.rank = f.integer32("rank", 0);
    l.nranks = f.integer32("nranks", 1);
    l.nodes = f.integer32("nodes", 0);
    l.name = f.string("name");
    l.t_ns = f.integer("t", 0, kMaxInt64);
    return l;
  }
  if (kind == "start") return read_operation(f);
  if (kind == "end") {
    EndLine l;
    l.op = read_operation(f);
    l.root = f.integer32("root", -1);
    l.algo = f.string("algo");
    l.proto = f.string("proto");
    l.channels = f.integer32("ch", 0);
    l.warps = f.integer32("warps", 0);
    l.api = f.optional_interval("api");
    l.enqueue = f.interval("enq");
    l.gpu = f.optional_interval("gpu");
    l.seen = f.optional_interval("seen");
    l.kernel_channels = f.integer32("kch", 0);
    l.complete = f.boolean("complete");
    l.graph_captured = f.boolean("graph");
    return l;
  }
  if (kind == "alive") return AliveLine{f.integer("t", 0, kMaxInt64)};
  if (kind == "fin") {
    FinLine l;
    l.comm = f.comm_id("comm");
    l.rank = f.integer32("rank", 0);
    l.t_ns = f.integer("t", 0, kMaxInt64);
    return l;
  }
  if (kind == "drop") {
    DropLine l;
    l.lines = f.count("lines");
    l.since_ns = f.integer("since", 0, kMaxInt64);
    l.t_ns = f.integer("t", 0, kMaxInt64);
    return l;
  }
  throw usage_error(
      fmt::format("record line: \"k\" {}: must be proc, comm, start, end, alive, fin or drop",
                  excerpt(k->dump())));
}

// ---- reading, fast path: the plugin's own lines without a JSON document ----------------------
//
// Building an nlohmann document per line (a std::map, a std::string per key) is most of what
// `commtool report` spends on a recording. The plugin writes one fixed shape (LineWriter above),
// so this scanner reads that shape only and gives up (std::nullopt) at the first byte it does
// not expect; the slow reader then decides, so what is accepted and every error stay its own.
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
      break;
    case 2:
      if (is(s, "ch")) return Key::kCh;
      break;
    case 3:
      if (is(s, "pid")) return Key::kPid;
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

// The keys of each kind: read_line above reads every one of them with Fields::at, so each is
// required, and nothing else may appear (the slow reader ignores unknown keys; this one gives up).
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

// Each key's name, by Key.
constexpr std::string_view kKeyNames[] = {
    "v",     "pid",  "host",     "realtime", "mono",  "nccl",  "comm", "rank",  "nranks",
    "nodes", "name", "t",        "index",    "kind",  "seq",   "func", "count", "dtype",
    "peer",  "root", "algo",     "proto",    "ch",    "warps", "api",  "enq",   "gpu",
    "seen",  "kch",  "complete", "graph",    "lines", "since"};
static_assert(std::size(kKeyNames) == static_cast<size_t>(Key::kUnknown));
static_assert([] {
  for (size_t i = 0; i < std::size(kKeyNames); ++i) {
    if (key_of(kKeyNames[i]) != static_cast<Key>(i)) return false;
  }
  return true;
}());

// The keys of each kind in the order LineWriter writes them: the next key is nearly always the
// one expected, which Scanner::take_key checks in two 8-byte compares instead of reading a string
// and looking it up.
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
        return string(v.nccl);
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

}  // namespace

namespace detail {

std::optional<RecordLine> parse_line_fast(std::string_view text) {
  Scanner s(text);
  std::string_view kind;
  if (!s.take("{\"k\":") || !s.string(kind)) return std::nullopt;
  enum class Kind { kProc, kComm, kStart, kEnd, kAlive, kFin, kDrop };
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
  } else {
    return std::nullopt;
  }
  ScannedValues v;
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
  }
  return std::nullopt;
}

std::optional<RecordLine> parse_line_slow(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return read_line(j);
}

}  // namespace detail

std::string to_line(const RecordLine& line) {
  std::string out;
  out.reserve(512);
  append_line(out, line);
  out.pop_back();
  return out;
}

void append_line(std::string& out, const RecordLine& line) {
  std::visit(LineWriter{out}, line);
  out.append("}\n");
}

std::optional<RecordLine> parse_line(std::string_view text) {
  if (std::optional<RecordLine> line = detail::parse_line_fast(text)) return line;
  return detail::parse_line_slow(text);
}

}  // namespace commtool::nccl_profiler
