#include "tracing/profiler/record_line.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/utf8.hpp"

namespace commtool::nccl_profiler {

namespace {

// ---- writing: runs on NCCL's threads, so it appends to `out` and nothing else allocates ----

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
    } else if (size_t length = utf8::decode(s, i).length; length > 0) {
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

void append_stream(std::string& out, const StreamId& id) {
  append_key(out, "ctx");
  append_integer(out, id.context);
  append_key(out, "s");
  append_integer(out, id.stream);
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
    append_key(out, "dev");
    append_string(out, l.gpu);
    append_key(out, "nccl");
    append_string(out, l.nccl_version);
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
  void operator()(const CuptiLine& l) const {
    out.append("{\"k\":\"cupti\"");
    append_key(out, "state");
    append_string(out, to_string(l.state));
    append_key(out, "why");
    append_string(out, l.why);
    append_key(out, "dropped");
    append_integer(out, l.dropped);
    append_key(out, "t");
    append_integer(out, l.t_ns);
  }
  void operator()(const WorkLine& l) const {
    out.append("{\"k\":\"work\"");
    append_stream(out, l.stream);
    append_key(out, "c");
    append_integer(out, l.correlation);
    append_key(out, "gpu");
    append_interval(out, l.gpu);
    append_key(out, "nccl");
    append_bool(out, l.nccl);
  }
  void operator()(const WaitLine& l) const {
    out.append("{\"k\":\"wait\"");
    append_stream(out, l.stream);
    append_key(out, "ev");
    append_integer(out, l.event);
    append_key(out, "c");
    append_integer(out, l.correlation);
    append_key(out, "t");
    append_integer(out, l.t_ns);
  }
  void operator()(const EventLine& l) const {
    out.append("{\"k\":\"event\"");
    append_stream(out, l.stream);
    append_key(out, "ev");
    append_integer(out, l.event);
    append_key(out, "c");
    append_integer(out, l.correlation);
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

  uint32_t id32(const char* key) const {
    return static_cast<uint32_t>(integer(key, 0, std::numeric_limits<uint32_t>::max()));
  }

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

StreamId read_stream(const Fields& f) {
  return StreamId{f.id32("ctx"), f.id32("s")};
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
    l.nranks = static_cast<int>(f.integer("nranks", 1, kMaxCommRanks));
    l.rank = static_cast<int>(f.integer("rank", 0, l.nranks - 1));
    l.nodes = f.integer32("nodes", 0);
    l.name = f.string("name");
    l.t_ns = f.integer("t", 0, kMaxInt64);
    // Neither is in the first recordings' lines.
    if (j.contains("dev")) l.gpu = f.string("dev");
    if (j.contains("nccl")) l.nccl_version = f.string("nccl");
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
  if (kind == "cupti") {
    CuptiLine l;
    const std::string state = f.string("state");
    if (state == "on") {
      l.state = CuptiState::kOn;
    } else if (state == "off") {
      l.state = CuptiState::kOff;
    } else if (state == "yielded") {
      l.state = CuptiState::kYielded;
    } else {
      f.bad("state", f.at("state"), "must be \"on\", \"off\" or \"yielded\"");
    }
    l.why = f.string("why");
    l.dropped = f.count("dropped");
    l.t_ns = f.integer("t", 0, kMaxInt64);
    return l;
  }
  if (kind == "work") {
    WorkLine l;
    l.stream = read_stream(f);
    l.correlation = f.id32("c");
    l.gpu = f.interval("gpu");
    l.nccl = f.boolean("nccl");
    return l;
  }
  if (kind == "wait") {
    WaitLine l;
    l.stream = read_stream(f);
    l.event = f.id32("ev");
    l.correlation = f.id32("c");
    l.t_ns = f.integer("t", 0, kMaxInt64);
    return l;
  }
  if (kind == "event") {
    EventLine l;
    l.stream = read_stream(f);
    l.event = f.id32("ev");
    l.correlation = f.id32("c");
    return l;
  }
  throw usage_error(fmt::format(
      "record line: \"k\" {}: must be proc, comm, start, end, alive, fin, drop, cupti, work, "
      "wait or event",
      excerpt(k->dump())));
}

}  // namespace

namespace detail {
std::optional<RecordLine> parse_line_slow(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return read_line(j);
}

}  // namespace detail

const char* to_string(CuptiState state) {
  switch (state) {
    case CuptiState::kOn:
      return "on";
    case CuptiState::kOff:
      return "off";
    case CuptiState::kYielded:
      return "yielded";
  }
  return "?";
}

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
