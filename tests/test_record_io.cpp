// The saved-run format's record lines: what serialize_records writes, what parse_records reads
// back, and the errors naming file, line and field for what it refuses.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "probes/base/error.hpp"
#include "record_io_test_support.hpp"
#include "tracing/trace/record_io.hpp"

using namespace commtool::tracing;
using namespace record_io_test;
using commtool::Error;
using commtool::ExitCode;

namespace {

constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();

RecordSet round_trip(const RecordSet& r) {
  return parse_records(serialize_records(r), "test");
}

// The message of the usage error parsing `text` throws; fails the test if it throws none.
std::string parse_error(const std::string& text) {
  try {
    parse_records(text, "rank0.txt");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return "";
}

}  // namespace

// ---- record lines ---------------------------------------------------------------------------

TEST(RecordIo, FirstLineNamesTheFormatAndVersion) {
  EXPECT_EQ(serialize_records({}), "commtool-records 1\n");
}

TEST(RecordIo, EmptyRecordSetRoundTrips) {
  EXPECT_TRUE(same(round_trip({}), RecordSet{}));
}

TEST(RecordIo, GpuWorkKeepsItsKind) {
  RecordSet r;
  r.gpu.push_back({GpuWorkKind::kKernel, 1, 2, 3, 4, "ncclDevKernel_AllReduce"});
  r.gpu.push_back({GpuWorkKind::kMemcpy, 5, 6, 7, 8, "memcpy DtoD"});
  r.gpu.push_back({GpuWorkKind::kMemset, 9, 10, 11, 12, "memset"});
  EXPECT_TRUE(same(round_trip(r).gpu, r.gpu));
}

TEST(RecordIo, ApiCallRoundTrips) {
  RecordSet r;
  r.api.push_back({42, 7, 110, 140, "cuLaunchKernelEx"});
  EXPECT_TRUE(same(round_trip(r).api, r.api));
}

TEST(RecordIo, StreamWaitRoundTrips) {
  RecordSet r;
  r.stream_waits.push_back({2, 11, 105, 108});
  EXPECT_TRUE(same(round_trip(r).stream_waits, r.stream_waits));
}

TEST(RecordIo, EventCompletionRoundTrips) {
  RecordSet r;
  r.events.push_back({11, 1, 1000});
  EXPECT_TRUE(same(round_trip(r).events, r.events));
}

TEST(RecordIo, OperationMarkKeepsEveryFieldAndEachCompletionFact) {
  RecordSet r;
  r.operations = {mark(1, -1, false), mark(2, 0, true), mark(3, 1, false)};
  EXPECT_TRUE(same(round_trip(r).operations, r.operations));
}

TEST(RecordIo, HostRangeKeepsADomainAndNameWithSpaces) {
  RecordSet r;
  r.ranges.push_back({3, 10, 20, "my domain 2", "ncclAllReduce step 1"});
  EXPECT_TRUE(same(round_trip(r).ranges, r.ranges));
}

TEST(RecordIo, EmptyDomainAndEmptyNamesSurvive) {
  RecordSet r;
  r.ranges.push_back({3, 10, 20, "", ""});
  r.gpu.push_back({GpuWorkKind::kKernel, 1, 2, 3, 4, ""});
  r.api.push_back({1, 2, 3, 4, ""});
  RecordSet back = round_trip(r);
  EXPECT_TRUE(same(back.ranges, r.ranges) && same(back.gpu, r.gpu) && same(back.api, r.api));
}

TEST(RecordIo, NamesKeepLeadingTrailingAndRepeatedSpaces) {
  RecordSet r;
  r.api.push_back({1, 2, 3, 4, "  two  spaces  "});
  EXPECT_EQ(round_trip(r).api.at(0).name, "  two  spaces  ");
}

TEST(RecordIo, LargestValuesOfEveryWidthSurvive) {
  RecordSet r;
  r.gpu.push_back({GpuWorkKind::kMemset, kMax32, kMax32, kMax64, kMax64, "x"});
  OperationMark o = mark(kMax64, 1, true);
  o.thread = o.nccl_stream = o.end_event = kMax32;
  o.enqueue_start_ns = o.enqueue_end_ns = o.wait_start_ns = o.wait_end_ns = kMax64;
  r.operations.push_back(o);
  r.ranges.push_back({kMax32, kMax64, kMax64, "d", "n"});
  r.dropped_records = kMax64;
  EXPECT_TRUE(same(round_trip(r), r));
}

TEST(RecordIo, DroppedRecordCountRoundTrips) {
  RecordSet r;
  r.dropped_records = 17;
  EXPECT_EQ(round_trip(r).dropped_records, 17u);
}

TEST(RecordIo, SeveralDroppedLinesAddUp) {
  EXPECT_EQ(parse_records("commtool-records 1\nd 2\nd 5\n", "t").dropped_records, 7u);
}

TEST(RecordIo, NewlinesInNamesBecomeSpaces) {
  RecordSet r;
  r.api.push_back({1, 2, 3, 4, "line one\nline two\r"});
  r.ranges.push_back({1, 2, 3, "dom\nain", "na\nme"});
  RecordSet back = round_trip(r);
  EXPECT_EQ(back.api.at(0).name, "line one line two ");
  EXPECT_EQ(back.ranges.at(0).domain, "dom ain");
}

TEST(RecordIo, EveryKindTogetherRoundTrips) {
  RecordSet r;
  r.gpu.push_back({GpuWorkKind::kKernel, 1, 2, 3, 4, "k"});
  r.api.push_back({2, 7, 1, 2, "cudaLaunchKernel"});
  r.stream_waits.push_back({1, 9, 1, 2});
  r.events.push_back({9, 1, 5});
  r.operations.push_back(mark(1, -1, false));
  r.ranges.push_back({7, 1, 2, "NCCL", "ncclAllReduce"});
  r.dropped_records = 3;
  EXPECT_TRUE(same(round_trip(r), r));
}

TEST(RecordIo, WindowsLineEndingsAndBlankLinesAreAccepted) {
  RecordSet r = parse_records("commtool-records 1\r\n\r\na 1 2 3 4 name\r\n\ne 1 2 3\r\n", "t");
  EXPECT_EQ(r.api.at(0).name, "name");
  EXPECT_EQ(r.events.at(0).device_ns, 3u);
}

// ---- record errors ----------------------------------------------------------------------------

TEST(RecordIoErrors, AnotherFormatIsRejectedOnLineOne) {
  EXPECT_EQ(parse_error("{\"json\": 1}\n"),
            "rank0.txt:1: header: \"{\"json\":\" is not a records file; expected "
            "\"commtool-records 1\"");
}

TEST(RecordIoErrors, AnotherVersionSaysWhichOneThisBuildReads) {
  EXPECT_EQ(parse_error("commtool-records 2\n"),
            "rank0.txt:1: header version: 2 is not supported; this build reads version 1");
}

TEST(RecordIoErrors, EmptyTextIsNotARecordsFile) {
  EXPECT_NE(parse_error("").find("rank0.txt:1: header: the text is empty"), std::string::npos);
}

TEST(RecordIoErrors, UnknownKindNamesLineAndTag) {
  EXPECT_EQ(parse_error("commtool-records 1\ne 1 2 3\nx 1 2\n"),
            "rank0.txt:3: record kind: \"x\" is unknown; expected one of k m s a w e o r d");
}

TEST(RecordIoErrors, AWordIsNotAKindTag) {
  EXPECT_NE(parse_error("commtool-records 1\nkernel 1 2 3 4 n\n").find("\"kernel\" is unknown"),
            std::string::npos);
}

TEST(RecordIoErrors, MissingFieldIsNamed) {
  EXPECT_EQ(parse_error("commtool-records 1\ne 11 1\n"), "rank0.txt:2: event device_ns: missing");
}

TEST(RecordIoErrors, MissingOperationFieldIsNamed) {
  EXPECT_EQ(parse_error("commtool-records 1\no 1 2 3 4 5 6 7 8 9 10 11 0\n"),
            "rank0.txt:2: operation complete_at_wait_return: missing");
}

TEST(RecordIoErrors, NonNumericFieldIsNamedWithItsText) {
  EXPECT_EQ(parse_error("commtool-records 1\nw 2 11 105x 108\n"),
            "rank0.txt:2: stream-wait start_ns: \"105x\" is not a decimal number");
}

TEST(RecordIoErrors, NegativeValueInAnUnsignedField) {
  EXPECT_EQ(parse_error("commtool-records 1\nk -1 2 3 4 n\n"),
            "rank0.txt:2: kernel stream: \"-1\" is not a decimal number");
}

TEST(RecordIoErrors, ValueTooWideForItsFieldIsOutOfRange) {
  EXPECT_EQ(parse_error("commtool-records 1\na 4294967296 1 2 3 n\n"),
            "rank0.txt:2: api correlation: \"4294967296\" is out of range");
}

TEST(RecordIoErrors, TrailingTextAfterTheLastFieldIsNamed) {
  EXPECT_EQ(parse_error("commtool-records 1\ne 11 1 1000 extra\n"),
            "rank0.txt:2: event end of line: unexpected text \"extra\"");
}

TEST(RecordIoErrors, FlagOutsideItsValuesIsNamed) {
  EXPECT_EQ(parse_error("commtool-records 1\no 1 2 3 4 5 6 7 8 9 10 11 2 -1\n"),
            "rank0.txt:2: operation wait_polls: 2 is not one of 0..1");
}

TEST(RecordIoErrors, DomainLongerThanTheLineIsNamed) {
  EXPECT_EQ(parse_error("commtool-records 1\nr 1 2 3 40 NCCL x\n"),
            "rank0.txt:2: range domain: the line ends inside its 40 bytes");
}

TEST(RecordIoErrors, DroppedCountsThatOverflowTogetherAreAnError) {
  EXPECT_EQ(parse_error("commtool-records 1\nd 18446744073709551615\nd 1\n"),
            "rank0.txt:3: dropped count: the total overflows 64 bits");
}

TEST(RecordIoErrors, LineNumbersCountBlankLines) {
  EXPECT_EQ(parse_error("commtool-records 1\n\ne 1 2 3\n\ne 1 x 3\n").substr(0, 12),
            "rank0.txt:5:");
}

TEST(RecordIoErrors, AnIntervalThatEndsBeforeItStartsIsNamedWithWhatIsAccepted) {
  EXPECT_EQ(parse_error("commtool-records 1\nk 1 2 300 200 kernel\n"),
            "rank0.txt:2: kernel end_ns: 200 is before start_ns 300: an interval cannot end "
            "before it starts; accepted: end_ns >= start_ns");
  EXPECT_NE(parse_error("commtool-records 1\na 1 2 3 2 call\n").find("api end_ns: 2 is before"),
            std::string::npos);
  EXPECT_NE(parse_error("commtool-records 1\nw 1 2 3 2\n").find("stream-wait end_ns"),
            std::string::npos);
  EXPECT_NE(parse_error("commtool-records 1\nr 1 5 4 0  n\n").find("range end_ns"),
            std::string::npos);
  EXPECT_NE(parse_error("commtool-records 1\no 1 2 3 4 5 6 7 9 8 10 11 0 1\n")
                .find("operation enqueue_end_ns: 8 is before enqueue_start_ns 9"),
            std::string::npos);
  EXPECT_NE(parse_error("commtool-records 1\no 1 2 3 4 5 6 7 8 9 11 10 0 1\n")
                .find("operation wait_end_ns: 10 is before wait_start_ns 11"),
            std::string::npos);
}

TEST(RecordIoErrors, ADuplicatedRecordOfEachKindNamesBothLines) {
  const char* lines[] = {"o 1 2 3 4 5 6 7 8 9 10 11 0 1",
                         "a 1 2 3 4 call",
                         "k 1 2 3 4 kernel",
                         "w 1 2 3 4",
                         "e 1 2 3",
                         "r 1 2 3 0  name"};
  for (const char* line : lines) {
    const std::string text = fmt::format("commtool-records 1\n{}\ne 9 9 9\n{}\n", line, line);
    EXPECT_NE(parse_error(text).find(":4: "), std::string::npos) << text << parse_error(text);
    EXPECT_NE(parse_error(text).find("the same record as line 2;"), std::string::npos) << text;
  }
  EXPECT_EQ(parse_error("commtool-records 1\no 7 2 3 4 5 6 7 8 9 10 11 0 1\n"
                        "o 7 2 3 4 5 6 7 80 90 100 110 0 1\n"),
            "rank0.txt:3: operation seq 7: the same record as line 2; each record appears once (a "
            "file joined or copied twice?)");
}

TEST(RecordIo, RecordsAlikeButForTheirTimeAreNotDuplicates) {
  // An event re-recorded every iteration under one id; work of one call on one stream.
  RecordSet r =
      parse_records("commtool-records 1\ne 1 2 3\ne 1 2 4\nk 1 2 3 4 a\nk 1 2 5 6 a\n", "t");
  EXPECT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.gpu.size(), 2u);
}

TEST(RecordIo, ALastLineWithoutItsEndIsLeftOutAndNamedWhenAsked) {
  size_t cut = 99;
  RecordSet r = parse_records("commtool-records 1\ne 1 2 3\n\ne 1 2 4", "t", &cut);
  EXPECT_EQ(cut, 4u);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].device_ns, 3u);
  // Cut so that what is left still parses: left out all the same.
  r = parse_records("commtool-records 1\ne 1 2 3\ne 1 2 4", "t", &cut);
  EXPECT_EQ(cut, 3u);
  EXPECT_EQ(r.events.size(), 1u);
  // Cut so that it would not parse: no error.
  r = parse_records("commtool-records 1\ne 1 2 3\nk 1 2 3", "t", &cut);
  EXPECT_EQ(cut, 3u);
  // A whole file.
  r = parse_records("commtool-records 1\ne 1 2 3\n", "t", &cut);
  EXPECT_EQ(cut, 0u);
  EXPECT_EQ(r.events.size(), 1u);
  r = parse_records("commtool-records 1", "t", &cut);
  EXPECT_EQ(cut, 0u);
}
