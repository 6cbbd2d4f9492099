// The saved-run format: record lines, run.json, and the directory save_run writes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <tuple>

#include "probes/base/error.hpp"
#include "tracing/trace/record_io.hpp"

using namespace commtool::tracing;
using commtool::Error;
using commtool::ExitCode;
namespace fs = std::filesystem;
namespace nccl_profiler = commtool::nccl_profiler;

namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();

auto fields(const GpuWork& w) {
  return std::tie(w.kind, w.stream, w.correlation, w.start_ns, w.end_ns, w.name);
}
auto fields(const ApiCall& a) {
  return std::tie(a.correlation, a.thread, a.start_ns, a.end_ns, a.name);
}
auto fields(const StreamWaitCall& w) {
  return std::tie(w.stream, w.event, w.start_ns, w.end_ns);
}
auto fields(const EventCompletion& e) {
  return std::tie(e.event, e.stream, e.device_ns);
}
auto fields(const OperationMark& o) {
  return std::tie(o.seq, o.thread, o.producer_stream, o.nccl_stream, o.consumer_stream,
                  o.input_ready_event, o.end_event, o.enqueue_start_ns, o.enqueue_end_ns,
                  o.wait_start_ns, o.wait_end_ns, o.wait_polls, o.complete_at_wait_return);
}
auto fields(const HostRange& h) {
  return std::tie(h.thread, h.start_ns, h.end_ns, h.domain, h.name);
}

auto fields(const OperationSample& s) {
  return std::tie(s.seq, s.bytes, s.mode, s.poll_ms, s.traced, s.time_us, s.host_call_us,
                  s.wrong_elements);
}
auto fields(const StreamScopeSample& s) {
  return std::tie(s.seq, s.mode, s.poll_ms, s.host_wait_us, s.complete_at_wait_return,
                  s.b_before_a_us, s.wrong_elements);
}
auto fields(const nccl_profiler::CollectiveRecord& c) {
  return std::tie(c.comm_id, c.rank, c.nranks, c.seq, c.func, c.count, c.datatype, c.algo, c.proto,
                  c.channels, c.warps, c.start_ns, c.stop_ns);
}

// Field by field, so a field the format forgets fails here.
template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (fields(a[i]) != fields(b[i])) return false;
  }
  return true;
}

bool same(const RecordSet& a, const RecordSet& b) {
  return same(a.gpu, b.gpu) && same(a.api, b.api) && same(a.stream_waits, b.stream_waits) &&
         same(a.events, b.events) && same(a.operations, b.operations) && same(a.ranges, b.ranges) &&
         a.dropped_records == b.dropped_records;
}

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

OperationMark mark(uint64_t seq, int complete, bool polls) {
  OperationMark o;
  o.seq = seq;
  o.thread = 2;
  o.producer_stream = 3;
  o.nccl_stream = 4;
  o.consumer_stream = 5;
  o.input_ready_event = 6;
  o.end_event = 7;
  o.enqueue_start_ns = 8;
  o.enqueue_end_ns = 9;
  o.wait_start_ns = 10;
  o.wait_end_ns = 11;
  o.wait_polls = polls;
  o.complete_at_wait_return = complete;
  return o;
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

// ---- JSON ---------------------------------------------------------------------------------------

namespace {

RankRun sample_rank() {
  RankRun r;
  r.rank = 1;
  r.device = 3;
  r.bus_id = "0000:1b:00.0";
  r.gpu_name = "NVIDIA H200";
  r.plugin_status = "loaded";
  r.clock_note = "CUPTI timestamps joined to CLOCK_MONOTONIC at start";
  r.samples.push_back({5, 1 << 20, CompletionMode::kAsyncWait, 0, true, 12.5, 3.25, 0});
  r.samples.push_back({6, 1 << 21, CompletionMode::kBlockingWait, 10, false, 40.0, 2.5, 7});
  r.scope.push_back({9, CompletionMode::kDeviceSync, 0, 1500.5, true, -20.25, 0});
  nccl_profiler::CollectiveRecord c;
  c.comm_id = 0xfeedfacecafe;
  c.rank = 1;
  c.nranks = 8;
  c.seq = 5;
  c.func = "AllReduce";
  c.count = 262144;
  c.datatype = "ncclFloat32";
  c.algo = "RING";
  c.proto = "LL128";
  c.channels = 16;
  c.warps = 20;
  c.start_ns = -5;
  c.stop_ns = 123456789;
  r.nccl.push_back(c);
  r.records.api.push_back({1, 2, 3, 4, "cudaLaunchKernel"});
  return r;
}

bool same_except_records(const RankRun& a, const RankRun& b) {
  return std::tie(a.rank, a.device, a.bus_id, a.gpu_name, a.plugin_status, a.clock_note) ==
             std::tie(b.rank, b.device, b.bus_id, b.gpu_name, b.plugin_status, b.clock_note) &&
         same(a.samples, b.samples) && same(a.scope, b.scope) && same(a.nccl, b.nccl);
}

RunMeta sample_meta() {
  RunMeta m;
  m.collective = Collective::kReduce;
  m.dtype = DataType::kBfloat16;
  m.op = ReduceOp::kMax;
  m.inplace = true;
  m.root = 2;
  m.nranks = 8;
  m.sizes = {8, 1 << 20, kMax64};
  m.modes = {CompletionMode::kSync, CompletionMode::kBlockingWait};
  m.poll_ms = 3;
  m.iters = 20;
  m.warmup = 5;
  m.cupti = false;
  m.untraced_pass = false;
  m.scope_samples = 4;
  m.scope_sleep_ms = 50.5;
  m.scope_bytes = 1 << 28;
  m.nccl_version = "2.28.3";
  m.nccl_library = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
  m.commtool_version = "0.3.0 (abc1234)";
  m.started_at = "2025-01-02T03:04:05Z";
  m.hostname = "gpu-node-7";
  m.saved_at = "2025-01-02T03:14:15Z";
  return m;
}

auto fields(const RunMeta& m) {
  return std::tie(m.collective, m.dtype, m.op, m.inplace, m.root, m.nranks, m.sizes, m.modes,
                  m.poll_ms, m.iters, m.warmup, m.cupti, m.untraced_pass, m.scope_samples,
                  m.scope_sleep_ms, m.scope_bytes, m.nccl_version, m.nccl_library,
                  m.commtool_version, m.started_at, m.hostname, m.saved_at);
}

}  // namespace

TEST(RunJson, RankRunKeepsEveryFieldButRecordsWhenAskedNotToCarryThem) {
  RankRun r = sample_rank();
  RankRun back = rank_run_from_json(to_json(r, /*with_records=*/false));
  EXPECT_TRUE(same_except_records(back, r));
  EXPECT_TRUE(back.records.api.empty());
}

TEST(RunJson, RankRunCarriesItsRecordsAsRecordText) {
  RankRun r = sample_rank();
  nlohmann::json j = to_json(r, /*with_records=*/true);
  ASSERT_TRUE(j.at("records").is_string());
  EXPECT_TRUE(same(rank_run_from_json(j).records, r.records));
}

TEST(RunJson, CompletionModesAreWrittenByName) {
  nlohmann::json j = to_json(sample_rank(), false);
  EXPECT_EQ(j["samples"][0]["mode"], "async-wait");
}

TEST(RunJson, UnknownModeNamesTheSampleAndTheValue) {
  nlohmann::json j = to_json(sample_rank(), false);
  j["samples"][1]["mode"] = "eventually";
  try {
    rank_run_from_json(j);
    FAIL() << "accepted an unknown mode";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "\"samples\"[1]: \"mode\": \"eventually\" is not one of sync, async-wait, "
              "device-sync, blocking-wait");
  }
}

TEST(RunJson, MissingKeyIsNamed) {
  nlohmann::json j = to_json(sample_rank(), false);
  j.erase("gpu_name");
  EXPECT_THROW(
      {
        try {
          rank_run_from_json(j);
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()), "\"gpu_name\": missing");
          throw;
        }
      },
      Error);
}

TEST(RunJson, RunMetaKeepsEveryField) {
  RunMeta m = sample_meta();
  EXPECT_TRUE(fields(run_meta_from_json(to_json(m))) == fields(m));
}

TEST(RunJson, MetaWithoutCommReadsAsNonBlocking) {
  // Runs saved before commtool recorded the mode were made with non-blocking communicators.
  nlohmann::json j = to_json(sample_meta());
  j.erase("comm");
  EXPECT_EQ(run_meta_from_json(j).comm, commtool::nccl::CommMode::kNonBlocking);
}

TEST(RunJson, CommBlockingReadsAsBlocking) {
  nlohmann::json j = to_json(sample_meta());
  j["comm"] = "blocking";
  EXPECT_EQ(run_meta_from_json(j).comm, commtool::nccl::CommMode::kBlocking);
}

TEST(RunJson, CommNonblockingRoundTrips) {
  RunMeta m = sample_meta();
  m.comm = commtool::nccl::CommMode::kNonBlocking;
  EXPECT_EQ(run_meta_from_json(to_json(m)).comm, commtool::nccl::CommMode::kNonBlocking);
}

TEST(RunJson, UnknownCommIsAUsageErrorNamingTheValueAndTheAcceptedOnes) {
  nlohmann::json j = to_json(sample_meta());
  j["comm"] = "sometimes";
  try {
    run_meta_from_json(j);
    FAIL() << "accepted an unknown communicator mode";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_EQ(std::string(e.what()), "\"comm\": \"sometimes\" is not one of blocking, nonblocking");
  }
}

// A saved run names its collective, type, reduction and modes; an unknown name is refused with
// the key and the accepted names, never read as a default.
TEST(RunJson, UnknownNamesAreUsageErrorsNamingKeyValueAndAcceptedOnes) {
  for (const auto& [key, value, accepted] :
       {std::tuple{"collective", "allscatter", "allreduce, allgather"},
        std::tuple{"dtype", "float128", "int8, uint8"}, std::tuple{"op", "xor", "sum, prod"}}) {
    nlohmann::json j = to_json(sample_meta());
    j[key] = value;
    try {
      run_meta_from_json(j);
      ADD_FAILURE() << "accepted " << key << " " << value;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("\"{}\": \"{}\" is not one of {}", key, value, accepted)),
                std::string::npos)
          << what;
    }
  }
  nlohmann::json j = to_json(sample_meta());
  j["modes"] = {"sync", "sometimes"};
  EXPECT_THROW(run_meta_from_json(j), Error);
}

// ---- saved runs ---------------------------------------------------------------------------------

namespace {

class SavedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("commtool-record-io-" + std::to_string(getpid()) + "-" + test->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "run").string();
    run_.meta = sample_meta();
    run_.meta.nranks = 2;
    run_.meta.root = 1;
    run_.meta.sizes = {8, 1 << 20, 1 << 21};  // whole bfloat16 elements; every sample's size
    run_.meta.modes = {CompletionMode::kAsyncWait, CompletionMode::kDeviceSync,
                       CompletionMode::kBlockingWait};  // every sample's mode
    run_.ranks = {sample_rank(), sample_rank()};
    run_.ranks[0].rank = 0;
    run_.ranks[1].records.operations.push_back(mark(5, 1, true));
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(fs::path(dir_) / name, std::ios::binary) << text;
  }
  // The message load_run throws for dir_; fails the test if it throws none.
  std::string load_error() {
    try {
      load_run(dir_);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return e.what();
    }
    ADD_FAILURE() << "load_run accepted " << dir_;
    return "";
  }

  fs::path root_;
  std::string dir_;
  TraceRun run_;
};

}  // namespace

TEST_F(SavedRun, LoadGivesBackWhatWasSaved) {
  save_run(dir_, run_);
  TraceRun back = load_run(dir_);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_NE(back.meta.saved_at, run_.meta.saved_at);  // save_run says when it saved
  back.meta.saved_at = run_.meta.saved_at;
  EXPECT_TRUE(fields(back.meta) == fields(run_.meta));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(same_except_records(back.ranks[i], run_.ranks[i])) << i;
    EXPECT_TRUE(same(back.ranks[i].records, run_.ranks[i].records)) << i;
  }
}

TEST_F(SavedRun, WritesRunJsonAndARecordsFilePerRankAndNothingElse) {
  save_run(dir_, run_);
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_))
    names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"run.json", "records-rank0.txt", "records-rank1.txt"}));
}

TEST_F(SavedRun, RunJsonHoldsSchemaVersionAndNoRecords) {
  save_run(dir_, run_);
  std::ifstream in(fs::path(dir_) / "run.json");
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_FALSE(j.at("ranks").at(0).contains("records"));
}

TEST_F(SavedRun, CreatesMissingParentDirectories) {
  dir_ = (root_ / "a" / "b" / "run").string();
  save_run(dir_, run_);
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "run.json"));
}

TEST_F(SavedRun, OverwritesAPreviousSaveAndDropsRanksItNoLongerHas) {
  save_run(dir_, run_);
  run_.ranks.pop_back();
  run_.meta.nranks = 1;
  run_.meta.root = 0;
  run_.ranks[0].gpu_name = "second save";
  save_run(dir_, run_);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "records-rank1.txt"));
  EXPECT_EQ(load_run(dir_).ranks.at(0).gpu_name, "second save");
}

TEST_F(SavedRun, RefusesANonEmptyDirectoryThatIsNotASave) {
  fs::create_directories(dir_);
  write("notes.txt", "mine\n");
  try {
    save_run(dir_, run_);
    FAIL() << "wrote into a foreign directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("notes.txt is not one of its files"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "run.json"));
}

TEST_F(SavedRun, SavesIntoAnEmptyDirectory) {
  fs::create_directories(dir_);
  save_run(dir_, run_);
  EXPECT_EQ(load_run(dir_).ranks.size(), 2u);
}

TEST_F(SavedRun, LoadOfAMissingDirectorySaysSo) {
  EXPECT_EQ(load_error(),
            dir_ + ": no such directory; give a directory written by commtool trace --save");
}

TEST_F(SavedRun, LoadWithoutRunJsonNamesIt) {
  fs::create_directories(dir_);
  EXPECT_NE(load_error().find(dir_ + "/run.json: missing"), std::string::npos);
}

TEST_F(SavedRun, LoadOfBadJsonNamesTheFile) {
  save_run(dir_, run_);
  write("run.json", "{\"schema_version\": 1,");
  EXPECT_EQ(load_error().rfind(dir_ + "/run.json: not valid JSON", 0), 0u);
}

TEST_F(SavedRun, LoadOfAnotherSchemaVersionSaysWhichIsRead) {
  save_run(dir_, run_);
  write("run.json", "{\"schema_version\": 7, \"meta\": {}, \"ranks\": []}");
  EXPECT_EQ(load_error(),
            dir_ + "/run.json: schema_version 7 is not supported; this build reads 1");
}

TEST_F(SavedRun, LoadWithAMissingRecordsFileNamesIt) {
  save_run(dir_, run_);
  fs::remove(fs::path(dir_) / "records-rank1.txt");
  EXPECT_EQ(load_error(), dir_ + "/records-rank1.txt: missing; run.json lists rank 1");
}

TEST_F(SavedRun, LoadOfACorruptRecordsFileNamesFileLineAndField) {
  save_run(dir_, run_);
  write("records-rank0.txt", "commtool-records 1\na 1 2 3 4 ok\na 1 2 three 4 bad\n");
  EXPECT_EQ(load_error(),
            dir_ + "/records-rank0.txt:3: api start_ns: \"three\" is not a decimal number");
}

// Asked before a run is measured (trace --save): a bad target must not cost the run.
TEST_F(SavedRun, SaveTargetIsCheckedBeforeAnythingIsWritten) {
  EXPECT_NO_THROW(check_save_dir(dir_));                          // new, in a writable directory
  EXPECT_NO_THROW(check_save_dir((root_ / "a" / "b").string()));  // parents created later
  save_run(dir_, run_);
  EXPECT_NO_THROW(check_save_dir(dir_));  // an earlier saved run is replaced
  std::ofstream(root_ / "notes.txt") << "mine";
  try {
    check_save_dir(root_.string());
    ADD_FAILURE() << "accepted a directory holding the user's files";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("not empty and not a saved run"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_save_dir((root_ / "notes.txt" / "run").string()), Error);
  EXPECT_THROW(check_save_dir("/proc/commtool/run"), Error);
}
