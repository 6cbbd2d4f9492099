// The report of a recording: clock mapping, the per-size statistics, stragglers, the verdict
// and the Chrome trace (reports/record/record_report.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "next_step_checks.hpp"
#include "recording_builder.hpp"
#include "reports/record/record_report.hpp"
#include "tracing/record/recording.hpp"

namespace fs = std::filesystem;
using namespace commtool::reports;
using namespace commtool::record;
using namespace commtool::testing;

namespace {

const fs::path kFixtures = fs::path(COMMTOOL_FIXTURES_DIR) / "recordings";
constexpr uint64_t kComm = 0xc0ffee;
constexpr int64_t kMs = 1'000'000;

// A job of `ranks` processes (one rank each), `ops` AllReduces 10 ms apart; rank r's kernel of
// operation i starts `lag(r, i)` ns after the operation's common start, on a GPU clock 7000 s
// (+ r ms) ahead of the host's, seen by the proxy 5 us late.
template <class Lag>
Recording job(int ranks, int ops, Lag lag, const std::string& host_of_rank_1 = "node-a") {
  RecordingDir dir;
  for (int r = 0; r < ranks; ++r) {
    std::string text = lines_of(
        {proc_line(100 + r, r == 1 ? host_of_rank_1 : "node-a"), comm_line(kComm, r, ranks)});
    for (int i = 0; i < ops; ++i) {
      const int64_t t = kMono0 + kSecond + i * 10 * kMs;
      const auto s = start_line(kComm, r, static_cast<uint64_t>(i), t, "AllReduce", 4194304);
      text += lines_of({s, end_line(s, t + 40 * kUs + lag(r, i), 1000 * kUs + r * kUs,
                                    7000 * kSecond + r * kMs)});
    }
    dir.append("node-" + std::to_string(r) + ".jsonl", text);
  }
  return load_recording(dir.path);
}

TEST(GpuClockMap, EachWindowTakesTheSmallestReportDelay) {
  RecordingDir dir;
  const int64_t gpu_ahead = 7000 * kSecond;
  const auto s0 = start_line(kComm, 0, 0, kMono0);
  const auto s1 = start_line(kComm, 0, 1, kMono0);
  const auto s2 = start_line(kComm, 0, 2, kMono0 + 35 * kSecond);
  // Host seconds 1 and 2: report delays 9 us and 3 us (start and stop alike). Host second 35,
  // in a later window, with the GPU clock drifted by 1 ms: an offset of its own.
  dir.append("a.jsonl",
             lines_of({proc_line(1), end_line(s0, kMono0 + kSecond, 100 * kUs, gpu_ahead, 9 * kUs),
                       end_line(s1, kMono0 + 2 * kSecond, 100 * kUs, gpu_ahead, 3 * kUs),
                       end_line(s2, kMono0 + 35 * kSecond, 100 * kUs, gpu_ahead + kMs, 3 * kUs)}));
  const Recording rec = load_recording(dir.path);
  const GpuClockMap map(rec.processes[0]);
  EXPECT_EQ(map.pairs(), 6u);
  EXPECT_EQ(map.windows(), 2u);
  // Late by the smallest delay of the window, never by the larger one.
  EXPECT_EQ(map.host_ns(kMono0 + 5 * kSecond + gpu_ahead), kMono0 + 5 * kSecond + 3 * kUs);
  EXPECT_EQ(map.host_ns(kMono0 + 36 * kSecond + gpu_ahead + kMs), kMono0 + 36 * kSecond + 3 * kUs);
  // Host second 25 lies in a window without pairs: the nearest window's offset (that of second
  // 35, one window on, rather than that of seconds 1-2, two windows back).
  EXPECT_EQ(map.host_ns(kMono0 + 25 * kSecond + gpu_ahead + kMs), kMono0 + 25 * kSecond + 3 * kUs);
  EXPECT_DOUBLE_EQ(*map.median_excess_us(), 0.0);  // 6, 0, 6, 0, 0, 0 us beyond the smallest
}

TEST(GpuClockMap, NoPairsNoMapping) {
  RecordingDir dir;
  auto e = end_line(start_line(kComm, 0, 0, kMono0), kMono0, kUs);
  e.seen.reset();
  dir.append("a.jsonl", lines_of({proc_line(1), e}));
  const GpuClockMap map(load_recording(dir.path).processes[0]);
  EXPECT_EQ(map.host_ns(kMono0), std::nullopt);
  EXPECT_EQ(map.median_excess_us(), std::nullopt);
}

TEST(RecordReport, TheRankThatStartsLastMostOftenIsAStraggler) {
  // Rank 1 starts 300 us late in 6 of 8 operations; rank 0 never lags.
  const Recording rec = job(2, 8, [](int r, int i) { return r == 1 && i < 6 ? 300 * kUs : 0; });
  const RecordingReport report = analyse_recording(rec);
  ASSERT_EQ(report.stragglers.size(), 1u);
  const Straggler& s = report.stragglers[0];
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.last, 6);
  EXPECT_EQ(s.compared, 8);
  EXPECT_NEAR(s.median_lag_us, 300, 1e-6);
  EXPECT_EQ(s.threshold_us, kStragglerLagUs);
  EXPECT_EQ(report.verdict, Verdict::kStraggler);
  EXPECT_NE(render_recording_text(report).find("STRAGGLER: rank 1 (node-a pid 101) of "
                                               "communicator 0000000000c0ffee started last in 6 "
                                               "of 8 operations, by 300 us median"),
            std::string::npos);
  EXPECT_EQ(report.ranks[1].last_to_start, 6);
  EXPECT_NEAR(report.ranks[1].start_lag_us.median, 300, 1e-6);
}

TEST(RecordReport, LagsBelowTheThresholdOrInAMinorityNameNoStraggler) {
  EXPECT_TRUE(analyse_recording(job(2, 8, [](int r, int) {
                return r == 1 ? 50 * kUs : 0;
              })).stragglers.empty());
  EXPECT_TRUE(analyse_recording(job(2, 8, [](int r, int i) {
                return r == 1 && i < 3 ? 300 * kUs : 0;
              })).stragglers.empty());
  // Across hosts the wall clocks agree only to milliseconds: 300 us says nothing.
  const RecordingReport across = analyse_recording(job(
      2, 8, [](int r, int) { return r == 1 ? 300 * kUs : 0; }, "node-b"));
  EXPECT_TRUE(across.stragglers.empty());
  EXPECT_EQ(across.verdict, Verdict::kNone);
}

TEST(RecordReport, GpuTimeIsEachOperationsSlowestRankAndBusbwUsesItsMedian) {
  // Rank r's kernel takes 1000 + r us: each operation's time is its slowest rank's, 1001 us.
  const RecordingReport report = analyse_recording(job(2, 4, [](int, int) { return 0; }));
  ASSERT_EQ(report.ops.size(), 1u);
  const OpRow& row = report.ops[0];
  EXPECT_EQ(row.operations, 4);
  EXPECT_EQ(row.rank_operations, 8);
  EXPECT_EQ(row.gpu_us.n, 4);
  EXPECT_DOUBLE_EQ(row.gpu_us.median, 1001);
  EXPECT_EQ(row.bytes, 16u << 20);
  // allreduce at 2 ranks: busbw = algbw * 2 (n-1)/n = algbw.
  EXPECT_NEAR(*row.busbw_gbps, (16 << 20) / 1001e-6 / 1e9, 1e-9);
  EXPECT_DOUBLE_EQ(row.api_us.median, 20);
  EXPECT_DOUBLE_EQ(row.enqueue_us.median, 13);
  ASSERT_EQ(row.nccl.ways.size(), 1u);
  EXPECT_EQ(commtool::tracing::to_string(row.nccl), "RING/SIMPLE, 2 ch");
}

TEST(RecordReport, SizesFollowNcclTestsAndUnknownTypesHaveNoBusbw) {
  RecordingDir dir;
  auto gather = start_line(kComm, 0, 0, kMono0, "AllGather", 1000);
  auto odd = start_line(kComm, 0, 1, kMono0, "AllReduce", 1000);
  odd.datatype = "ncclSomethingNew";
  auto ll = end_line(start_line(kComm, 0, 2, kMono0), kMono0, 10 * kUs);
  ll.proto = "LL";
  dir.append("a.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 4),
                                  end_line(gather, kMono0, kUs), end_line(odd, kMono0, kUs), ll,
                                  end_line(start_line(kComm, 0, 3, kMono0), kMono0, kUs),
                                  end_line(start_line(kComm, 0, 4, kMono0), kMono0, kUs)}));
  const RecordingReport report = analyse_recording(load_recording(dir.path));
  ASSERT_EQ(report.ops.size(), 3u);  // AllGather; AllReduce 1000 x odd; AllReduce 1024 x float
  EXPECT_EQ(report.ops[0].func, "AllGather");
  EXPECT_EQ(report.ops[0].bytes, 1000u * 4 * 4);  // the receive buffer: count per rank x 4 ranks
  EXPECT_EQ(report.ops[1].bytes, std::nullopt);
  EXPECT_EQ(report.ops[1].busbw_gbps, std::nullopt);
  EXPECT_EQ(commtool::tracing::to_string(report.ops[2].nccl),
            "RING/SIMPLE, 2 ch x2; RING/LL, 2 ch x1");  // most common first
}

TEST(RecordReport, UnverifiedOperationsAreCountedButNotTimed) {
  RecordingDir dir;
  const auto s0 = start_line(kComm, 0, 0, kMono0);
  auto gave_up = end_line(start_line(kComm, 0, 1, kMono0), kMono0, 5 * kUs, 0, 0, false);
  gave_up.enqueue.end_ns = gave_up.enqueue.start_ns;  // the plugin stopped before NCCL did
  dir.append("a.jsonl", lines_of({proc_line(1), end_line(s0, kMono0, 100 * kUs), gave_up}));
  const RecordingReport report = analyse_recording(load_recording(dir.path));
  ASSERT_EQ(report.ops.size(), 1u);
  const OpRow& row = report.ops[0];
  EXPECT_EQ(row.operations, 2);
  EXPECT_EQ(row.unverified, 1);
  EXPECT_EQ(row.enqueue_us.n, 1);
  EXPECT_DOUBLE_EQ(row.enqueue_us.min, 13);
  EXPECT_EQ(row.gpu_us.n, 1);
  EXPECT_DOUBLE_EQ(row.gpu_us.median, 100);
}

// A kernel cannot start before NCCL enqueued its operation, and a mapped time is never early:
// stamps that say otherwise are not the operation's own (NCCL 2.28 gave such stale stamps to
// point-to-point operations of a group launch).
TEST(RecordReport, GpuStampsFromBeforeTheEnqueueAreCountedNotTimed) {
  RecordingDir dir;
  const int64_t t = kMono0 + 1'000'000 * kUs;  // both stamps in one 10 s clock window
  const auto s0 = start_line(kComm, 0, 0, t);
  auto stale = end_line(start_line(kComm, 0, 1, t + 200 * kUs), t + 200 * kUs, 10 * kUs);
  stale.gpu->start_ns -= 50'000 * kUs;  // a stamp 50 ms old
  dir.append("a.jsonl", lines_of({proc_line(1), end_line(s0, t, 100 * kUs), stale}));
  const RecordingReport report = analyse_recording(load_recording(dir.path));
  ASSERT_EQ(report.ops.size(), 1u);
  EXPECT_EQ(report.ops[0].unverified, 1);
  EXPECT_EQ(report.ops[0].gpu_us.n, 1);
  EXPECT_DOUBLE_EQ(report.ops[0].gpu_us.max, 100);
  ASSERT_FALSE(report.warnings.empty());
  EXPECT_NE(report.warnings.back().find("1 operation(s) carry GPU stamps that cannot be right"),
            std::string::npos)
      << report.warnings.back();
}

// A one-rank job records no collective at all: the report says why rather than look empty.
TEST(RecordReport, AOneRankCommunicatorIsNamedWithWhyItsCollectivesAreMissing) {
  RecordingDir dir;
  dir.append("a.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 1)}));
  dir.append("b.jsonl", lines_of({proc_line(2), comm_line(kComm + 1, 0, 2)}));
  const RecordingReport report = analyse_recording(load_recording(dir.path));
  int one_rank = 0;
  for (const std::string& w : report.warnings)
    one_rank += w.find("has one rank") != std::string::npos;
  EXPECT_EQ(one_rank, 1);
}

TEST(RecordReport, AHangIsTheVerdictAndTheStandingIsTakenWhenItWasSeen) {
  const RecordingReport report = analyse_recording(load_recording(kFixtures / "hang_rank3"));
  EXPECT_EQ(report.verdict, Verdict::kHang);
  EXPECT_EQ(report.standing.in_flight, 3u);
  EXPECT_EQ(report.standing.now_wall_ns,
            launcher_wall_ns(*report.meta, report.meta->hang->monotonic_ns));
  const std::string text = render_recording_text(report);
  EXPECT_NE(text.find("HANG: no operation completed for 60 s"), std::string::npos) << text;
  EXPECT_LT(text.find("HANG:"), text.find("Operations per communicator"));
  EXPECT_EQ(recording_to_json(report)["verdict"], "hang");
}

TEST(RecordReport, OperationsLeftInFlightAtTheEndAreAHangThoughNoLauncherSawIt) {
  RecordingDir dir;
  dir.append("a.jsonl", lines_of({proc_line(1), start_line(kComm, 0, 0, kMono0)}));
  const RecordingReport report = analyse_recording(load_recording(dir.path));
  EXPECT_EQ(report.verdict, Verdict::kHang);
  const std::string text = render_recording_text(report);
  EXPECT_NE(text.find("HANG: the job ended with 1 operation(s) in flight that could not finish"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("WARNING: no record.json"), std::string::npos) << text;
  EXPECT_TRUE(recording_to_json(report)["record"].is_null());
}

TEST(RecordReport, TheChromeTraceHasATrackPerRankOnTheMappedClock) {
  const Recording rec = job(2, 2, [](int r, int) { return r == 1 ? 300 * kUs : 0; });
  const nlohmann::json trace = recording_to_chrome(rec);
  int gpu = 0, api = 0, enqueue = 0;
  double rank1_gpu_start = -1;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    gpu += e["cat"] == "gpu";
    api += e["cat"] == "api";
    enqueue += e["cat"] == "enqueue";
    if (e["cat"] == "gpu" && e["pid"] == 1 && rank1_gpu_start < 0) rank1_gpu_start = e["ts"];
  }
  EXPECT_EQ(gpu, 4);
  EXPECT_EQ(api, 4);
  EXPECT_EQ(enqueue, 4);
  // The first event (rank 0's api call, 20 us before its kernel) is at 0; rank 1's first kernel
  // 20 + 300 us later on the host clock, plus the 5 us report delay the mapping cannot see.
  EXPECT_DOUBLE_EQ(rank1_gpu_start, 325.0);
}

}  // namespace

// record --cupti: one process, two AllReduces whose kernels CUPTI recorded on NCCL's stream;
// the compute stream waited for the first one's end and CUPTI was then given up to a profiler.
TEST(RecordReport, CuptiRecordsSplitTheOperationsTheyCoverAndSayWhenCuptiWasGivenUp) {
  namespace np = commtool::nccl_profiler;
  RecordingDir dir;
  const np::StreamId compute{1, 7}, nccl{1, 13};
  const int64_t t0 = kMono0 + kSecond, t1 = t0 + 10 * kMs;
  const auto s0 = start_line(kComm, 0, 0, t0), s1 = start_line(kComm, 0, 1, t1);
  // Kernels run [t + 40 us, +1000 us) on the host clock; the plugin's stamps say the same.
  const auto e0 = end_line(s0, t0 + 40 * kUs, 1000 * kUs),
             e1 = end_line(s1, t1 + 40 * kUs, 1000 * kUs);
  std::string text =
      lines_of({proc_line(100), comm_line(kComm, 0, 2),
                np::CuptiLine{np::CuptiState::kOn, "libcupti.so.13", 0, kMono0}, s0, e0, s1, e1});
  // CUPTI's kernels start 2 us before the plugin's first channel and end 1 us after its last.
  text += lines_of({np::WorkLine{nccl, 10, {t0 + 38 * kUs, t0 + 1041 * kUs}, true},
                    np::EventLine{nccl, 5, 11}, np::WorkLine{compute, 8, {t0, t0 + 300 * kUs}},
                    np::WaitLine{compute, 5, 12, t0 + 100 * kUs},
                    np::WorkLine{compute, 13, {t0 + 1050 * kUs, t0 + 1100 * kUs}},
                    np::WorkLine{nccl, 20, {t1 + 38 * kUs, t1 + 1041 * kUs}, true},
                    np::CuptiLine{np::CuptiState::kYielded, "libtorch_cpu.so", 0, t1 - kMs}});
  dir.append("node-a-100.jsonl", text);
  const RecordingReport r = analyse_recording(load_recording(dir.path));
  ASSERT_EQ(r.ops.size(), 1u);
  const OpRow& row = r.ops[0];
  // Only the operation before CUPTI was given up is split.
  EXPECT_EQ(row.split_operations, 1);
  EXPECT_DOUBLE_EQ(row.kernel_us.median, 1003);
  EXPECT_DOUBLE_EQ(row.input_wait_us.median, 0);
  // The compute stream was done at 300 us and waited until the kernel ended at 1041 us.
  EXPECT_DOUBLE_EQ(row.exposed_wait_us.median, 741);
  ASSERT_EQ(r.clocks.size(), 1u);
  EXPECT_EQ(r.clocks[0].cupti_matched, 1u);
  // The plugin's stamps map 5 us late (every report of them was 5 us late), CUPTI's kernel
  // starts 2 us before the first channel.
  EXPECT_DOUBLE_EQ(*r.clocks[0].cupti_lead_us, -7);
  ASSERT_EQ(r.cupti.size(), 1u);
  EXPECT_EQ(r.cupti[0].state, "yielded");
  const std::string report = render_recording_text(r);
  EXPECT_NE(report.find("gave CUPTI up to libtorch_cpu.so"), std::string::npos) << report;
  EXPECT_NE(report.find("GPU-side split"), std::string::npos) << report;
  EXPECT_EQ(recording_to_json(r)["operations"][0]["cupti_split"]["exposed_wait_us"]["median"],
            741.0);
  // The Perfetto trace: CUPTI's two kernels and the compute stream's 741 us wait.
  const nlohmann::json trace = recording_to_chrome(load_recording(dir.path));
  int kernels = 0, waits = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "cupti") ++kernels;
    if (e.value("cat", "") == "cupti wait") {
      ++waits;
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 741);
    }
  }
  EXPECT_EQ(kernels, 2);
  EXPECT_EQ(waits, 1);
}

TEST(RecordReport, AProcessWithoutItsCuptiLayerIsNamedWhenCuptiWasAskedFor) {
  RecordingDir dir;
  const int64_t t0 = kMono0 + kSecond;
  const auto s0 = start_line(kComm, 0, 0, t0);
  dir.append("node-a-100.jsonl", lines_of({proc_line(100), comm_line(kComm, 0, 2), s0,
                                           end_line(s0, t0 + 40 * kUs, 1000 * kUs)}));
  Recording rec = load_recording(dir.path);
  RecordingMeta meta;
  meta.cupti = true;
  rec.meta = meta;
  const RecordingReport r = analyse_recording(rec);
  ASSERT_EQ(r.cupti.size(), 1u);
  EXPECT_EQ(r.cupti[0].state, "absent");
  bool named = false;
  for (const std::string& w : r.warnings)
    named = named || w.find("node-a pid 100: no CUPTI split") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(RecordReport, RanksSharingAGpuAreNamedAndNeverStragglers) {
  // The straggler of TheRankThatStartsLastMostOftenIsAStraggler, but both ranks' comm lines
  // name one GPU: time slicing, not a straggler.
  auto lag = [](int r, int) { return r == 1 ? int64_t{500} * kUs : int64_t{0}; };
  Recording rec = job(2, 8, lag);
  ASSERT_FALSE(analyse_recording(rec).stragglers.empty());
  for (ProcessRecord& p : rec.processes)
    for (RankRecord& r : p.ranks)
      r.init->gpu = "GPU-5a0ed1c2-0000-1111-2222-333344445555";
  const RecordingReport report = analyse_recording(rec);
  EXPECT_TRUE(report.stragglers.empty());
  EXPECT_EQ(report.verdict, Verdict::kNone);
  bool named = false;
  for (const std::string& w : report.warnings)
    named = named || w.find("ranks 0, 1 share GPU GPU-5a0ed1c2") != std::string::npos;
  EXPECT_TRUE(named);
  // The lags are still shown per rank.
  EXPECT_GT(report.ranks[1].start_lag_us.median, 400);
}

// --- What to do next, and a recording with nothing in it ---

TEST(RecordReport, AStragglerSaysWhichProcessToLookAtAndHow) {
  const Recording rec = job(2, 8, [](int r, int i) { return r == 1 && i < 6 ? 300 * kUs : 0; });
  const RecordingReport report = analyse_recording(rec);
  ASSERT_EQ(report.stragglers.size(), 1u);
  const std::string& advice = report.stragglers[0].advice;
  next_step::expect_next_step(advice, "straggler");
  EXPECT_NE(advice.find("look at what rank 1 (node-a pid 101) does between its NCCL calls"),
            std::string::npos)
      << advice;
  EXPECT_NE(advice.find("`top -H -p 101`"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("chronyc"), std::string::npos) << advice;  // one host: one clock
  EXPECT_EQ(report.advice, advice);
  EXPECT_NE(render_recording_text(report).find("\n  what to do: " + advice + ".\n"),
            std::string::npos);
  const auto doc = recording_to_json(report);
  EXPECT_EQ(doc["stragglers"][0]["advice"], advice);
  EXPECT_EQ(doc["advice"], advice);
  // Across hosts the clocks are the first suspect.
  const RecordingReport across = analyse_recording(job(
      2, 8, [](int r, int i) { return r == 1 && i < 6 ? 3000 * kUs : 0; }, "node-b"));
  ASSERT_EQ(across.stragglers.size(), 1u);
  EXPECT_NE(across.stragglers[0].advice.find("`chronyc tracking`, package chrony"),
            std::string::npos)
      << across.stragglers[0].advice;
}

TEST(RecordReport, EveryVerdictEndsWithWhatToDoNext) {
  for (const char* fixture : {"two_rank_clean", "hang_rank3", "mismatch", "dead_process",
                              "straggler", "cut_last_line", "torch_stop"}) {
    const RecordingReport report = analyse_recording(load_recording(kFixtures / fixture));
    next_step::expect_next_step(report.advice, fixture);
    const std::string text = render_recording_text(report);
    EXPECT_NE(text.find("what to do: " + report.advice), std::string::npos) << fixture << "\n"
                                                                            << text;
    const auto doc = recording_to_json(report);
    EXPECT_EQ(doc["advice"], report.advice) << fixture;
    for (const auto& f : doc["standing"]["verdict"]["findings"])
      next_step::expect_next_step(f.at("advice"), std::string(fixture) + ": " + f.dump());
  }
}

// `commtool record -- echo hi`: no process loaded NCCL, so there is nothing to give an all-clear
// on; the report says so and why that can be, and prints no empty tables.
TEST(RecordReport, ARecordingWithoutOperationsSaysSoInsteadOfAnAllClear) {
  RecordingDir dir;
  const RecordingReport report = analyse_recording(load_recording(dir.path));
  EXPECT_EQ(report.verdict, Verdict::kNoOperations);
  const std::string text = render_recording_text(report);
  EXPECT_NE(text.find("No NCCL operation was recorded, so there is nothing to judge: no process "
                      "of the job loaded NCCL with commtool's profiler plugin (the job did not "
                      "use NCCL, or NCCL did not load the plugin).\n  what to do: check that the "
                      "job uses NCCL at all, and that its processes got NCCL_PROFILER_PLUGIN"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("No hang"), std::string::npos) << text;
  EXPECT_EQ(text.find("Operations per communicator"), std::string::npos) << text;
  EXPECT_EQ(text.find("no operation ended"), std::string::npos) << text;
  EXPECT_EQ(text.find("Clocks ("), std::string::npos) << text;
  const auto doc = recording_to_json(report);
  EXPECT_EQ(doc["verdict"], "no-operations");
  next_step::expect_next_step(doc["advice"], "no operations");

  // A process that loaded the plugin and set up a communicator, then did nothing.
  RecordingDir idle;
  idle.append("a.jsonl", lines_of({proc_line(1), comm_line(kComm, 0, 2)}));
  idle.append("b.jsonl", lines_of({proc_line(2), comm_line(kComm, 1, 2)}));
  const RecordingReport quiet = analyse_recording(load_recording(idle.path));
  EXPECT_EQ(quiet.verdict, Verdict::kNoOperations);
  const std::string quiet_text = render_recording_text(quiet);
  EXPECT_NE(quiet_text.find("2 processes loaded the profiler plugin, yet none started an NCCL "
                            "operation"),
            std::string::npos)
      << quiet_text;
  EXPECT_NE(quiet_text.find("it may have stopped before its first collective"), std::string::npos)
      << quiet_text;
}

TEST(RecordReport, ACleanRecordingIsAnAllClearWithItsNextStep) {
  const RecordingReport report = analyse_recording(job(2, 8, [](int, int) { return 0; }));
  EXPECT_EQ(report.verdict, Verdict::kNone);
  const std::string text = render_recording_text(report);
  EXPECT_NE(text.find("No hang, no fault and no straggler.\n  what to do: nothing to fix in the "
                      "collectives"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Operations per communicator"), std::string::npos) << text;
}
