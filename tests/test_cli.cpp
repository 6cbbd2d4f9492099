// commtool as a user runs it (a child process, its exit code, its output, what it leaves on
// disk): the global options, topo, probe and trace, and what is refused before any hardware.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace fs = std::filesystem;

namespace {

using cli_test::contains;
using cli_test::ep_fixture;
using cli_test::expect_no_gpu_exit_3;
using cli_test::Result;
using cli_test::run;
using cli_test::TempDir;

std::string fixture(const std::string& name) {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/" + name;
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

TEST(Cli, VersionAsJson) {
  Result r = run("--version --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("schema_version"), 1);
  for (const char* key :
       {"commtool", "git_commit", "cuda_runtime", "cuda_driver", "nvidia_driver", "nccl", "cupti"})
    EXPECT_TRUE(doc.at(key).is_string()) << key;
}

// The parser's refusals in commtool's words, from the binary as a user runs it.
TEST(Cli, AMistypedWordIsNamedWithWhatWasMeant) {
  Result sub = run("tpo");
  EXPECT_EQ(sub.code, 2);
  EXPECT_TRUE(contains(sub.out, "commtool: tpo: no such subcommand; did you mean topo?"))
      << sub.out;
  Result opt = run("topo --sysfs-rot x");
  EXPECT_EQ(opt.code, 2);
  EXPECT_TRUE(contains(opt.out,
                       "commtool topo: --sysfs-rot: no such option; did you mean "
                       "--sysfs-root?"))
      << opt.out;
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
  EXPECT_EQ(run("probe --batches 100000").code, 2);
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

// Two outputs on one file: one would be lost. Refused before anything runs, also when the two
// names differ (./x and x, a link to x).
TEST(Cli, TwoOutputsOnOneFileAreUsageErrorNamingBoth) {
  TempDir dir;
  const std::string x = (dir.path / "x").string();
  fs::create_symlink(x, dir.path / "link");
  const std::string run_dir = std::string(COMMTOOL_FIXTURES_DIR) + "/trace_run";
  const std::string cases[] = {
      "report " + run_dir + " --output " + x + " --trace " + x,
      "report " + run_dir + " --output " + x + " --trace " + (dir.path / "." / "x").string(),
      "report " + run_dir + " --output " + (dir.path / "link").string() + " --trace " + x,
      "diagnose ep --dry-run --output " + x + " --heatmap " + x,
      "diagnose allreduce --output " + x + " --plot " + x,
      "trace allreduce --output " + x + " --trace " + x,
  };
  for (const std::string& args : cases) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "name the same file; one would replace the other")) << r.out;
    EXPECT_FALSE(fs::exists(x)) << args;
  }
  // Devices are written through and may be shared.
  EXPECT_EQ(run("report " + run_dir + " --output /dev/null --trace /dev/null").code, 0);
}

TEST(Cli, AnOverLongOutputNameIsUsageErrorBeforeAnythingRuns) {
  const std::string name(300, 'n');
  for (const std::string& args :
       {"trace allreduce --trace /tmp/" + name, "trace allreduce --save /tmp/" + name,
        "topo --output /tmp/" + name, "record --save /tmp/" + name + " -- true"}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "is 300 bytes; a file name takes at most 255")) << r.out;
  }
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
  expect_usage_error_naming("diagnose ep -n 100000 --replicate 2 --cupti",
                            "--iters 100000: 1200060 operations per rank");
}

// --latency copies nothing of --size: a large one is not refused for it.
TEST(CliBeforeHardware, LatencyAloneIsNotHeldToTheSizesMemory) {
  expect_no_gpu_exit_3("probe --latency --size 64G");
}

// What CLI11 would take without a word: '' read as 0, a number past 64 bits clamped to the
// largest, a leading 0 read as octal.
TEST(CliValues, AnEmptyValueOrANumberPast64BitsIsUsageErrorNamingTheOption) {
  for (const char* args :
       {"diagnose ep --dry-run --ranks 2 --seed ''", "diagnose ep --dry-run --ranks 2 --layer ''",
        "trace allreduce --inject-fault ''", "trace allreduce --mode ''", "topo --devices ''"}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "empty")) << args << "\n" << r.out;
  }
  Result r = run("diagnose ep --dry-run --ranks 2 --seed 18446744073709551616");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "--seed: 18446744073709551616 is out of range (0 to "
                       "18446744073709551615)"))
      << r.out;
  EXPECT_EQ(run("diagnose ep --dry-run --ranks 2 --seed 18446744073709551615").code, 0);
  r = run("diagnose ep --dry-run --ranks 2 --seed 0x10");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "0x10 is not a whole number")) << r.out;
  // 010 is ten ranks, as a person reads it, not octal eight.
  r = run("--json diagnose ep --dry-run --ranks 010 --experts 20 --tokens 64");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\"ranks\": 10")) << r.out;
}

TEST(CliValues, AnEmptyEntryOfAListIsNamedByItsPosition) {
  Result r = run("trace allreduce --mode sync,,");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--mode sync,,: entry 2 is empty")) << r.out;
  r = run("trace allreduce --mode blocking-wait --poll-ms 1,,2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--poll-ms 1,,2: entry 2 is empty")) << r.out;
}

// CLI11 reads `--json=` as `--json`; the user meant a value and left it out.
TEST(CliValues, AFlagWithAnEmptyValueIsUsageError) {
  for (const char* args : {"--mpi= topo", "topo --json=", "diagnose ep --dry-run --json="}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "an empty value;")) << args << "\n" << r.out;
  }
  Result r = run("topo --json= --sysfs-root x");
  EXPECT_TRUE(contains(r.out,
                       "commtool: --json=: an empty value; --json is a flag: give it "
                       "alone, or --json=false"))
      << r.out;
  // Words of record's job are the job's: `--verbose=` there is not ours to refuse.
  r = run("record /nonexistent/job --verbose=");
  EXPECT_FALSE(contains(r.out, "an empty value")) << r.out;
}

TEST(CliValues, AnUnknownDiagnosisIsNamedWithTheAcceptedOnes) {
  Result r = run("diagnose foo");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "commtool: diagnose foo: not one of its subcommands; accepted: "
                       "allreduce, ep"))
      << r.out;
  r = run("--json diagnose foo");  // after a global option too
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "diagnose foo")) << r.out;
}

// The documented form of a message: at most 80 characters of a value, control characters as
// \xNN, a value quoted once.
TEST(CliMessages, AHugeOrHostileValueIsCutEscapedAndQuotedOnce) {
  const std::string huge(100000, '7');
  for (const std::string& args :
       {"topo --devices " + huge, "trace allreduce --mode blocking-wait --poll-ms " + huge,
        "trace allreduce --inject-fault " + huge, "trace allreduce -n " + huge}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << r.out.substr(0, 300);
    EXPECT_LT(r.out.size(), 1000u) << r.out.substr(0, 300);
    EXPECT_TRUE(contains(r.out, "(100000 bytes)")) << r.out.substr(0, 300);
  }
  Result r = run("trace allreduce -n '\x1b[31mred\nline2'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(contains(r.out, "\x1b")) << r.out;
  EXPECT_TRUE(contains(r.out, "\\x1b[31mred\\x0aline2")) << r.out;
  EXPECT_TRUE(r.out.starts_with("commtool trace: ")) << r.out;
}

// An output on an input would replace what the command reads.
TEST(Cli, AnOutputOnAnInputIsUsageErrorAndTheInputIsKept) {
  TempDir tmp;
  const fs::path xml = tmp.path / "machine.xml";
  fs::copy_file(fixture("dgx_h100.xml"), xml);
  const auto before = fs::file_size(xml);
  Result r = run("topo --nccl-xml " + xml.string() + " --output " + xml.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "which this command reads")) << r.out;
  EXPECT_EQ(fs::file_size(xml), before);
  const fs::path routing = tmp.path / "counts.json";
  fs::copy_file(ep_fixture("counts.json"), routing);
  r = run("diagnose ep --dry-run --ranks 8 --routing " + routing.string() + " --heatmap " +
          routing.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--heatmap")) << r.out;
}
