#include "tracing/trace/record_io.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstring>

#include "probes/base/error.hpp"

namespace commtool::tracing {

namespace {

constexpr std::string_view kFormatTag = "commtool-records";
constexpr int kFormatVersion = 1;

// ---- writing ----------------------------------------------------------------------------------

// Appends one record line; numbers through to_chars (no locale, no format parsing) because a
// worker serializes millions of records before it can send them.
class LineWriter {
 public:
  explicit LineWriter(std::string& out) : out_(out) {}
  LineWriter& tag(char c) {
    out_.push_back(c);
    return *this;
  }
  template <class T>
  LineWriter& num(T v) {
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out_.push_back(' ');
    out_.append(buf, res.ptr);
    return *this;
  }
  // Free text, last on the line: a newline in it would end the record, so it becomes a space.
  LineWriter& text(std::string_view s) {
    out_.push_back(' ');
    size_t at = out_.size();
    out_.append(s);
    for (size_t i = at; i < out_.size(); ++i) {
      if (out_[i] == '\n' || out_[i] == '\r') out_[i] = ' ';
    }
    return *this;
  }
  void end() { out_.push_back('\n'); }

 private:
  std::string& out_;
};
char gpu_tag(GpuWorkKind k) {
  switch (k) {
    case GpuWorkKind::kKernel:
      return 'k';
    case GpuWorkKind::kMemcpy:
      return 'm';
    case GpuWorkKind::kMemset:
      return 's';
  }
  return 'k';
}

// ---- reading ----------------------------------------------------------------------------------
//
// The parser walks the text once, field by field, and never splits it into lines first: a
// pass that finds every line end before parsing it cost as much as the parsing. A line ends at
// '\n', optionally preceded by '\r' (a file edited on Windows).

bool is_eol(char c) {
  return c == '\n' || c == '\r';
}

[[noreturn]] void fail(const std::string& source, size_t line, std::string_view field,
                       std::string_view what) {
  throw usage_error(fmt::format("{}:{}: {}: {}", source, line, field, what));
}

// A token for an error message: up to the next space or line end, cut short so a binary file
// cannot flood the terminal.
std::string quoted(const char* p, const char* end) {
  const char* stop = p;
  while (stop != end && *stop != ' ' && !is_eol(*stop))
    ++stop;
  constexpr size_t kMax = 40;
  std::string_view s(p, static_cast<size_t>(stop - p));
  return s.size() > kMax ? fmt::format("\"{}...\"", s.substr(0, kMax)) : fmt::format("\"{}\"", s);
}

// The fields of one record line after its tag: decimal numbers separated by single spaces, then
// optionally free text running to the end of the line. Reads from p up to the line's end.
class Fields {
 public:
  Fields(const char* p, const char* end, const std::string& source, size_t line, const char* kind)
      : p_(p), end_(end), source_(source), line_(line), kind_(kind) {}

  template <class T>
  T next(const char* field) {
    T v{};
    auto [ptr, ec] = std::from_chars(p_, end_, v);
    if (ec != std::errc() || (ptr != end_ && *ptr != ' ' && !is_eol(*ptr))) bad_number(field, ec);
    p_ = ptr != end_ && *ptr == ' ' ? ptr + 1 : ptr;
    return v;
  }
  // A number that must lie in [lo, hi] (flags, tri-states).
  int small(const char* field, int lo, int hi) {
    int v = next<int>(field);
    if (v < lo || v > hi) fail(field, fmt::format("{} is not one of {}..{}", v, lo, hi));
    return v;
  }
  // An interval's end, which cannot come before its start.
  void not_before(const char* field, uint64_t end, const char* start_field, uint64_t start) const {
    if (end < start) {
      fail(field, fmt::format("{} is before {} {}: an interval cannot end before it starts; "
                              "accepted: {} >= {}",
                              end, start_field, start, field, start_field));
    }
  }
  // n bytes of text, then a space or the line's end (a length-prefixed string).
  std::string_view take(size_t n, const char* field) {
    const char* eol = line_end();
    if (static_cast<size_t>(eol - p_) < n) {
      fail(field, fmt::format("the line ends inside its {} bytes", n));
    }
    std::string_view s(p_, n);
    p_ += n;
    if (p_ != eol) {
      if (*p_ != ' ') fail(field, fmt::format("no space after its {} bytes: wrong length", n));
      ++p_;
    }
    return s;
  }
  // The rest of the line: a name.
  std::string_view rest() {
    const char* eol = line_end();
    std::string_view s(p_, static_cast<size_t>(eol - p_));
    p_ = eol;
    return s;
  }
  // Checks that nothing follows the last field; returns where the next line starts.
  const char* done() const {
    if (p_ == end_) return p_;
    if (*p_ == '\n') return p_ + 1;
    if (*p_ == '\r' && p_ + 1 != end_ && p_[1] == '\n') return p_ + 2;
    fail("end of line", fmt::format("unexpected text {}", quoted(p_, end_)));
  }
  [[noreturn]] void fail(std::string_view field, std::string_view what) const {
    tracing::fail(source_, line_, fmt::format("{} {}", kind_, field), what);
  }

 private:
  // Where the line's text ends: at its '\n', or at a '\r' right before it.
  const char* line_end() const {
    const void* nl = std::memchr(p_, '\n', static_cast<size_t>(end_ - p_));
    const char* eol = nl ? static_cast<const char*>(nl) : end_;
    return eol != p_ && eol[-1] == '\r' ? eol - 1 : eol;
  }
  [[noreturn]] void bad_number(const char* field, std::errc ec) const {
    if (p_ == end_ || *p_ == ' ' || is_eol(*p_)) fail(field, "missing");
    std::string token = quoted(p_, end_);
    if (ec == std::errc::result_out_of_range) fail(field, token + " is out of range");
    fail(field, token + " is not a decimal number");
  }

  const char* p_;
  const char* end_;
  const std::string& source_;
  size_t line_;
  const char* kind_;
};

// Checks the first line; returns where the second starts.
const char* check_header(std::string_view text, const std::string& source) {
  std::string expected = fmt::format("{} {}", kFormatTag, kFormatVersion);
  const char* end = text.data() + text.size();
  if (text.empty()) fail(source, 1, "header", "the text is empty; expected \"" + expected + "\"");
  std::string prefix = fmt::format("{} ", kFormatTag);
  if (!text.starts_with(prefix)) {
    fail(source, 1, "header",
         fmt::format("{} is not a records file; expected \"{}\"", quoted(text.data(), end),
                     expected));
  }
  Fields f(text.data() + prefix.size(), end, source, 1, "header");
  int version = f.next<int>("version");
  if (version != kFormatVersion) {
    f.fail("version", fmt::format("{} is not supported; this build reads version {}", version,
                                  kFormatVersion));
  }
  return f.done();
}

// Counts the records of each kind before parsing, so each vector is allocated once: regrowing
// vectors of records that hold strings costs as much as parsing them.
void reserve_for(std::string_view text, RecordSet& r) {
  std::array<size_t, 256> count{};
  for (size_t nl = text.find('\n'); nl != std::string_view::npos && nl + 1 < text.size();
       nl = text.find('\n', nl + 1)) {
    ++count[static_cast<unsigned char>(text[nl + 1])];
  }
  r.gpu.reserve(count['k'] + count['m'] + count['s']);
  r.api.reserve(count['a']);
  r.stream_waits.reserve(count['w']);
  r.events.reserve(count['e']);
  r.operations.reserve(count['o']);
  r.ranges.reserve(count['r']);
}

const char* parse_gpu(Fields& f, GpuWorkKind kind, RecordSet& r) {
  GpuWork& w = r.gpu.emplace_back();
  w.kind = kind;
  w.stream = f.next<uint32_t>("stream");
  w.correlation = f.next<uint32_t>("correlation");
  w.start_ns = f.next<uint64_t>("start_ns");
  w.end_ns = f.next<uint64_t>("end_ns");
  f.not_before("end_ns", w.end_ns, "start_ns", w.start_ns);
  w.name.assign(f.rest());
  return f.done();
}

const char* parse_api(Fields& f, RecordSet& r) {
  ApiCall& a = r.api.emplace_back();
  a.correlation = f.next<uint32_t>("correlation");
  a.thread = f.next<uint32_t>("thread");
  a.start_ns = f.next<uint64_t>("start_ns");
  a.end_ns = f.next<uint64_t>("end_ns");
  f.not_before("end_ns", a.end_ns, "start_ns", a.start_ns);
  a.name.assign(f.rest());
  return f.done();
}

const char* parse_wait(Fields& f, RecordSet& r) {
  StreamWaitCall& w = r.stream_waits.emplace_back();
  w.stream = f.next<uint32_t>("stream");
  w.event = f.next<uint32_t>("event");
  w.start_ns = f.next<uint64_t>("start_ns");
  w.end_ns = f.next<uint64_t>("end_ns");
  f.not_before("end_ns", w.end_ns, "start_ns", w.start_ns);
  return f.done();
}

const char* parse_event(Fields& f, RecordSet& r) {
  EventCompletion& e = r.events.emplace_back();
  e.event = f.next<uint32_t>("event");
  e.stream = f.next<uint32_t>("stream");
  e.device_ns = f.next<uint64_t>("device_ns");
  return f.done();
}

const char* parse_operation(Fields& f, RecordSet& r) {
  OperationMark& o = r.operations.emplace_back();
  o.seq = f.next<uint64_t>("seq");
  o.thread = f.next<uint32_t>("thread");
  o.producer_stream = f.next<uint32_t>("producer_stream");
  o.nccl_stream = f.next<uint32_t>("nccl_stream");
  o.consumer_stream = f.next<uint32_t>("consumer_stream");
  o.input_ready_event = f.next<uint32_t>("input_ready_event");
  o.end_event = f.next<uint32_t>("end_event");
  o.enqueue_start_ns = f.next<uint64_t>("enqueue_start_ns");
  o.enqueue_end_ns = f.next<uint64_t>("enqueue_end_ns");
  o.wait_start_ns = f.next<uint64_t>("wait_start_ns");
  o.wait_end_ns = f.next<uint64_t>("wait_end_ns");
  f.not_before("enqueue_end_ns", o.enqueue_end_ns, "enqueue_start_ns", o.enqueue_start_ns);
  f.not_before("wait_end_ns", o.wait_end_ns, "wait_start_ns", o.wait_start_ns);
  o.wait_polls = f.small("wait_polls", 0, 1) == 1;
  o.complete_at_wait_return = f.small("complete_at_wait_return", -1, 1);
  return f.done();
}

const char* parse_range(Fields& f, RecordSet& r) {
  HostRange& h = r.ranges.emplace_back();
  h.thread = f.next<uint32_t>("thread");
  h.start_ns = f.next<uint64_t>("start_ns");
  h.end_ns = f.next<uint64_t>("end_ns");
  f.not_before("end_ns", h.end_ns, "start_ns", h.start_ns);
  size_t domain_len = f.next<uint64_t>("domain_len");
  h.domain.assign(f.take(domain_len, "domain"));
  h.name.assign(f.rest());
  return f.done();
}

const char* parse_dropped(Fields& f, RecordSet& r) {
  uint64_t n = f.next<uint64_t>("count");
  const char* next = f.done();
  if (r.dropped_records > UINT64_MAX - n) f.fail("count", "the total overflows 64 bits");
  r.dropped_records += n;
  return next;
}

// Parses the record line at p; returns where the next line starts.
const char* parse_line(const char* p, const char* end, const std::string& source, size_t line_no,
                       RecordSet& r) {
  bool one_letter = p + 1 == end || p[1] == ' ' || is_eol(p[1]);
  const char* fields = p + 1 == end || p[1] != ' ' ? p + 1 : p + 2;
  auto at = [&](const char* kind) { return Fields(fields, end, source, line_no, kind); };
  switch (one_letter ? *p : '?') {
    case 'k': {
      Fields f = at("kernel");
      return parse_gpu(f, GpuWorkKind::kKernel, r);
    }
    case 'm': {
      Fields f = at("memcpy");
      return parse_gpu(f, GpuWorkKind::kMemcpy, r);
    }
    case 's': {
      Fields f = at("memset");
      return parse_gpu(f, GpuWorkKind::kMemset, r);
    }
    case 'a': {
      Fields f = at("api");
      return parse_api(f, r);
    }
    case 'w': {
      Fields f = at("stream-wait");
      return parse_wait(f, r);
    }
    case 'e': {
      Fields f = at("event");
      return parse_event(f, r);
    }
    case 'o': {
      Fields f = at("operation");
      return parse_operation(f, r);
    }
    case 'r': {
      Fields f = at("range");
      return parse_range(f, r);
    }
    case 'd': {
      Fields f = at("dropped");
      return parse_dropped(f, r);
    }
    default:
      fail(source, line_no, "record kind",
           fmt::format("{} is unknown; expected one of k m s a w e o r d", quoted(p, end)));
  }
}

}  // namespace

std::string serialize_records(const RecordSet& r) {
  std::string out;
  size_t n = r.gpu.size() + r.api.size() + r.stream_waits.size() + r.events.size() +
             r.ranges.size() + r.operations.size() * 3;
  out.reserve(64 + n * 80);
  LineWriter w(out);
  out.append(fmt::format("{} {}\n", kFormatTag, kFormatVersion));
  for (const GpuWork& g : r.gpu) {
    w.tag(gpu_tag(g.kind)).num(g.stream).num(g.correlation).num(g.start_ns).num(g.end_ns);
    w.text(g.name).end();
  }
  for (const ApiCall& a : r.api) {
    w.tag('a').num(a.correlation).num(a.thread).num(a.start_ns).num(a.end_ns).text(a.name).end();
  }
  for (const StreamWaitCall& s : r.stream_waits) {
    w.tag('w').num(s.stream).num(s.event).num(s.start_ns).num(s.end_ns).end();
  }
  for (const EventCompletion& e : r.events) {
    w.tag('e').num(e.event).num(e.stream).num(e.device_ns).end();
  }
  for (const OperationMark& o : r.operations) {
    w.tag('o').num(o.seq).num(o.thread).num(o.producer_stream).num(o.nccl_stream);
    w.num(o.consumer_stream).num(o.input_ready_event).num(o.end_event);
    w.num(o.enqueue_start_ns).num(o.enqueue_end_ns).num(o.wait_start_ns).num(o.wait_end_ns);
    w.num(o.wait_polls ? 1 : 0).num(o.complete_at_wait_return).end();
  }
  for (const HostRange& h : r.ranges) {
    w.tag('r').num(h.thread).num(h.start_ns).num(h.end_ns).num(h.domain.size());
    w.text(h.domain).text(h.name).end();
  }
  if (r.dropped_records > 0) w.tag('d').num(r.dropped_records).end();
  return out;
}

RecordSet parse_records(std::string_view text, const std::string& source, size_t* cut_line) {
  RecordSet r;
  const char* p = check_header(text, source);
  if (cut_line) {
    *cut_line = 0;
    // The writer ends every line: a last record line without its end was cut off mid-write.
    size_t last = text.rfind('\n');
    if (!text.empty() && text.back() != '\n' && last != std::string_view::npos &&
        text.data() + last + 1 >= p) {
      text = text.substr(0, last + 1);
    } else {
      cut_line = nullptr;
    }
  }
  const char* end = text.data() + text.size();
  reserve_for(text, r);
  size_t line_no = 2;
  for (; p < end; ++line_no) {
    if (*p == '\n') {
      ++p;  // a blank line
    } else if (*p == '\r' && p + 1 != end && p[1] == '\n') {
      p += 2;
    } else {
      p = parse_line(p, end, source, line_no, r);
    }
  }
  if (cut_line) *cut_line = line_no;
  check_unique_records(r, text, source);
  return r;
}

}  // namespace commtool::tracing
