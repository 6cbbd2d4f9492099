// The line format of `commtool record`: what the profiler plugin writes and its readers parse.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "probes/base/error.hpp"
#include "record_line_test_support.hpp"
#include "tracing/profiler/record_line.hpp"

using namespace commtool::nccl_profiler;
using namespace record_line_test;
using commtool::Error;
using commtool::ExitCode;

namespace {

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

// A 2 kB recording claiming 2^31 ranks once made report allocate 8 GB; a rank beyond its
// communicator's count halved busbw.
TEST(RecordLine, ACommunicatorsRankCountIsBoundedAndItsRankInsideIt) {
  EXPECT_NE(parse_error(R"({"k":"comm","comm":"0000000000000001","rank":0,)"
                        R"("nranks":2147483647,"nodes":1,"name":"","t":0})")
                .find(R"(comm line: "nranks" 2147483647: must be from 1 to 4194304)"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"k":"comm","comm":"0000000000000001","rank":2,"nranks":2,)"
                        R"("nodes":1,"name":"","t":0})")
                .find(R"(comm line: "rank" 2: must be from 0 to 1)"),
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
