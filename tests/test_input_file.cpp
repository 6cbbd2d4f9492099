// Reading a file a user names: only a regular file, only up to a size, and what it holds.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/utf8.hpp"

namespace fs = std::filesystem;
using commtool::Error;
using commtool::ExitCode;
using commtool::files::read_input_file;

namespace {

// The usage error for `path`, or "" when it was read.
std::string refusal(const std::string& path, uint64_t max_bytes = commtool::files::kMaxInputBytes) {
  try {
    read_input_file(path, max_bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage) << e.what();
    return e.what();
  }
  return "";
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("commtool-input-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(InputFile, ARegularFileIsReadWhole) {
  TempDir dir;
  const fs::path f = dir.path / "counts.csv";
  std::ofstream(f) << "expert,count\n0,1\n";
  EXPECT_EQ(read_input_file(f.string()), "expert,count\n0,1\n");
  EXPECT_EQ(refusal(f.string()), "");
}

TEST(InputFile, AnEndlessCharacterDeviceIsRefusedBeforeReading) {
  EXPECT_EQ(refusal("/dev/zero"), "/dev/zero: is a character device; give a regular file");
}

TEST(InputFile, ADirectoryIsRefused) {
  TempDir dir;
  EXPECT_EQ(refusal(dir.path.string()),
            dir.path.string() + ": is a directory; give a regular file");
}

TEST(InputFile, APipeWithoutAWriterIsRefusedWithoutHanging) {
  TempDir dir;
  const fs::path fifo = dir.path / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal(fifo.string()), fifo.string() + ": is a pipe (FIFO); give a regular file");
}

TEST(InputFile, AFileOverTheLimitIsRefusedSayingBothSizes) {
  TempDir dir;
  const fs::path f = dir.path / "big.json";
  std::ofstream(f) << std::string(101, 'x');
  EXPECT_EQ(refusal(f.string(), 100),
            f.string() + ": 101 bytes, more than the 100 bytes commtool reads");
  EXPECT_EQ(refusal(f.string(), 101), "");
}

TEST(InputFile, AMissingFileSaysWhy) {
  EXPECT_EQ(refusal("/nonexistent-commtool/x.json"),
            "/nonexistent-commtool/x.json: cannot open: No such file or directory");
}

}  // namespace

namespace {

TEST(BoundedJson, NestingFarBeyondAnyFormatIsRefusedWithoutCrashing) {
  // 100,000 levels: printing or freeing such a value recursively overflows the stack.
  const std::string deep =
      "{\"layers\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  try {
    commtool::files::parse_json_bounded(deep, "deep.json");
    FAIL() << "accepted 100,000 levels";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_EQ(std::string(e.what()),
              "deep.json: JSON nested deeper than 64 levels; commtool's formats need far fewer");
  }
}

TEST(BoundedJson, OrdinaryDocumentsParseAsBefore) {
  const std::string text = R"({"layers": [[1, 2], [3]], "topk": 2})";
  EXPECT_EQ(commtool::files::parse_json_bounded(text, "x"), nlohmann::json::parse(text));
  EXPECT_THROW(commtool::files::parse_json_bounded("{\"a\": ", "x"), nlohmann::json::parse_error);
}

}  // namespace

namespace {

TEST(Excerpt, ShortPrintableTextIsQuotedAsItIs) {
  EXPECT_EQ(commtool::excerpt("ninety-six"), "ninety-six");
}

TEST(Excerpt, LongTextIsCutAndSaysHowLongItWas) {
  EXPECT_EQ(commtool::excerpt(std::string(200000, '['), 10), "[[[[[[[[[[... (200000 bytes)");
}

TEST(Excerpt, ControlCharactersCannotReachTheTerminalRaw) {
  EXPECT_EQ(commtool::excerpt("a\x1b[2Jb\n"), "a\\x1b[2Jb\\x0a");
  EXPECT_EQ(commtool::excerpt("\xff"), "\\xff");
}

// The one decoder behind the message escaper and the plugin's JSON lines.
TEST(Utf8Decode, TakesOnlyCompleteShortestFormsOfRealCodePoints) {
  using commtool::utf8::decode;
  EXPECT_EQ(decode("a", 0).length, 1u);
  EXPECT_EQ(decode("\xc3\xa9", 0).length, 2u);  // é
  EXPECT_EQ(decode("\xc3\xa9", 0).code_point, 0xe9u);
  EXPECT_EQ(decode("\xf0\x9f\x98\x80", 0).code_point, 0x1f600u);  // an emoji, 4 bytes
  EXPECT_EQ(decode("\xc0\xaf", 0).length, 0u);                    // overlong '/'
  EXPECT_EQ(decode("\xe0\x80\xaf", 0).length, 0u);                // overlong, 3 bytes
  EXPECT_EQ(decode("\xed\xa0\x80", 0).length, 0u);                // a surrogate
  EXPECT_EQ(decode("\xf4\x90\x80\x80", 0).length, 0u);            // past U+10FFFF
  EXPECT_EQ(decode("\xe2\x82", 0).length, 0u);                    // cut
  EXPECT_EQ(decode("\xe2\x28\xa1", 0).length, 0u);                // a bad continuation
  EXPECT_EQ(decode("\x80", 0).length, 0u);                        // a stray continuation
  EXPECT_EQ(decode("x\xc2\x85", 1).code_point, 0x85u);  // C1: decoded; the escaper refuses it
}

TEST(PrintableMessage, KeepsLineEndsAndUtf8AndEscapesEveryOtherControl) {
  using commtool::printable_message;
  EXPECT_EQ(printable_message("two\nlines, caf\xc3\xa9"), "two\nlines, caf\xc3\xa9");
  EXPECT_EQ(printable_message("a\x1b[31mb\rc\x7f"), "a\\x1b[31mb\\x0dc\\x7f");
  EXPECT_EQ(printable_message("one\nline", /*one_line=*/true), "one\\x0aline");
  // A C1 control (U+009B is CSI to many terminals), a lone continuation byte, an overlong
  // '/', a surrogate and a sequence cut off at the end are no printable UTF-8.
  EXPECT_EQ(printable_message("\xc2\x9b"), "\\xc2\\x9b");
  EXPECT_EQ(printable_message("\x80"), "\\x80");
  EXPECT_EQ(printable_message("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");
  EXPECT_EQ(printable_message("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(printable_message("end\xe2\x82"), "end\\xe2\\x82");
}

TEST(PrintableMessage, CutsAnOverlongWordAndSaysHowLongItWas) {
  using commtool::printable_message;
  const std::string word(100000, 'x');
  EXPECT_EQ(printable_message("--devices " + word + " is bad"),
            "--devices " + std::string(80, 'x') + "... (100000 bytes) is bad");
  // A word of kMaxWordBytes is whole; escapes count once per byte of the message.
  const std::string longest(commtool::kMaxWordBytes, 'y');
  EXPECT_EQ(printable_message(longest), longest);
  EXPECT_EQ(printable_message(std::string(200, '\x1b')).size(),
            std::string("... (200 bytes)").size() + 80);
  // Never in the middle of a UTF-8 character.
  std::string euros;
  for (int i = 0; i < 100; ++i)
    euros += "\xe2\x82\xac";
  const std::string cut = printable_message(euros);
  EXPECT_EQ(cut, euros.substr(0, 78) + "... (300 bytes)");
}

}  // namespace

namespace {

TEST(BoundedJson, SixtyFourLevelsAreReadAndSixtyFiveAreNot) {
  const auto nested = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') +
           std::string(static_cast<size_t>(levels), ']');
  };
  EXPECT_NO_THROW(commtool::files::parse_json_bounded(nested(64), "x"));
  EXPECT_THROW(commtool::files::parse_json_bounded(nested(65), "x"), Error);
  // Brackets inside strings, escaped quotes included, are text, not nesting.
  const std::string text = "{\"a\": \"" + nested(100) + "\\\"" + nested(100) + "\"}";
  EXPECT_EQ(commtool::files::parse_json_bounded(text, "x").at("a").get<std::string>().size(), 401u);
}

}  // namespace

namespace {

// An internal error (exit 1) before: nlohmann throws out_of_range, which no caller caught.
TEST(BoundedJson, ANumberNoDoubleHoldsIsAUsageErrorNamingTheSource) {
  try {
    commtool::files::parse_json_bounded("{\"layers\": [[1e999]]}", "r.json");
    FAIL() << "accepted 1e999";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_EQ(std::string(e.what()).rfind("r.json: not valid JSON: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("number overflow parsing '1e999'"), std::string::npos);
  }
}

// Found by tests/fuzz/fuzz_routing.cpp: a number beyond a double's range made nlohmann throw
// out_of_range, which no reader catches (they catch parse_error), so `--routing` and `report`
// ended in std::terminate. It is bad input like any other, named with its file.
TEST(BoundedJson, NumberBeyondADoublesRangeIsBadInputNamingTheFile) {
  for (const char* text : {R"({"counts": [1, 1e400]})", R"([-4e999])"}) {
    try {
      commtool::files::parse_json_bounded(text, "big.json");
      FAIL() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      EXPECT_TRUE(std::string(e.what()).starts_with("big.json: not valid JSON: ")) << e.what();
      EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
    }
  }
}

}  // namespace

// A file another process appends to: each read returns what came since the last one.
TEST(AppendedFile, EachReadReturnsWhatWasAppendedSinceTheLast) {
  TempDir dir;
  const fs::path f = dir.path / "p.jsonl";
  std::ofstream(f) << "one\ntw";
  commtool::files::AppendedFile file(f.string());
  std::string got;
  EXPECT_EQ(file.read_more(got, 1024), 6u);
  EXPECT_EQ(got, "one\ntw");
  EXPECT_EQ(file.read_more(got, 1024), 0u);
  std::ofstream(f, std::ios::app) << "o\nthree\n";
  EXPECT_EQ(file.read_more(got, 3), 3u);  // at most the chunk asked for
  EXPECT_EQ(file.read_more(got, 1024), 5u);
  EXPECT_EQ(got, "one\ntwo\nthree\n");
  EXPECT_EQ(file.offset(), 14u);
}

TEST(AppendedFile, ATruncatedFileIsRefusedNamingBothSizes) {
  TempDir dir;
  const fs::path f = dir.path / "p.jsonl";
  std::ofstream(f) << "0123456789";
  commtool::files::AppendedFile file(f.string());
  std::string got;
  file.read_more(got, 1024);
  std::ofstream(f, std::ios::trunc) << "01";
  try {
    file.read_more(got, 1024);
    FAIL() << "a truncated file was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              f.string() +
                  ": 2 bytes, fewer than the 10 already read: the file was truncated or "
                  "replaced");
  }
}

TEST(AppendedFile, AFileGrownPastTheLimitOrReplacedByADirectoryIsRefused) {
  TempDir dir;
  const fs::path f = dir.path / "p.jsonl";
  std::ofstream(f) << "0123";
  commtool::files::AppendedFile file(f.string(), 8);
  std::string got;
  EXPECT_EQ(file.read_more(got, 1024), 4u);
  std::ofstream(f, std::ios::app) << "456789";
  EXPECT_THROW(file.read_more(got, 1024), Error);
  fs::remove(f);
  fs::create_directory(f);
  try {
    file.read_more(got, 1024);
    FAIL() << "a directory was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), f.string() + ": is a directory; give a regular file");
  }
}
