// The record lines' fast reader (detail::parse_line_fast) against the slow one
// (detail::parse_line_slow): on the plugin's lines, on others, and on every one-byte change.
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
#include "record_line_test_support.hpp"
#include "tracing/profiler/record_line.hpp"

using namespace commtool::nccl_profiler;
using namespace record_line_test;
using commtool::Error;

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
  lines.push_back(
      CommLine{kMaxUint64, kMaxCommRanks - 1, kMaxCommRanks, kMaxInt, "", kMaxInt64, "", ""});
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
  expect_declined(R"({"k":"comm","comm":"0000000000000001","rank":0,"nranks":4194305,)"
                  R"("nodes":1,"name":"","t":0})");
  expect_declined(R"({"k":"comm","comm":"0000000000000001","rank":2,"nranks":2,"nodes":1,)"
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
