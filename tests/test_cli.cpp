// commtool as a user runs it: a child process, its exit code, its output, and what it leaves
// on disk.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "cli_run.hpp"

namespace fs = std::filesystem;

namespace {

using Result = cli_test::CliResult;  // out: stdout and stderr together

Result run(const std::string& args) {
  return cli_test::run_commtool(args, true);
}

std::string fixture(const std::string& name) {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/" + name;
}

using cli_test::contains;
using cli_test::TempDir;

// A measuring command on a machine without a GPU: exit 3 and the reason. CI has none; on the
// GPU machine the command runs instead, and the test is skipped there.
void expect_no_gpu_exit_3(const std::string& args) {
  Result r = run(args);
  if (r.code == 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(r.code, 3) << args << "\n" << r.out;
  EXPECT_TRUE(contains(r.out, "no NVIDIA GPU found")) << r.out;
}

}  // namespace

TEST(Cli, HelpListsTopoAndTheExitCodes) {
  Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "topo"));
  EXPECT_TRUE(contains(r.out, "5  a timeout or a hang was detected"));
}

TEST(Cli, NoSubcommandIsUsageError) {
  EXPECT_EQ(run("").code, 2);
}

TEST(Cli, UnknownOptionIsUsageErrorNamingIt) {
  Result r = run("topo --frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--frobnicate"));
}

TEST(Cli, UnknownSubcommandIsUsageError) {
  EXPECT_EQ(run("teleport").code, 2);
}

TEST(Cli, VersionNamesEveryComponent) {
  Result r = run("--version");
  EXPECT_EQ(r.code, 0);
  for (const char* what :
       {"commtool ", "CUDA runtime:", "CUDA driver:", "NVIDIA driver:", "NCCL:", "CUPTI:"}) {
    EXPECT_TRUE(contains(r.out, what)) << what;
  }
}

TEST(Cli, BadDevicesListIsUsageErrorNamingTheValue) {
  Result r = run("topo --devices 0,,3");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "'0,,3'"));
  EXPECT_EQ(run("topo --devices -1").code, 2);
}

TEST(Cli, DeviceThatDoesNotExistIsUsageError) {
  Result r = run("topo --nccl-xml " + fixture("nvlink_pair.xml") + " --devices 7");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "GPU 7 does not exist"));
}

TEST(Cli, DevicesSelectsGpusFromTheReport) {
  Result r = run("topo --json --nccl-xml " + fixture("dgx_h100.xml") + " --devices 0-1");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "\"GPU1\""));
  EXPECT_FALSE(contains(r.out, "\"GPU2\""));
}

TEST(Cli, VerboseSaysHowLongEachStageTook) {
  TempDir dir;
  Result r = run("-v topo --nccl-xml " + fixture("nvlink_pair.xml") + " --output " +
                 (dir.path / "topo.txt").string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "topo: nccl-xml took")) << r.out;
  EXPECT_TRUE(contains(r.out, "topo: done in")) << r.out;
}

TEST(CliProbe, BadSizesAreUsageErrorsNamingTheValue) {
  Result r = run("probe --size 12Q");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--size 12Q: unknown unit 'Q'"));
  r = run("probe --size 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "at least 4 bytes"));
  r = run("probe --size 1023");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "multiple of 4"));
}

TEST(CliProbe, CountsOutOfRangeAreUsageErrors) {
  EXPECT_EQ(run("probe --iters 0").code, 2);
  EXPECT_EQ(run("probe --repeats 100000").code, 2);
}

TEST(CliProbe, CsvAndJsonTogetherIsUsageError) {
  EXPECT_EQ(run("probe --csv --json").code, 2);
}

TEST(CliProbe, NoGpuIsExitCode3) {
  expect_no_gpu_exit_3("probe --h2d");
}

TEST(Cli, BadTimeoutIsUsageError) {
  EXPECT_EQ(run("topo --timeout 0").code, 2);
}

TEST(Cli, TopoRunsOnThisMachineWhateverItHas) {
  // CI has no GPU and no driver: the report says what is missing and exits 0.
  Result r = run("topo");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "commtool topo:"));
}

TEST(Cli, TopoJsonIsOneDocumentWithSchemaVersion) {
  Result r = run("topo --json --nccl-xml " + fixture("dgx_h100.xml"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_TRUE(contains(r.out, "\"schema_version\": 1"));
}

TEST(Cli, DotAndJsonTogetherIsUsageError) {
  EXPECT_EQ(run("topo --dot --json --nccl-xml " + fixture("dgx_h100.xml")).code, 2);
}

TEST(Cli, MalformedXmlIsUsageErrorWithLine) {
  Result r = run("topo --nccl-xml " + fixture("malformed_width.xml"));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "malformed_width.xml:7"));
  EXPECT_TRUE(contains(r.out, "x16"));
}

TEST(Cli, MissingXmlFileIsUsageErrorNamingIt) {
  Result r = run("topo --nccl-xml /nonexistent/topo.xml");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "/nonexistent/topo.xml"));
}

TEST(Cli, SysfsRootThatIsNotSysfsIsUsageError) {
  TempDir dir;
  Result r = run("topo --sysfs-root " + dir.path.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "bus/pci/devices"));
}

TEST(Cli, OutputIsWrittenWholeToTheFile) {
  TempDir dir;
  fs::path file = dir.path / "topo.json";
  Result r =
      run("topo --json --nccl-xml " + fixture("dgx_h100.xml") + " --output " + file.string());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(r.out.empty()) << r.out;
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(contains(text, "\"schema_version\""));
  EXPECT_EQ(text.back(), '\n');
}

TEST(Cli, UnwritableOutputIsUsageErrorAndWritesNothing) {
  Result r =
      run("topo --nccl-xml " + fixture("dgx_h100.xml") + " --output /nonexistent-dir/topo.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "/nonexistent-dir"));
  EXPECT_FALSE(fs::exists("/nonexistent-dir/topo.txt"));
}

TEST(Cli, FailedRunLeavesNoOutputFile) {
  TempDir dir;
  fs::path file = dir.path / "topo.txt";
  Result r =
      run("topo --nccl-xml " + fixture("malformed_class.xml") + " --output " + file.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(CliTrace, UnknownCollectiveNamesTheAcceptedOnes) {
  Result r = run("trace allreduc");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "collective 'allreduc'")) << r.out;
  EXPECT_TRUE(contains(r.out, "reducescatter")) << r.out;
}

TEST(CliTrace, MissingCollectiveIsUsageError) {
  EXPECT_EQ(run("trace").code, 2);
}

TEST(CliTrace, BadDtypeAndOpNameTheValue) {
  Result d = run("trace allreduce -d float8");
  EXPECT_EQ(d.code, 2);
  EXPECT_TRUE(contains(d.out, "--dtype float8")) << d.out;
  Result o = run("trace allreduce -o mean");
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(contains(o.out, "--op mean")) << o.out;
}

TEST(CliTrace, BadModeNamesTheAcceptedModes) {
  Result r = run("trace allreduce --mode sync,blocking");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--mode blocking")) << r.out;
}

TEST(CliTrace, EmptySweepIsUsageError) {
  Result r = run("trace allreduce -b 1M -e 1K");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--minbytes 1M is above --maxbytes 1K")) << r.out;
}

TEST(CliTrace, OutOfRangeCountsAreUsageErrors) {
  EXPECT_EQ(run("trace allreduce -n 0").code, 2);
  EXPECT_EQ(run("trace allreduce -f 1").code, 2);
  EXPECT_EQ(run("trace allreduce -c 2").code, 2);
  EXPECT_EQ(run("trace allreduce --poll-ms -1").code, 2);
  EXPECT_EQ(run("trace allreduce -b 12Q").code, 2);
}

TEST(CliTrace, InplaceAlltoallIsRefused) {
  Result r = run("trace alltoall --inplace");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--inplace")) << r.out;
}

TEST(CliTrace, TraceFileNeedsCupti) {
  Result r = run("trace allreduce --no-cupti --trace /tmp/x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "drop --no-cupti")) << r.out;
}

TEST(CliTrace, ScopeSleepMustFitInTheTimeout) {
  Result r = run("trace allreduce --stream-scope --scope-sleep-ms 5000 --timeout 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--scope-sleep-ms 5000")) << r.out;
}

TEST(CliTrace, NoGpuIsExitCode3) {
  expect_no_gpu_exit_3("trace allreduce -b 1K -e 1K");
}

TEST(CliReport, MissingDirectoryIsUsageErrorNamingIt) {
  Result r = run("report /nonexistent/commtool-run");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "/nonexistent/commtool-run")) << r.out;
}

// tests/fixtures/trace_run: what `commtool trace allreduce -b 1K -e 4K -f 4 -n 3 -w 1
// --stream-scope --scope-samples 2 --scope-sleep-ms 5 --save DIR` wrote on the H200 machine
// (2026-12-03, NCCL 2.28.3, one rank). The same tables come back here, with no GPU.
namespace {
std::string trace_run() {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/trace_run";
}
}  // namespace

TEST(CliReport, ASavedRunIsReanalysedWithoutAGpu) {
  Result r = run("report " + trace_run());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "commtool trace allreduce: float sum, out-of-place, 1 rank(s)"));
  EXPECT_TRUE(contains(r.out, "rank 0: GPU 0 (0000:00:06.0, NVIDIA H200)")) << r.out;
  for (const char* row : {"1 KiB  sync", "1 KiB  async-wait", "1 KiB  device-sync",
                          "4 KiB  blocking-wait 10ms poll"}) {
    EXPECT_TRUE(contains(r.out, row)) << row << "\n" << r.out;
  }
  // The sleep-polling wait is labelled as host time, never read as kernel time.
  EXPECT_TRUE(contains(r.out, "host, polling")) << r.out;
  // What a wait orders: after sync and async-wait stream B's marker came first in both samples;
  // after device-sync it never did.
  EXPECT_TRUE(contains(r.out, "  sync                     2        2/2")) << r.out;
  EXPECT_TRUE(contains(r.out, "  device-sync              2        0/2")) << r.out;
  // At one rank NCCL copies and chooses no algorithm: unknown, with the reason, never a guess.
  EXPECT_TRUE(contains(r.out, "unknown (see NCCL profiler plugin below)")) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "NCCL profiler plugin: loaded; NCCL ran no collective kernel at one "
                       "rank (it copies), so it chose no algorithm or protocol"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "CUPTI records analysed: 1672")) << r.out;
}

TEST(CliReport, JsonCarriesTheRunsVersionAndEveryMode) {
  Result r = run("report " + trace_run() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\"schema_version\": 1")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"commtool_version\": \"0.1.0 (git bbcbb265625f)\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"mode\": \"blocking-wait\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"stream_scope\"")) << r.out;
}

TEST(CliReport, TraceFileHasTheRanksTracksAndFlowArrows) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  Result r = run("report " + trace_run() + " --trace " + file.string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(contains(text, "\"traceEvents\"")) << text.substr(0, 200);
  for (const char* track :
       {"\"rank 0\"", "\"producer stream 16\"", "\"NCCL stream 17\"", "\"consumer stream 18\""}) {
    EXPECT_TRUE(contains(text, track)) << track;
  }
  EXPECT_TRUE(contains(text, "\"ph\":\"s\"")) << "no flow arrow starts";
  EXPECT_TRUE(contains(text, "\"ph\":\"f\"")) << "no flow arrow ends";
}

TEST(CliReport, ARecordingWritesItsTraceAndAHungOneIsStillExitZero) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  const std::string rec = std::string(COMMTOOL_FIXTURES_DIR) + "/recordings/hang_rank3";
  Result r = run("report " + rec + " --trace " + file.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "HANG: ")) << r.out;
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* track : {"\"node-a pid 203\"", "\"comm 00000000000c0ffe rank 3 host\"",
                            "\"comm 00000000000c0ffe rank 3 GPU\"", "\"AllReduce #4\""}) {
    EXPECT_TRUE(contains(text, track)) << track;
  }
}

TEST(CliReport, ABadRecordingWritesNoTrace) {
  TempDir dir;
  const fs::path file = dir.path / "trace.json";
  Result r = run("report " + std::string(COMMTOOL_FIXTURES_DIR) + "/recordings/bad_line --trace " +
                 file.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "node-a-100.jsonl:3: ")) << r.out;
  EXPECT_FALSE(fs::exists(file));
}

TEST(CliReport, ACorruptRecordNamesFileAndLineAndWritesNothing) {
  TempDir dir;
  const fs::path copy = dir.path / "run";
  fs::copy(trace_run(), copy);
  fs::permissions(copy / "records-rank0.txt", fs::perms::owner_write, fs::perm_options::add);
  {
    std::ofstream out(copy / "records-rank0.txt", std::ios::app);
    out << "k 16 zz 1 2 name\n";
  }
  const fs::path file = dir.path / "trace.json";
  Result r = run("report " + copy.string() + " --trace " + file.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "records-rank0.txt:")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"zz\" is not a decimal number")) << r.out;
  EXPECT_FALSE(fs::exists(file));
}

TEST(CliReport, WrongTypeInRunJsonNamesTheField) {
  TempDir dir;
  const fs::path copy = dir.path / "run";
  fs::copy(trace_run(), copy);
  fs::permissions(copy / "run.json", fs::perms::owner_write, fs::perm_options::add);
  std::ifstream in(copy / "run.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  text.replace(text.find("\"nranks\": 1"), 11, "\"nranks\": \"x\"");
  std::ofstream(copy / "run.json") << text;
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "\"nranks\": \"x\" has the wrong type")) << r.out;
}

// The fixture was saved before trace --save wrote saved_at: it stays loadable, and says so.
TEST(CliReport, FirstLineSaysWhenWhereAndByWhatTheRunWasSaved) {
  Result r = run("report " + trace_run());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "Saved run: unknown on host vm by commtool 0.1.0 (git bbcbb265625f); run started "
            "2026-12-03 06:14 UTC");
  Result j = run("--json report " + trace_run());
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_TRUE(contains(j.out,
                       "\"saved_run\": {\n    \"commtool_version\": \"0.1.0 (git "
                       "bbcbb265625f)\",\n    \"hostname\": \"vm\",\n    \"saved_at\": null"))
      << j.out;
}

namespace {
// A writable copy of the fixture, with `edit` applied to one of its files.
fs::path edited_copy(const TempDir& dir, const std::string& file,
                     const std::function<std::string(std::string)>& edit) {
  const fs::path copy = dir.path / "run";
  fs::copy(trace_run(), copy);
  fs::permissions(copy / file, fs::perms::owner_write, fs::perm_options::add);
  std::ifstream in(copy / file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::ofstream(copy / file, std::ios::binary | std::ios::trunc) << edit(text);
  return copy;
}
}  // namespace

TEST(CliReport, ARecordCutOffMidLineIsAnalysedWithAWarningFirst) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "records-rank0.txt", [](std::string t) {
    return t.substr(0, t.size() - 10);  // inside the last line, 1673
  });
  Result r = run("report " + copy.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string second = r.out.substr(r.out.find('\n') + 1);
  EXPECT_EQ(second.substr(0, second.find('\n')),
            "WARNING: " + (copy / "records-rank0.txt").string() +
                ":1673: the last record is cut off (the file ends inside that line: a run killed "
                "while writing it?); analysed without it")
      << r.out;
  Result j = run("--json report " + copy.string());
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_TRUE(contains(j.out, "records-rank0.txt:1673: the last record is cut off")) << j.out;
}

TEST(CliReport, ADuplicatedRecordIsExit2NamingFileLineAndValue) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "records-rank0.txt", [](std::string t) {
    const size_t at = t.find("\no 33 ") + 1;
    return t + t.substr(at, t.find('\n', at) + 1 - at);
  });
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "records-rank0.txt:1674: operation seq 33: the same record as line "))
      << r.out;
}

TEST(CliReport, ARecordsFileOfAnotherRankIsExit2) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "run.json", [](std::string t) { return t; });
  fs::copy(copy / "records-rank0.txt", copy / "records-rank1.txt");
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "records-rank1.txt: rank: 1: is not a rank of this run")) << r.out;
}

TEST(CliReport, ANegativeTimeIsExit2NamingKeyAndValue) {
  TempDir dir;
  const fs::path copy = edited_copy(dir, "run.json", [](std::string t) {
    return t.replace(t.find("\"time_us\": 7.84"), 15, "\"time_us\": -7.84");
  });
  Result r = run("report " + copy.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "\"samples\"[0]: \"time_us\": -7.84000009"
                       "2983246: is negative; accepted: a finite number"))
      << r.out;
}

namespace {
std::string ep_fixture(const std::string& name) {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/ep/" + name;
}
}  // namespace

TEST(CliDiagnoseEp, DryRunNeedsNoGpuAndPrintsRoutingMatricesAndDiagnosis) {
  Result r =
      run("diagnose ep --dry-run --ranks 4 --experts 16 --topk 2 --tokens 1024 "
          "--skew zipf:1.2 --replicate 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "commtool diagnose ep: 4 rank(s), 1024 tokens per rank")) << r.out;
  EXPECT_TRUE(contains(r.out, "routing: generated, skew zipf:1.2, seed 1")) << r.out;
  EXPECT_TRUE(contains(r.out, "Dispatch matrix (MiB")) << r.out;
  // Zipf puts expert 0, the hottest, on rank 0 under the contiguous placement.
  EXPECT_TRUE(contains(r.out, "  WARNING [rank-imbalance] rank 0 receives")) << r.out;
  EXPECT_TRUE(contains(r.out, "(planned; --dry-run measures nothing)")) << r.out;
  EXPECT_FALSE(contains(r.out, "Measured")) << r.out;
}

TEST(CliDiagnoseEp, DryRunIsTheSameForTheSameSeedAndChangesWithIt) {
  const std::string args =
      "diagnose ep --dry-run --ranks 4 --experts 16 --topk 4 --tokens 256 "
      "--skew hot:2:0.5 --json --seed ";
  Result a = run(args + "7"), b = run(args + "7"), c = run(args + "8");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(CliDiagnoseEp, RoutingFileJsonAndCsvGiveTheSameMatrix) {
  const std::string common = " --dry-run --ranks 4 --json";
  Result j = run("diagnose ep --routing " + ep_fixture("counts.json") + common);
  Result c =
      run("diagnose ep --routing " + ep_fixture("counts.csv") + " --tokens 64 --topk 2" + common);
  ASSERT_EQ(j.code, 0) << j.out;
  ASSERT_EQ(c.code, 0) << c.out;
  auto matrix = [](const std::string& doc) {
    const size_t at = doc.find("\"dispatch_bytes\"");
    return doc.substr(at, doc.find(']', doc.find(']', at) + 1) - at);
  };
  EXPECT_EQ(matrix(j.out), matrix(c.out));
  EXPECT_TRUE(contains(j.out, "\"dispatch_per_selection\": true")) << j.out;
}

TEST(CliDiagnoseEp, PlacementFileMovesTheExperts) {
  Result r = run("diagnose ep --dry-run --ranks 4 --routing " + ep_fixture("counts.json") +
                 " --placement " + ep_fixture("placement.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  // placement.csv puts experts 0 and 7 on rank 3, which now receives the most.
  EXPECT_TRUE(contains(r.out, "  3     0, 7 ")) << r.out;
  EXPECT_TRUE(contains(r.out, "[rank-imbalance] rank 3 receives")) << r.out;
}

TEST(CliDiagnoseEp, MalformedRoutingFileNamesLineAndField) {
  Result r = run("diagnose ep --dry-run --routing " + ep_fixture("bad_counts.csv"));
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "bad_counts.csv:3: count: \"ninety-six\" is not a whole number"))
      << r.out;
}

TEST(CliDiagnoseEp, CountsThatDoNotAddUpSayTheSumAndTheExpectedValue) {
  Result r = run("diagnose ep --dry-run --ranks 4 --routing " + ep_fixture("counts.csv") +
                 " --tokens 60 --topk 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "counts add up to 512, expected 480")) << r.out;
}

TEST(CliDiagnoseEp, BadValuesAreUsageErrorsNamingThem) {
  Result skew = run("diagnose ep --dry-run --skew zipf:-1");
  EXPECT_EQ(skew.code, 2);
  EXPECT_TRUE(contains(skew.out, "--skew zipf:-1")) << skew.out;
  Result dtype = run("diagnose ep --dry-run --dtype fp16");
  EXPECT_EQ(dtype.code, 2);
  EXPECT_TRUE(contains(dtype.out, "--dtype fp16: accepted: bf16")) << dtype.out;
  Result ranks = run("diagnose ep --ranks 4");
  EXPECT_EQ(ranks.code, 2);
  EXPECT_TRUE(contains(ranks.out, "--ranks is for --dry-run")) << ranks.out;
  Result both = run("diagnose ep --dry-run --skew zipf:1 --routing " + ep_fixture("counts.csv"));
  EXPECT_EQ(both.code, 2);
  EXPECT_TRUE(contains(both.out, "drop one of them")) << both.out;
  EXPECT_EQ(run("diagnose ep --dry-run --topk 0").code, 2);
  EXPECT_EQ(run("diagnose ep --dry-run --experts 4 --topk 8").code, 2);
  EXPECT_EQ(run("diagnose ep --dry-run --replicate -1").code, 2);
  EXPECT_EQ(run("diagnose").code, 2);  // a diagnosis must be named
}

TEST(CliDiagnoseEp, HeatMapIsWrittenWholeAndNotOnFailure) {
  TempDir dir;
  const fs::path svg = dir.path / "heat.svg";
  Result ok = run("diagnose ep --dry-run --ranks 4 --heatmap " + svg.string());
  ASSERT_EQ(ok.code, 0) << ok.out;
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(text.starts_with("<?xml")) << text.substr(0, 100);
  EXPECT_TRUE(contains(text, "</svg>"));
  const fs::path bad = dir.path / "bad.svg";
  Result failed = run("diagnose ep --dry-run --skew zipf:0 --heatmap " + bad.string());
  EXPECT_EQ(failed.code, 2);
  EXPECT_FALSE(fs::exists(bad));
}

// --trace is checked before anything runs: with --dry-run there is nothing to trace, and an
// unwritable path is refused before a worker starts (exit 2, no file left behind).
TEST(CliDiagnoseEp, TraceFileIsRefusedWithDryRunOrWhereItCannotBeWritten) {
  TempDir dir;
  const fs::path file = dir.path / "ep.json";
  Result dry = run("diagnose ep --dry-run --ranks 4 --trace " + file.string());
  EXPECT_EQ(dry.code, 2) << dry.out;
  EXPECT_TRUE(contains(dry.out, "--trace " + file.string() + ": --dry-run measures nothing"))
      << dry.out;
  EXPECT_FALSE(fs::exists(file));
  const fs::path nowhere = dir.path / "missing" / "ep.json";
  Result unwritable =
      run("diagnose ep --tokens 64 --experts 8 --topk 2 --trace " + nowhere.string());
  EXPECT_EQ(unwritable.code, 2) << unwritable.out;
  EXPECT_TRUE(contains(unwritable.out, "--trace " + nowhere.string() + ": directory"))
      << unwritable.out;
  EXPECT_FALSE(fs::exists(nowhere.parent_path()));
}

TEST(CliDiagnoseEp, MeasuringWithoutAGpuIsExitCode3) {
  expect_no_gpu_exit_3("diagnose ep --tokens 64 --experts 8 --topk 2");
}

TEST(CliDiagnoseAllReduce, BadValuesAreUsageErrorsNamingThem) {
  Result d = run("diagnose allreduce -d float8");
  EXPECT_EQ(d.code, 2);
  EXPECT_TRUE(contains(d.out, "--dtype float8: accepted: float, bfloat16, half")) << d.out;
  Result s = run("diagnose allreduce -b 1M -e 1K");
  EXPECT_EQ(s.code, 2);
  EXPECT_TRUE(contains(s.out, "--minbytes 1M is above --maxbytes 1K")) << s.out;
  EXPECT_EQ(run("diagnose allreduce -f 1").code, 2);
  EXPECT_EQ(run("diagnose allreduce -n 0").code, 2);
  Result plot = run("diagnose allreduce --plot /nonexistent-dir/p.svg");
  EXPECT_EQ(plot.code, 2);
  EXPECT_TRUE(contains(plot.out, "/nonexistent-dir")) << plot.out;
}

TEST(CliDiagnoseAllReduce, NoGpuIsExitCode3) {
  expect_no_gpu_exit_3("diagnose allreduce -b 1K -e 1K");
}

TEST(CliDiagnoseEp, RanksTableSaysHowTokensWereCounted) {
  Result file = run("diagnose ep --dry-run --ranks 4 --routing " + ep_fixture("counts.json"));
  ASSERT_EQ(file.code, 0) << file.out;
  EXPECT_TRUE(contains(file.out, "dispatch copies, one per selection")) << file.out;
  Result generated = run("diagnose ep --dry-run --ranks 4 --experts 16 --topk 2");
  ASSERT_EQ(generated.code, 0) << generated.out;
  EXPECT_TRUE(contains(generated.out, "a token counted once per destination rank"))
      << generated.out;
}

TEST(CliComm, UnknownCommunicatorModeIsUsageErrorNamingItAndTheAcceptedOnes) {
  Result r = run("--comm sometimes trace allreduce");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "sometimes")) << r.out;
  EXPECT_TRUE(contains(r.out, "blocking, nonblocking")) << r.out;
}

TEST(CliTrace, UnknownInjectedFaultIsUsageErrorNamingItAndTheAcceptedForms) {
  Result r = run("trace allreduce --inject-fault explode:1:2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "explode:1:2")) << r.out;
  EXPECT_TRUE(
      contains(r.out, "accepted: die:RANK:SEQ, no-join:RANK, stall:RANK:SEQ, mismatch:RANK:SEQ"))
      << r.out;
}

TEST(CliTrace, GpuListedTwiceIsTwoRanksNotAUsageError) {
  // Without a GPU the run stops at discovery (exit 3): the repeated index itself is accepted.
  expect_no_gpu_exit_3("--devices 0,0 trace allreduce -b 1K -e 1K");
}

// The worker tasks that exist only to test the launcher (test-die, test-hang, ...) live in the
// test worker (tests/worker), never in the binary users run.
TEST(CliBinary, CarriesNoTestWorkerTasks) {
  std::ifstream in(COMMTOOL_BINARY, std::ios::binary);
  ASSERT_TRUE(in) << COMMTOOL_BINARY;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000000u);
  for (const char* task : {"test-busy-hang", "test-diverge", "test-exchange"})
    EXPECT_EQ(bytes.find(task), std::string::npos) << task;
}

// ---- Validation before hardware ------------------------------------------------------------
// A bad value or combination is exit 2 naming the option on any machine: it is checked before
// commtool looks for a GPU (which, here, would end the run with exit 3 "no NVIDIA GPU found").

namespace {

void expect_usage_error_naming(const std::string& args, const std::string& words) {
  Result r = run(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  EXPECT_TRUE(contains(r.out, words)) << args << "\n" << r.out;
  EXPECT_FALSE(contains(r.out, "no NVIDIA GPU found")) << args << "\n" << r.out;
}

std::string ranks_on_gpu_0(int n) {
  std::string list = "0";
  for (int i = 1; i < n; ++i)
    list += ",0";
  return list;
}

}  // namespace

// Values that mean the same at any rank count: refused before the GPUs are even counted.
TEST(CliBeforeHardware, BadValuesOfMeasuringCommandsAreExit2NotExit3) {
  expect_usage_error_naming("diagnose ep --skew zipf:x", "--skew zipf:x");
  expect_usage_error_naming("diagnose ep --dtype fp16", "--dtype fp16");
  expect_usage_error_naming("diagnose ep --experts 4 --topk 8", "--topk 8");
  expect_usage_error_naming("diagnose ep --replicate 300", "--replicate 300");
  expect_usage_error_naming("diagnose ep --routing " + ep_fixture("bad_counts.csv"),
                            "bad_counts.csv");
  expect_usage_error_naming("diagnose ep --routing " + ep_fixture("counts.json") + " --layer 3",
                            "--layer 3");
  expect_usage_error_naming("diagnose ep --placement /dev/zero", "/dev/zero");
  expect_usage_error_naming("diagnose allreduce -b 1 -e 2", "--minbytes");
  expect_usage_error_naming("trace allreduce -b 1 -e 3", "--minbytes");
  // Combinations that would silently do nothing.
  expect_usage_error_naming(
      "trace allreduce -b 1K -e 1K --mode sync -n 2 -w 1 --no-baseline "
      "--inject-fault die:0:3",
      "--inject-fault die:0:3: operation 3 is never reached");
  expect_usage_error_naming("diagnose ep --layer 2", "--layer 2: picks a layer of a --routing");
}

// Values that depend on the rank count: with --devices listing the ranks, the count is known
// without the machine.
TEST(CliBeforeHardware, ValuesAgainstTheListedRanksAreExit2) {
  expect_usage_error_naming("--devices 0,0 trace broadcast --root 2", "--root 2");
  expect_usage_error_naming("--devices 0,0 trace allreduce --inject-fault die:3:1",
                            "--inject-fault die:3:1");
  expect_usage_error_naming("--devices 0-19 trace allreduce -d int8", "--dtype int8");
  expect_usage_error_naming("--devices 0,0,0 trace alltoall -b 4 -e 4", "at least 12 bytes");
  expect_usage_error_naming("--devices 0-19 diagnose allreduce -d int8 -b 4 -e 4", "--dtype int8");
  expect_usage_error_naming("--devices " + ranks_on_gpu_0(65) + " diagnose ep",
                            "65 ranks: an exchange takes 1 to 64");
  expect_usage_error_naming("--devices 0,0 diagnose ep --placement " + ep_fixture("placement.csv") +
                                " --experts 8 --topk 2",
                            "rank 3 is out of range");
  expect_usage_error_naming(
      "--devices 0,0,0 diagnose ep --tokens 64 --topk 2 --routing " + ep_fixture("counts.csv"),
      "counts add up to 512");
  // Combinations the listed GPUs rule out.
  expect_usage_error_naming("--devices 0 probe --p2p", "--p2p");
  expect_usage_error_naming("--devices 0 probe --ipc", "--ipc");
}

// Each option inside its own range, their product far beyond any machine: refused with what it
// would need and the limit, before anything is allocated (this used to be std::bad_alloc, exit 1,
// or a worker's failed allocation).
TEST(CliBeforeHardware, MemoryARequestWouldNeedIsBoundedAndRefused) {
  expect_usage_error_naming("--devices 0,0,0,0 trace allreduce -b 64G -e 64G",
                            "--maxbytes 64G: 4 rank(s) on one GPU with 2 buffer(s) of 64 GiB each "
                            "would need 512 GiB; the limit is 256 GiB");
  expect_usage_error_naming("trace allreduce -e 1024G", "the limit is 256 GiB");
  expect_usage_error_naming("diagnose allreduce -b 64G -e 64G",
                            "would need 320 GiB; the limit is 256");
  expect_usage_error_naming(
      "diagnose ep --dry-run --ranks 64 --tokens 16777216 --experts 65536 --topk 1024",
      "--tokens 16777216: 64 rank(s) x 16777216 tokens x top-1024 choices of 4 bytes (the "
      "generated routing) would need 4 TiB; the limit is 16 GiB");
  expect_usage_error_naming("diagnose ep --tokens 16777216 --hidden 1048576",
                            "the limit is 256 GiB");
  expect_usage_error_naming(
      "--devices " + ranks_on_gpu_0(8) + " diagnose ep --tokens 65536 --hidden 65536",
      "rank(s) on GPU 0 would need");
  expect_usage_error_naming("probe --size 64G", "--size 64 GiB");
  expect_usage_error_naming("--devices 0,0,0,0 probe --ipc --size 64G",
                            "4 worker rank(s) on one GPU with two buffers of 64 GiB each would "
                            "need 512 GiB");
  expect_usage_error_naming("trace allreduce -n 100000", "--iters 100000");
  expect_usage_error_naming("diagnose ep -n 100000 --replicate 2 --trace /tmp/commtool-ep.json",
                            "--iters 100000: 1200060 operations per rank");
}

// --latency copies nothing of --size: a large one is not refused for it.
TEST(CliBeforeHardware, LatencyAloneIsNotHeldToTheSizesMemory) {
  expect_no_gpu_exit_3("probe --latency --size 64G");
}

// record: the job's command line needs no "--", its exit status is commtool's, and a job that
// cannot start leaves nothing behind.
