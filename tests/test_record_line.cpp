// The line format of `commtool record`: what the profiler plugin writes and its readers parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "probes/base/error.hpp"
#include "tracing/profiler/record_line.hpp"

using namespace commtool::nccl_profiler;
using commtool::Error;
using commtool::ExitCode;

namespace {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

StartLine allreduce() {
  StartLine op;
  op.comm = 0x0123456789abcdefULL;
  op.rank = 3;
  op.index = 41;
  op.kind = OpKind::kCollective;
  op.seq = 17;
  op.func = "AllReduce";
  op.count = 1 << 20;
  op.datatype = "ncclFloat32";
  op.peer = -1;
  op.t_ns = 1'000'000'123;
  return op;
}

StartLine send() {
  StartLine op;
  op.comm = 7;
  op.rank = 0;
  op.index = 0;
  op.kind = OpKind::kP2p;
  op.func = "Send";
  op.count = 5;
  op.datatype = "ncclInt8";
  op.peer = 1;
  op.t_ns = 9;
  return op;
}

EndLine finished_allreduce() {
  EndLine l;
  l.op = allreduce();
  l.root = -1;
  l.algo = "RING";
  l.proto = "SIMPLE";
  l.channels = 16;
  l.warps = 16;
  l.api = Interval{100, 200};
  l.enqueue = Interval{110, 190};
  l.gpu = Interval{1'700'000'000'000'000'000, 1'700'000'000'000'050'000};
  l.seen = Interval{300, 400};
  l.kernel_channels = 16;
  l.complete = true;
  l.graph_captured = true;
  return l;
}

// Every kind of line, each field away from its default.
std::vector<RecordLine> one_of_each() {
  EndLine unfinished_send;
  unfinished_send.op = send();
  unfinished_send.enqueue = Interval{10, 12};
  unfinished_send.channels = 2;
  unfinished_send.complete = false;
  return {
      ProcLine{1, 4242, "node-07", 1'764'800'000'000'000'000, 123'456, "2.28.9"},
      CommLine{0xfedcba9876543210ULL, 5, 16, 2, "pg:0", 77,
               "GPU-5a0ed1c2-0000-1111-2222-333344445555", ""},
      allreduce(),
      send(),
      finished_allreduce(),
      unfinished_send,
      AliveLine{kMaxInt64},
      FinLine{0x0123456789abcdefULL, 3, 88},
      DropLine{12, 1000, 2000},
  };
}

RecordLine round_trip(const RecordLine& line) {
  auto parsed = parse_line(to_line(line));
  EXPECT_TRUE(parsed.has_value()) << to_line(line);
  return parsed.value_or(AliveLine{-1});
}

// The message of the error parsing `text` throws; fails the test if it throws none.
std::string parse_error(const std::string& text) {
  try {
    parse_line(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return "";
}

std::string end_line_text() {
  return to_line(finished_allreduce());
}

// `text` with the first occurrence of `from` replaced by `to`; fails the test if it is absent.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace

TEST(RecordLine, EveryKindRoundTrips) {
  for (const RecordLine& line : one_of_each()) {
    EXPECT_EQ(round_trip(line), line) << to_line(line);
  }
}

// record --cupti's lines (the plugin's CUPTI layer). The fast reader leaves them to the slow
// one (they are not in one_of_each, which the fast reader must take whole).
std::vector<RecordLine> cupti_lines() {
  return {CuptiLine{CuptiState::kOn, "/usr/local/cuda/lib64/libcupti.so.13", 0, 5},
          CuptiLine{CuptiState::kOff, "another CUPTI client holds CUPTI", 0, 6},
          CuptiLine{CuptiState::kYielded, "libtorch_cpu.so", 17, kMaxInt64},
          WorkLine{StreamId{1, 13}, 4'294'967'295u, Interval{10, 20}, true},
          WorkLine{StreamId{0, 0}, 0, Interval{0, 0}, false},
          WaitLine{StreamId{2, 7}, 3, 99, 1000},
          EventLine{StreamId{1, 13}, 4, 100}};
}

TEST(RecordLine, CuptiLinesRoundTrip) {
  for (const RecordLine& line : cupti_lines()) {
    EXPECT_EQ(round_trip(line), line) << to_line(line);
  }
  EXPECT_EQ(to_line(WorkLine{StreamId{1, 13}, 7, Interval{10, 20}, true}),
            R"({"k":"work","ctx":1,"s":13,"c":7,"gpu":[10,20],"nccl":true})");
  EXPECT_EQ(to_line(WaitLine{StreamId{1, 7}, 3, 8, 9}),
            R"({"k":"wait","ctx":1,"s":7,"ev":3,"c":8,"t":9})");
}

TEST(RecordLine, CuptiLinesCheckTheirValues) {
  EXPECT_NE(parse_error(R"({"k":"cupti","state":"maybe","why":"","dropped":0,"t":1})")
                .find("\"state\" \"maybe\": must be \"on\", \"off\" or \"yielded\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"work","ctx":1,"s":4294967296,"c":1,"gpu":[1,2],"nccl":false})")
                .find("\"s\" 4294967296: must be from 0 to 4294967295"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"work","ctx":1,"s":1,"c":1,"gpu":[2,1],"nccl":false})")
                .find("ends before it starts"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"event","ctx":1,"s":1,"c":1})").find("without \"ev\""),
            std::string::npos);
}

TEST(RecordLine, KeysAreTheDocumentedOnesWithKindFirst) {
  EXPECT_EQ(to_line(ProcLine{1, 42, "h", 5, 6, "2.28.9"}),
            R"({"k":"proc","v":1,"pid":42,"host":"h","realtime":5,"mono":6,"nccl":"2.28.9"})");
  EXPECT_EQ(to_line(CommLine{0xab, 1, 2, 1, "n", 3, "GPU-1", "2.28.9"}),
            R"({"k":"comm","comm":"00000000000000ab","rank":1,"nranks":2,"nodes":1,"name":"n",)"
            R"("t":3,"dev":"GPU-1","nccl":"2.28.9"})");
  // The first recordings' comm lines had no "dev": still read, with no GPU.
  EXPECT_EQ(parse_line(R"({"k":"comm","comm":"00000000000000ab","rank":1,"nranks":2,)"
                       R"("nodes":1,"name":"n","t":3})"),
            std::optional<RecordLine>(CommLine{0xab, 1, 2, 1, "n", 3, "", ""}));
  EXPECT_EQ(to_line(send()),
            R"({"k":"start","comm":"0000000000000007","rank":0,"index":0,"kind":"p2p","seq":null,)"
            R"("func":"Send","count":5,"dtype":"ncclInt8","peer":1,"t":9})");
  EXPECT_EQ(to_line(finished_allreduce()),
            R"({"k":"end","comm":"0123456789abcdef","rank":3,"index":41,"kind":"coll","seq":17,)"
            R"("func":"AllReduce","count":1048576,"dtype":"ncclFloat32","peer":-1,"t":1000000123,)"
            R"("root":-1,"algo":"RING","proto":"SIMPLE","ch":16,"warps":16,"api":[100,200],)"
            R"("enq":[110,190],"gpu":[1700000000000000000,1700000000000050000],"seen":[300,400],)"
            R"("kch":16,"complete":true,"graph":true})");
  EXPECT_EQ(to_line(AliveLine{4}), R"({"k":"alive","t":4})");
  EXPECT_EQ(to_line(FinLine{1, 2, 3}), R"({"k":"fin","comm":"0000000000000001","rank":2,"t":3})");
  EXPECT_EQ(to_line(DropLine{1, 2, 3}), R"({"k":"drop","lines":1,"since":2,"t":3})");
}

TEST(RecordLine, OptionalFieldsAreNullAndComeBackEmpty) {
  EndLine l = finished_allreduce();
  l.op.seq.reset();
  l.api.reset();
  l.gpu.reset();
  l.seen.reset();
  const std::string text = to_line(l);
  EXPECT_NE(text.find(R"("seq":null)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("api":null,)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("gpu":null,"seen":null,)"), std::string::npos) << text;
  EXPECT_EQ(round_trip(l), RecordLine{l});
}

TEST(RecordLine, CommunicatorIdsKeepAll64Bits) {
  // Above 2^53 a double (what most JSON readers turn numbers into) loses the low bits.
  for (uint64_t id : {uint64_t{0}, (uint64_t{1} << 53) + 1, std::numeric_limits<uint64_t>::max()}) {
    CommLine l{id, 0, 1, 1, "", 0, "", ""};
    EXPECT_EQ(std::get<CommLine>(round_trip(l)).comm, id) << to_line(l);
  }
  EXPECT_NE(to_line(FinLine{~uint64_t{0}, 0, 0}).find(R"("comm":"ffffffffffffffff")"),
            std::string::npos);
}

TEST(RecordLine, OddStringsAreEscapedAndComeBackUnchanged) {
  const std::string odd[] = {
      "quote \" and backslash \\",
      std::string("nul \0 inside", 12),
      "newline\ncarriage\rtab\tbell\x07 escape\x1b unit\x1f",
      "\x7f delete",
      "UTF-8: \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80",
      "{\"k\":\"alive\",\"t\":1}\n",
      "",
  };
  for (const std::string& name : odd) {
    CommLine l{1, 0, 1, 1, name, 0, "", ""};
    const std::string text = to_line(l);
    EXPECT_EQ(text.find('\n'), std::string::npos) << "one record is one line: " << text;
    EXPECT_EQ(std::get<CommLine>(round_trip(l)).name, name) << text;
  }
  EXPECT_NE(to_line(CommLine{1, 0, 1, 1, "\x01", 0, "", ""}).find(R"("name":"\u0001")"),
            std::string::npos);
}

TEST(RecordLine, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  // A JSON reader rejects the whole line for one bad byte; the name is kept, the byte is not.
  const std::string bad[] = {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"};
  for (const std::string& b : bad) {
    CommLine l{1, 0, 1, 1, "a" + b + "z", 0, "", ""};
    const std::string name = std::get<CommLine>(round_trip(l)).name;
    EXPECT_EQ(name.front(), 'a') << to_line(l);
    EXPECT_EQ(name.back(), 'z') << to_line(l);
    EXPECT_NE(name.find("\xef\xbf\xbd"), std::string::npos) << to_line(l);
  }
}

TEST(RecordLine, AppendLineEndsEachLineWithANewline) {
  std::string out;
  append_line(out, AliveLine{1});
  append_line(out, AliveLine{2});
  EXPECT_EQ(out, "{\"k\":\"alive\",\"t\":1}\n{\"k\":\"alive\",\"t\":2}\n");
}

TEST(RecordLine, AppendLineDoesNotReallocateWhenTheStringHasRoom) {
  std::string out;
  out.reserve(1 << 16);
  const char* storage = out.data();
  const size_t capacity = out.capacity();
  EndLine long_names = finished_allreduce();
  long_names.op.func = std::string(300, 'f');
  for (int i = 0; i < 20; ++i) {
    for (const RecordLine& line : one_of_each())
      append_line(out, line);
    append_line(out, long_names);
  }
  EXPECT_EQ(out.data(), storage);
  EXPECT_EQ(out.capacity(), capacity);
  EXPECT_GT(out.size(), 1000u);
}

TEST(RecordLine, TextThatIsNotJsonIsNoLine) {
  // What a process killed in the middle of a write leaves as its last line.
  const std::string full = end_line_text();
  for (size_t cut : {size_t{0}, size_t{1}, size_t{10}, full.size() / 2, full.size() - 1}) {
    EXPECT_FALSE(parse_line(full.substr(0, cut)).has_value()) << full.substr(0, cut);
  }
  EXPECT_FALSE(parse_line("not json").has_value());
}

TEST(RecordLine, JsonThatIsNoRecordLineIsAnErrorNamingWhy) {
  EXPECT_NE(parse_error("[1,2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(parse_error(R"({"t":1})").find("without \"k\""), std::string::npos);
  EXPECT_NE(parse_error(R"({"k":5,"t":1})").find("\"k\" 5: must be a string"), std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"hello","t":1})").find("\"k\" \"hello\": must be proc"),
            std::string::npos);
}

TEST(RecordLine, EveryMissingKeyIsNamed) {
  for (const RecordLine& line : one_of_each()) {
    const std::string text = to_line(line);
    // Each "key": in the line, dropped along with its value in turn.
    for (size_t at = text.find(",\""); at != std::string::npos; at = text.find(",\"", at + 1)) {
      const size_t key_end = text.find("\":", at + 2);
      if (key_end == std::string::npos) continue;  // a comma inside a string value
      const std::string key = text.substr(at + 2, key_end - at - 2);
      if (key.find_first_of("\",{}[]") != std::string::npos) continue;
      // Optional in comm lines: the first recordings' lack them.
      if (std::holds_alternative<CommLine>(line) && (key == "dev" || key == "nccl")) continue;
      // The value ends at the next top-level comma (interval arrays hold one).
      size_t value_end = key_end + 2;
      int depth = 0;
      bool in_string = false;
      for (; value_end < text.size(); ++value_end) {
        const char c = text[value_end];
        if (in_string) {
          if (c == '\\') ++value_end;
          if (c == '"') in_string = false;
        } else if (c == '"') {
          in_string = true;
        } else if (c == '[') {
          ++depth;
        } else if (c == ']') {
          --depth;
        } else if ((c == ',' && depth == 0) || c == '}') {
          break;
        }
      }
      std::string without = text;
      without.erase(at, value_end - at);
      const std::string message = parse_error(without);
      EXPECT_NE(message.find("without \"" + key + "\""), std::string::npos)
          << without << " -> " << message;
    }
  }
}

TEST(RecordLine, WrongValuesAreErrorsNamingKeyAndValue) {
  const std::string end = end_line_text();
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {R"("count":1048576)", R"("count":-5)", R"("count" -5: must be at least 0)"},
      {R"("count":1048576)", R"("count":1.5)", R"("count" 1.5: must be an integer)"},
      {R"("count":1048576)", R"("count":"7")", R"("count" "7": must be an integer)"},
      {R"("index":41)", R"("index":-1)", R"("index" -1: must be at least 0)"},
      {R"("seq":17)", R"("seq":true)", R"("seq" true: must be an integer)"},
      {R"("rank":3)", R"("rank":-1)", R"("rank" -1: must be from 0 to)"},
      {R"("rank":3)", R"("rank":4294967296)", R"("rank" 4294967296: must be from 0 to)"},
      {R"("peer":-1)", R"("peer":-2)", R"("peer" -2: must be from -1 to)"},
      {R"("root":-1)", R"("root":null)", R"("root" null: must be an integer)"},
      {R"("t":1000000123)", R"("t":-3)", R"("t" -3: must be from 0 to)"},
      {R"("t":1000000123)", R"("t":18446744073709551615)",
       R"("t" 18446744073709551615: must be from 0 to)"},
      {R"("kind":"coll")", R"("kind":"p3p")", R"("kind" "p3p": must be "coll" or "p2p")"},
      {R"("func":"AllReduce")", R"("func":7)", R"("func" 7: must be a string)"},
      {R"("comm":"0123456789abcdef")", R"("comm":"0123456789ABCDEF")",
       R"("comm" "0123456789ABCDEF": must be 16 lowercase hexadecimal digits)"},
      {R"("comm":"0123456789abcdef")", R"("comm":"123")", R"("comm" "123": must be 16)"},
      {R"("comm":"0123456789abcdef")", R"("comm":81985529216486895)",
       R"("comm" 81985529216486895: must be 16)"},
      {R"("api":[100,200])", R"("api":[100])", R"("api" [100]: must be [start, end])"},
      {R"("api":[100,200])", R"("api":[200,100])", R"("api" [200,100]: ends before it starts)"},
      {R"("api":[100,200])", R"("api":[-1,200])", R"("api" -1: must be from 0 to)"},
      {R"("enq":[110,190])", R"("enq":null)", R"("enq" null: must be [start, end])"},
      {R"("gpu":[1700000000000000000,1700000000000050000])", R"("gpu":"x")",
       R"("gpu" "x": must be [start, end])"},
      {R"("seen":[300,400])", R"("seen":{})", R"("seen" {}: must be [start, end])"},
      {R"("kch":16)", R"("kch":-16)", R"("kch" -16: must be from 0 to)"},
      {R"("ch":16)", R"("ch":"16")", R"("ch" "16": must be an integer)"},
      {R"("complete":true)", R"("complete":1)", R"("complete" 1: must be true or false)"},
      {R"("graph":true)", R"("graph":"yes")", R"("graph" "yes": must be true or false)"},
  };
  for (const Case& c : cases) {
    const std::string message = parse_error(replaced(end, c.from, c.to));
    EXPECT_NE(message.find("end line: " + c.expected), std::string::npos)
        << c.to << " -> " << message;
  }
}

TEST(RecordLine, OtherLinesCheckTheirValuesToo) {
  EXPECT_NE(parse_error(R"({"k":"proc","v":2,"pid":1,"host":"h","realtime":1,"mono":1,"nccl":""})")
                .find(R"(proc line: "v" 2: this commtool reads version 1)"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"comm","comm":"0000000000000001","rank":0,"nranks":0,"nodes":1,)"
                        R"("name":"","t":0})")
                .find(R"(comm line: "nranks" 0: must be from 1 to)"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"drop","lines":-1,"since":0,"t":0})")
                .find(R"(drop line: "lines" -1: must be at least 0)"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"alive","t":"soon"})").find(R"(alive line: "t" "soon")"),
            std::string::npos);
}

TEST(RecordLine, AHugeBadValueIsShortenedInTheMessage) {
  const std::string message =
      parse_error(R"({"k":"alive","t":")" + std::string(10'000, 'x') + R"("})");
  EXPECT_LT(message.size(), 300u) << message;
}

TEST(RecordLine, KeysALaterVersionAddsAreIgnored) {
  EXPECT_EQ(parse_line(R"({"k":"alive","t":5,"extra":[1,2]})"), RecordLine{AliveLine{5}});
}

// ---- the fast reader (detail::parse_line_fast) against the slow one (detail::parse_line_slow)
// parse_line takes the fast reader's answer when it has one; the slow reader alone decides what
// is accepted and what every error says. So for any text the fast reader either declines or
// returns exactly the slow reader's value, and parse_line answers exactly as the slow reader.

namespace {

// What a reader made of a text: a line, no line (not JSON), or an error and its message.
struct Outcome {
  std::optional<RecordLine> line;
  std::string error;  // empty: no error
  bool operator==(const Outcome&) const = default;
};

template <class Read>
Outcome outcome_of(Read read, std::string_view text) {
  try {
    return Outcome{read(text), ""};
  } catch (const Error& e) {
    return Outcome{std::nullopt, e.what()};
  }
}

Outcome slow(std::string_view text) {
  return outcome_of(detail::parse_line_slow, text);
}

// The fast reader agrees with the slow one on `text`, and parse_line answers as the slow one.
// Returns whether the fast reader took the text.
bool expect_agreement(std::string_view text) {
  const Outcome reference = slow(text);
  const Outcome whole = outcome_of(parse_line, text);
  EXPECT_EQ(whole, reference) << text << "\n  parse_line: " << whole.error
                              << "\n  slow: " << reference.error;
  std::optional<RecordLine> fast;
  try {
    fast = detail::parse_line_fast(text);
  } catch (...) {
    ADD_FAILURE() << "the fast reader threw for: " << text;
    return false;
  }
  if (fast) {
    EXPECT_TRUE(reference.line.has_value())
        << "the fast reader took what the slow one refuses: " << text
        << "\n  slow: " << reference.error;
    EXPECT_EQ(fast, reference.line) << "the readers disagree on: " << text;
  }
  return fast.has_value();
}

// The fast reader takes `text` (a line as the plugin writes it) and agrees with the slow one.
void expect_fast(std::string_view text) {
  EXPECT_TRUE(expect_agreement(text)) << "the fast reader declined: " << text;
}

// The fast reader declines `text`, which the slow reader then answers alone.
void expect_declined(std::string_view text) {
  EXPECT_FALSE(expect_agreement(text)) << "the fast reader took: " << text;
}

constexpr uint64_t kMaxUint64 = std::numeric_limits<uint64_t>::max();
constexpr int kMaxInt = std::numeric_limits<int>::max();

// Every kind again, each number at the top (or bottom) of what the slow reader accepts.
std::vector<RecordLine> extremes() {
  std::vector<RecordLine> lines;
  lines.push_back(WorkLine{StreamId{4'294'967'295u, 4'294'967'295u}, 4'294'967'295u,
                           Interval{kMaxInt64, kMaxInt64}, true});
  lines.push_back(WaitLine{StreamId{0, 0}, 0, 0, 0});
  lines.push_back(EventLine{StreamId{4'294'967'295u, 1}, 4'294'967'295u, 4'294'967'295u});
  lines.push_back(ProcLine{1, kMaxInt64, "h", kMaxInt64, kMaxInt64, ""});
  lines.push_back(ProcLine{1, 0, "", 0, 0, "x"});
  lines.push_back(CommLine{kMaxUint64, kMaxInt, kMaxInt, kMaxInt, "", kMaxInt64, "", ""});
  lines.push_back(
      CommLine{0, 0, 1, 0, " ~!#$%&'()*+,-./:;<=>?@[]^_`{|}\x7f", 0, "GPU-0", "2.28.9"});
  StartLine top = allreduce();
  top.comm = kMaxUint64;
  top.rank = kMaxInt;
  top.index = kMaxUint64;
  top.seq = kMaxUint64;
  top.count = kMaxUint64;
  top.peer = kMaxInt;
  top.t_ns = kMaxInt64;
  lines.push_back(top);
  StartLine bottom = send();
  bottom.comm = 0;
  bottom.index = 0;
  bottom.seq = 0;
  bottom.count = 0;
  bottom.peer = -1;
  bottom.t_ns = 0;
  bottom.func = "";
  bottom.datatype = "";
  lines.push_back(bottom);
  EndLine end_top = finished_allreduce();
  end_top.op = top;
  end_top.root = kMaxInt;
  end_top.channels = kMaxInt;
  end_top.warps = kMaxInt;
  end_top.api = Interval{kMaxInt64, kMaxInt64};
  end_top.enqueue = Interval{0, kMaxInt64};
  end_top.gpu = Interval{kMaxInt64, kMaxInt64};
  end_top.seen = Interval{0, 0};
  end_top.kernel_channels = kMaxInt;
  end_top.complete = false;
  end_top.graph_captured = false;
  lines.push_back(end_top);
  EndLine end_bottom;
  end_bottom.op = bottom;
  end_bottom.root = -1;
  end_bottom.enqueue = Interval{0, 0};
  lines.push_back(end_bottom);
  lines.push_back(AliveLine{0});
  lines.push_back(FinLine{kMaxUint64, kMaxInt, kMaxInt64});
  lines.push_back(DropLine{kMaxUint64, kMaxInt64, kMaxInt64});
  lines.push_back(DropLine{0, 0, 0});
  return lines;
}

// `text` with `keys` (",\"key\":value...") added before its closing brace.
std::string with_keys(const std::string& text, const std::string& keys) {
  return text.substr(0, text.size() - 1) + keys + "}";
}

std::vector<std::string> plugin_lines() {
  std::vector<std::string> texts;
  for (const RecordLine& line : one_of_each())
    texts.push_back(to_line(line));
  for (const RecordLine& line : extremes())
    texts.push_back(to_line(line));
  return texts;
}

}  // namespace

TEST(RecordLineFastReader, TakesEveryLineThePluginWritesAndReadsItAsTheSlowReaderDoes) {
  for (const std::vector<RecordLine>& lines : {one_of_each(), extremes()}) {
    for (const RecordLine& line : lines) {
      const std::string text = to_line(line);
      expect_fast(text);
      EXPECT_EQ(detail::parse_line_fast(text), std::optional<RecordLine>(line)) << text;
    }
  }
  EndLine nulls = finished_allreduce();
  nulls.op.seq.reset();
  nulls.api.reset();
  nulls.gpu.reset();
  nulls.seen.reset();
  expect_fast(to_line(nulls));
}

TEST(RecordLineFastReader, TakesKeysInAnyOrderAfterK) {
  expect_fast(R"({"k":"fin","t":3,"rank":2,"comm":"0000000000000001"})");
  expect_fast(R"({"k":"drop","t":3,"since":2,"lines":1})");
  expect_fast(R"({"k":"start","t":9,"peer":1,"dtype":"ncclInt8","count":5,"func":"Send",)"
              R"("seq":null,"kind":"p2p","index":0,"rank":0,"comm":"0000000000000007"})");
}

TEST(RecordLineFastReader, LeavesValuesOutOfRangeToTheSlowReader) {
  const std::string end = end_line_text();
  const std::pair<std::string, std::string> cases[] = {
      {R"("count":1048576)", R"("count":-5)"},
      {R"("count":1048576)", R"("count":-0)"},
      {R"("count":1048576)", R"("count":18446744073709551616)"},
      {R"("count":1048576)", R"("count":99999999999999999999)"},
      {R"("index":41)", R"("index":-1)"},
      {R"("seq":17)", R"("seq":-1)"},
      {R"("seq":17)", R"("seq":18446744073709551616)"},
      {R"("rank":3)", R"("rank":-1)"},
      {R"("rank":3)", R"("rank":2147483648)"},
      {R"("rank":3)", R"("rank":-0)"},
      {R"("peer":-1)", R"("peer":-2)"},
      {R"("peer":-1)", R"("peer":-9223372036854775808)"},
      {R"("peer":-1)", R"("peer":-9223372036854775809)"},
      {R"("root":-1)", R"("root":-2147483649)"},
      {R"("t":1000000123)", R"("t":-3)"},
      {R"("t":1000000123)", R"("t":-0)"},
      {R"("t":1000000123)", R"("t":9223372036854775808)"},
      {R"("t":1000000123)", R"("t":18446744073709551615)"},
      {R"("kch":16)", R"("kch":-16)"},
      {R"("ch":16)", R"("ch":2147483648)"},
      {R"("warps":16)", R"("warps":-1)"},
      {R"("api":[100,200])", R"("api":[200,100])"},
      {R"("api":[100,200])", R"("api":[-1,200])"},
      {R"("api":[100,200])", R"("api":[100,9223372036854775808])"},
      {R"("enq":[110,190])", R"("enq":[110,109])"},
  };
  for (const auto& [from, to] : cases)
    expect_declined(replaced(end, from, to));
  expect_declined(R"({"k":"proc","v":2,"pid":1,"host":"h","realtime":1,"mono":1,"nccl":""})");
  expect_declined(R"({"k":"proc","v":0,"pid":1,"host":"h","realtime":1,"mono":1,"nccl":""})");
  expect_declined(R"({"k":"proc","v":1,"pid":-1,"host":"h","realtime":1,"mono":1,"nccl":""})");
  expect_declined(R"({"k":"comm","comm":"0000000000000001","rank":0,"nranks":0,"nodes":1,)"
                  R"("name":"","t":0})");
  expect_declined(R"({"k":"drop","lines":-1,"since":0,"t":0})");
  expect_declined(R"({"k":"drop","lines":1,"since":-1,"t":0})");
}

TEST(RecordLineFastReader, LeavesOtherShapesToTheSlowReader) {
  const std::string end = end_line_text();
  const std::pair<std::string, std::string> cases[] = {
      // numbers JSON or nlohmann write otherwise, or that are no JSON
      {R"("count":1048576)", R"("count":1.5)"},
      {R"("count":1048576)", R"("count":1048576.0)"},
      {R"("count":1048576)", R"("count":1e3)"},
      {R"("count":1048576)", R"("count":1E3)"},
      {R"("count":1048576)", R"("count":01)"},
      {R"("count":1048576)", R"("count":+1)"},
      {R"("count":1048576)", R"("count":-)"},
      {R"("count":1048576)", R"("count":0x10)"},
      {R"("t":1000000123)", R"("t":1000000123.)"},
      // other types
      {R"("count":1048576)", R"("count":"7")"},
      {R"("seq":17)", R"("seq":true)"},
      {R"("root":-1)", R"("root":null)"},
      {R"("func":"AllReduce")", R"("func":7)"},
      {R"("func":"AllReduce")", R"("func":null)"},
      {R"("kind":"coll")", R"("kind":"p3p")"},
      {R"("kind":"coll")", R"("kind":"COLL")"},
      {R"("complete":true)", R"("complete":1)"},
      {R"("complete":true)", R"("complete":True)"},
      {R"("graph":true)", R"("graph":tru)"},
      {R"("graph":true)", R"("graph":nul)"},
      // communicator ids
      {R"("comm":"0123456789abcdef")", R"("comm":"0123456789ABCDEF")"},
      {R"("comm":"0123456789abcdef")", R"("comm":"0123456789abcde")"},
      {R"("comm":"0123456789abcdef")", R"("comm":"0123456789abcdef0")"},
      {R"("comm":"0123456789abcdef")", R"("comm":"0123456789abcdeg")"},
      {R"("comm":"0123456789abcdef")", R"("comm":81985529216486895)"},
      // intervals
      {R"("api":[100,200])", R"("api":[100])"},
      {R"("api":[100,200])", R"("api":[100,200,300])"},
      {R"("api":[100,200])", R"("api":[])"},
      {R"("api":[100,200])", R"("api":[100,200.0])"},
      {R"("api":[100,200])", R"("api":[ 100,200])"},
      {R"("api":[100,200])", R"("api":[100, 200])"},
      {R"("api":[100,200])", R"("api":[100,200 ])"},
      {R"("api":[100,200])", R"("api":{"a":1})"},
      {R"("enq":[110,190])", R"("enq":null)"},
      {R"("gpu":[1700000000000000000,1700000000000050000])", R"("gpu":"x")"},
      // strings the plugin escapes, and bytes nlohmann checks
      {R"("func":"AllReduce")", R"("func":"All\"Reduce")"},
      {R"("func":"AllReduce")", R"("func":"\u0041llReduce")"},
      {R"("func":"AllReduce")", R"("func":"All\\Reduce")"},
      {R"("func":"AllReduce")", R"("func":"All\qReduce")"},
      {R"("func":"AllReduce")", "\"func\":\"All\tReduce\""},
      {R"("func":"AllReduce")", std::string(R"("func":"All)") + '\0' + "Reduce\""},
      {R"("func":"AllReduce")", "\"func\":\"All\xc3\xa9Reduce\""},
      {R"("func":"AllReduce")", "\"func\":\"All\xffReduce\""},
      {R"("func":"AllReduce")", "\"func\":\"All\xc0\xafReduce\""},
      {R"("func":"AllReduce")", R"("func":"AllReduce)"},
      // keys
      {R"("count":)", R"("\u0063ount":)"},
      {R"("count":)", R"("Count":)"},
      {R"("count":)", R"("count" :)"},
      {R"("count":)", R"("count": )"},
      {R"("count":)", R"(count:)"},
      {R"("count":)", R"("count"=)"},
      {R"(,"count":)", R"(,,"count":)"},
      {R"(,"count":)", R"( ,"count":)"},
  };
  for (const auto& [from, to] : cases)
    expect_declined(replaced(end, from, to));
}

TEST(RecordLineFastReader, LeavesMissingExtraAndRepeatedKeysToTheSlowReader) {
  for (const std::string& text : plugin_lines()) {
    // extra keys, which the slow reader ignores
    expect_declined(with_keys(text, R"(,"extra":[1,2])"));
    expect_declined(with_keys(text, R"(,"later":"x")"));
    // a key of another kind of line
    expect_declined(with_keys(text, R"(,"lines":1)"));
    expect_declined(with_keys(text, R"(,"seq":1)"));
    // "k" again, or not first
    expect_declined(with_keys(text, R"(,"k":"alive")"));
    const size_t first_comma = text.find(',');
    const std::string k = text.substr(1, first_comma - 1);
    expect_declined("{" + text.substr(first_comma + 1, text.size() - first_comma - 2) + "," + k +
                    "}");
  }
  // every key missing, and repeated with itself and with values of other shapes, in turn
  for (const std::string& text : plugin_lines()) {
    for (size_t at = text.find(",\""); at != std::string::npos; at = text.find(",\"", at + 1)) {
      const size_t key_end = text.find("\":", at + 2);
      if (key_end == std::string::npos) continue;
      const std::string key = text.substr(at + 1, key_end + 2 - at - 1);  // "key":
      if (key.find_first_of(",{}[]") != std::string::npos) continue;
      // No value of the plugin's lines holds ',"': the key and its value end at the next one.
      const size_t next = std::min(text.find(",\"", at + 1), text.size() - 1);
      std::string without = text;
      without.erase(at, next - at);
      expect_declined(without);
      expect_declined(with_keys(text, text.substr(at, next - at)));
      expect_declined(with_keys(text, "," + key + "null"));
      expect_declined(with_keys(text, "," + key + "0"));
      expect_declined(with_keys(text, "," + key + "\"0000000000000009\""));
      expect_declined(with_keys(text, "," + key + "[1,2]"));
    }
  }
  // which value nlohmann keeps for a repeated key is the slow reader's business; this pins it
  EXPECT_EQ(parse_line(R"({"k":"alive","t":5,"t":6})"), RecordLine{AliveLine{6}});
}

TEST(RecordLineFastReader, LeavesWhitespaceTrailingBytesAndCutLinesToTheSlowReader) {
  for (const std::string& text : plugin_lines()) {
    for (const char* tail : {" ", "\r", "\n", "\t", "x", "}", ",", "{}", "\0"}) {
      expect_declined(text + std::string(tail, std::max<size_t>(1, std::strlen(tail))));
    }
    expect_declined(" " + text);
    expect_declined("\xef\xbb\xbf" + text);  // a UTF-8 byte order mark, which nlohmann skips
    expect_declined(replaced(text, ":", ": "));
    expect_declined(replaced(text, "{", "{ "));
    for (size_t cut = 0; cut < text.size(); ++cut)
      expect_declined(text.substr(0, cut));
  }
  for (const char* text : {"", "{}", "[]", "null", "1", R"("k")", R"({"k":"alive"})",
                           R"({"k":5,"t":1})", R"({"k":"hello","t":1})", R"({"t":1})",
                           R"({"k":"alive","t":1)", R"({"k":"alive","t":1}})"}) {
    expect_declined(text);
  }
}

TEST(RecordLineFastReader, AgreesWithTheSlowReaderOnEveryOneByteChangeOfThePluginsLines) {
  // A small deterministic fuzzer: each byte of each line deleted, doubled, or replaced by each of
  // the bytes that matter to either reader. tests/fuzz/fuzz_record_lines.cpp goes further.
  const std::string bytes =
      std::string(" \t\r\n\"\\,:{}[]-+.eE0189afnlstux\x7f\x80\xc3\xff") + '\0';
  size_t taken = 0;
  size_t checked = 0;
  for (const std::string& text : plugin_lines()) {
    for (size_t at = 0; at < text.size(); ++at) {
      std::string changed = text;
      changed.erase(at, 1);
      taken += expect_agreement(changed);
      changed = text;
      changed.insert(at, 1, text[at]);
      taken += expect_agreement(changed);
      checked += 2;
      for (char b : bytes) {
        if (b == text[at]) continue;
        changed = text;
        changed[at] = b;
        taken += expect_agreement(changed);
        ++checked;
      }
    }
  }
  // Most changes leave a line the plugin could have written (a digit for a digit): the fast
  // reader must take many of them, or this test would only exercise the slow one.
  EXPECT_GT(taken, checked / 20) << taken << " of " << checked;
}
