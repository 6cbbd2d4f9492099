// commtool diagnose ep and diagnose allreduce as a user runs them: --dry-run's plan without a
// GPU, routing and placement files, and the values refused naming the option.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_test_support.hpp"

namespace fs = std::filesystem;

namespace {

using cli_test::contains;
using cli_test::ep_fixture;
using cli_test::expect_no_gpu_exit_3;
using cli_test::Result;
using cli_test::run;
using cli_test::TempDir;

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
  EXPECT_TRUE(contains(dtype.out,
                       "--dtype fp16: not an element type this command runs; "
                       "accepted: bfloat16, f8e4m3, f8e5m2"))
      << dtype.out;
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

// --cupti and --trace are checked before anything runs: with --dry-run there is nothing to
// trace, --trace is of the --cupti run, and an unwritable path is refused before a worker
// starts (exit 2, no file left behind).
TEST(CliDiagnoseEp, CuptiAndTraceFileAreCheckedFirst) {
  TempDir dir;
  const fs::path file = dir.path / "ep.json";
  Result dry = run("diagnose ep --dry-run --ranks 4 --cupti");
  EXPECT_EQ(dry.code, 2) << dry.out;
  EXPECT_TRUE(contains(dry.out, "--cupti: --dry-run measures nothing")) << dry.out;
  Result alone = run("diagnose ep --tokens 64 --experts 8 --topk 2 --trace " + file.string());
  EXPECT_EQ(alone.code, 2) << alone.out;
  EXPECT_TRUE(contains(
      alone.out, "--trace " + file.string() + ": the trace is of the run under CUPTI; add --cupti"))
      << alone.out;
  EXPECT_FALSE(fs::exists(file));
  const fs::path nowhere = dir.path / "missing" / "ep.json";
  Result unwritable =
      run("diagnose ep --tokens 64 --experts 8 --topk 2 --cupti --trace " + nowhere.string());
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
  EXPECT_TRUE(contains(d.out,
                       "--dtype float8: not an element type this command runs; accepted: "
                       "half, float, bfloat16"))
      << d.out;
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

// The progress line: on a terminal (script(1) gives the run one), a line rewritten in place
// that names the command, i of n and the time left, erased at the end; with -q, or with
// standard error not a terminal, not a byte of it. Half a million tokens per rank take ~3 s to
// route on the development machine: past the second after which the line appears.
TEST(CliProgress, OneLineOnATerminalNoneWithQuietOrRedirected) {
  TempDir dir;
  const std::string args = "diagnose ep --dry-run --tokens 500000 --ranks 8 --json --output " +
                           (dir.path / "ep.json").string();
  auto on_terminal = [&](const std::string& extra) {
    return cli_test::run_shell("script -qfec '" + std::string(COMMTOOL_BINARY) + " " + extra +
                               args + "' /dev/null");
  };
  const Result shown = on_terminal("");
  ASSERT_EQ(shown.code, 0) << shown.out;
  EXPECT_TRUE(contains(shown.out, "\rcommtool diagnose ep: ")) << shown.out;
  EXPECT_TRUE(contains(shown.out, "/8 routing rank ")) << shown.out;
  EXPECT_TRUE(contains(shown.out, " left\x1b[K")) << shown.out;
  EXPECT_TRUE(shown.out.ends_with("\r\x1b[K")) << shown.out;  // erased, the cursor at column 0

  const Result quiet = on_terminal("-q ");
  ASSERT_EQ(quiet.code, 0) << quiet.out;
  EXPECT_FALSE(contains(quiet.out, "\r")) << quiet.out;

  const Result piped = run(args);  // as long as the one shown above
  ASSERT_EQ(piped.code, 0) << piped.out;
  EXPECT_FALSE(contains(piped.out, "\r")) << piped.out;
}
