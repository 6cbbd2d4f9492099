// The analysis of a trace run and its report, on hand-built runs: what a user reads in the
// tables must follow from the samples and records exactly.
#include <gtest/gtest.h>

#include "probes/base/error.hpp"
#include "reports/trace/trace_report.hpp"
#include "tracing/trace/trace_analysis.hpp"

using namespace commtool::tracing;

namespace {

OperationSample sample(uint64_t seq, uint64_t bytes, double time_us, bool traced,
                       CompletionMode mode = CompletionMode::kSync, double host_call_us = 5) {
  OperationSample s;
  s.seq = seq;
  s.bytes = bytes;
  s.time_us = time_us;
  s.traced = traced;
  s.mode = mode;
  s.host_call_us = host_call_us;
  return s;
}

TraceRun two_rank_run() {
  TraceRun run;
  run.meta.collective = Collective::kAllReduce;
  run.meta.dtype = DataType::kFloat32;
  run.meta.op = ReduceOp::kSum;
  run.meta.nranks = 2;
  run.meta.sizes = {1 << 20};
  run.meta.modes = {CompletionMode::kSync};
  run.meta.cupti = true;
  run.meta.untraced_pass = true;
  for (int r = 0; r < 2; ++r) {
    RankRun rank;
    rank.rank = r;
    rank.plugin_status = "loaded";
    // Rank 1 is the slow one for seq 10, rank 0 for seq 11.
    rank.samples.push_back(sample(10, 1 << 20, r == 1 ? 20.0 : 10.0, true));
    rank.samples.push_back(sample(11, 1 << 20, r == 0 ? 30.0 : 10.0, true));
    rank.samples.push_back(sample(12, 1 << 20, 25.0, true));
    rank.samples.push_back(sample(1, 1 << 20, 12.5, false, CompletionMode::kSync, 4));
    rank.samples.push_back(sample(2, 1 << 20, 12.5, false, CompletionMode::kSync, 4));
    run.ranks.push_back(rank);
  }
  return run;
}

}  // namespace

TEST(TraceAnalysis, AnOperationTakesAsLongAsItsSlowestRank) {
  TraceReport r = analyse(two_rank_run());
  ASSERT_EQ(r.sizes.size(), 1u);
  EXPECT_EQ(r.sizes[0].time_us.n, 3);
  EXPECT_DOUBLE_EQ(r.sizes[0].time_us.min, 20.0);
  EXPECT_DOUBLE_EQ(r.sizes[0].time_us.median, 25.0);
  EXPECT_DOUBLE_EQ(r.sizes[0].time_us.max, 30.0);
}

TEST(TraceAnalysis, BusbwUsesTheMedianAndNcclTestsFactor) {
  TraceReport r = analyse(two_rank_run());
  // 1 MiB in 25 us = 41.94 GB/s algbw; allreduce at 2 ranks: busbw = algbw * 2(n-1)/n.
  EXPECT_NEAR(r.sizes[0].algbw_gbps, 1048576.0 / 25e-6 / 1e9, 1e-9);
  EXPECT_NEAR(r.sizes[0].busbw_gbps, r.sizes[0].algbw_gbps, 1e-9);
  EXPECT_EQ(r.sizes[0].count, (1u << 20) / 4);
}

TEST(TraceAnalysis, TracedOverUntracedComparesMediansAndHostCalls) {
  TraceReport r = analyse(two_rank_run());
  ASSERT_TRUE(r.sizes[0].traced_over_untraced.has_value());
  EXPECT_DOUBLE_EQ(*r.sizes[0].traced_over_untraced, 25.0 / 12.5);
  ASSERT_TRUE(r.sizes[0].host_call_delta_us.has_value());
  EXPECT_DOUBLE_EQ(*r.sizes[0].host_call_delta_us, 1.0);
}

TEST(TraceAnalysis, NoRatioWithoutAnUntracedPass) {
  TraceRun run = two_rank_run();
  run.meta.untraced_pass = false;
  EXPECT_FALSE(analyse(run).sizes[0].traced_over_untraced.has_value());
}

TEST(TraceAnalysis, UntracedRunReportsUntracedTimes) {
  TraceRun run = two_rank_run();
  run.meta.cupti = false;
  TraceReport r = analyse(run);
  EXPECT_DOUBLE_EQ(r.sizes[0].time_us.median, 12.5);
  EXPECT_EQ(r.sizes[0].time_us.n, 2);
}

TEST(TraceAnalysis, NcclChoiceComesFromThePluginRecordsOfThatSize) {
  TraceRun run = two_rank_run();
  commtool::nccl_profiler::CollectiveRecord rec;
  rec.func = "AllReduce";
  rec.count = (1 << 20) / 4;
  rec.algo = "RING";
  rec.proto = "SIMPLE";
  rec.channels = 4;
  run.ranks[0].nccl.push_back(rec);
  rec.count = 7;  // another size: not this row's
  rec.algo = "TREE";
  run.ranks[0].nccl.push_back(rec);
  const NcclChoice choice = analyse(run).sizes[0].nccl_choice;
  ASSERT_EQ(choice.ways.size(), 1u);
  EXPECT_EQ(choice.ways[0].algo, "RING");
  EXPECT_EQ(choice.ways[0].proto, "SIMPLE");
  EXPECT_EQ(choice.ways[0].channels, 4);
  EXPECT_EQ(to_string(choice), "RING/SIMPLE, 4 ch");
}

TEST(TraceAnalysis, NcclChoiceIsUnknownWithThePluginsReason) {
  TraceRun run = two_rank_run();
  run.ranks[0].plugin_status = "not loaded: NCCL did not load it";
  EXPECT_EQ(to_string(analyse(run).sizes[0].nccl_choice),
            "unknown (not loaded: NCCL did not load it)");
}

TEST(TraceAnalysis, WrongElementsAddUpOverRanks) {
  TraceRun run = two_rank_run();
  run.ranks[0].samples[0].wrong_elements = 2;
  run.ranks[1].samples[1].wrong_elements = 3;
  EXPECT_EQ(analyse(run).sizes[0].wrong_elements, 5u);
}

namespace {

// One traced operation of rank 0 with records the attribution can place: input ready at 1000,
// NCCL copy 1010..3010 on stream 2, end event at 3015, consumer kernel from 3020.
void add_traced_operation(RankRun& rank, uint64_t seq, uint64_t shift, CompletionMode mode) {
  auto t = [&](uint64_t ns) { return ns + shift; };
  RecordSet& r = rank.records;
  const uint32_t corr = static_cast<uint32_t>(100 + seq);
  r.events.push_back({11, 1, t(1000)});
  r.stream_waits.push_back({2, 11, t(105), t(108)});
  r.api.push_back({corr, 7, t(110), t(140), "cudaMemcpyAsync"});
  r.gpu.push_back({GpuWorkKind::kMemcpy, 2, corr, t(1010), t(3010), "memcpy DtoD"});
  r.events.push_back({12, 2, t(3015)});
  r.stream_waits.push_back({3, 12, t(150), t(152)});
  r.gpu.push_back({GpuWorkKind::kKernel, 3, corr + 1000, t(3020), t(3100), "check"});
  OperationMark op;
  op.seq = seq;
  op.thread = 7;
  op.producer_stream = 1;
  op.nccl_stream = 2;
  op.consumer_stream = 3;
  op.input_ready_event = 11;
  op.end_event = 12;
  op.enqueue_start_ns = t(100);
  op.enqueue_end_ns = t(150);
  op.wait_start_ns = t(150);
  op.wait_end_ns = mode == CompletionMode::kDeviceSync ? t(3500) : t(160);
  r.operations.push_back(op);
  rank.samples.push_back(sample(seq, 4096, 2.0, true, mode));
}

TraceRun split_run() {
  TraceRun run;
  run.meta.collective = Collective::kAllReduce;
  run.meta.dtype = DataType::kFloat32;
  run.meta.op = ReduceOp::kSum;
  run.meta.nranks = 1;
  run.meta.sizes = {4096};
  run.meta.modes = {CompletionMode::kAsyncWait, CompletionMode::kDeviceSync};
  run.meta.cupti = true;
  RankRun rank;
  add_traced_operation(rank, 1, 0, CompletionMode::kDeviceSync);
  add_traced_operation(rank, 2, 10000, CompletionMode::kAsyncWait);
  add_traced_operation(rank, 3, 20000, CompletionMode::kAsyncWait);
  run.ranks.push_back(rank);
  return run;
}

}  // namespace

TEST(TraceAnalysis, SplitRowsFollowTheModeOrderAsked) {
  TraceReport r = analyse(split_run());
  ASSERT_EQ(r.splits.size(), 2u);
  EXPECT_EQ(r.splits[0].mode, CompletionMode::kAsyncWait);
  EXPECT_EQ(r.splits[0].operations, 2);
  EXPECT_EQ(r.splits[1].mode, CompletionMode::kDeviceSync);
  EXPECT_EQ(r.splits[1].operations, 1);
}

TEST(TraceAnalysis, SplitCountsCompletionAtWaitReturn) {
  TraceReport r = analyse(split_run());
  EXPECT_EQ(r.splits[0].complete, 0);  // async-wait returned at 160 ns, the end came at 3015
  EXPECT_EQ(r.splits[1].complete, 1);  // device-sync returned after it
}

TEST(TraceAnalysis, SplitIntervalsComeFromTheRecords) {
  TraceReport r = analyse(split_run());
  const SplitRow& a = r.splits[0];
  EXPECT_DOUBLE_EQ(a.host_call_us.median, 0.05);
  EXPECT_DOUBLE_EQ(a.host_wait_us.median, 0.01);
  EXPECT_DOUBLE_EQ(a.kernel_us.median, 2.0);
  EXPECT_DOUBLE_EQ(a.stream_dependency_us.median, 2.02);  // 1000 -> 3020
  ASSERT_TRUE(a.host_over_dependency.has_value());
  EXPECT_NEAR(*a.host_over_dependency, 0.06 / 2.02, 1e-12);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(TraceAnalysis, MissingRecordsBecomeWarningsNamingTheRank) {
  TraceRun run = split_run();
  run.ranks[0].records.events.clear();
  TraceReport r = analyse(run);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_EQ(r.warnings[0].rfind("rank 0: operation 1:", 0), 0u) << r.warnings[0];
}

// The warnings end with what to do about them: one step per kind, in the text and the JSON.
TEST(TraceAnalysis, WarningsEndWithWhatToDoNext) {
  EXPECT_TRUE(analyse(split_run()).advice.empty());  // no warning, nothing to do
  TraceRun missing = split_run();
  missing.ranks[0].records.events.clear();
  TraceReport r = analyse(missing);
  ASSERT_EQ(r.advice.size(), 1u);
  EXPECT_NE(r.advice[0].find("CUPTI's records of some operations are missing"), std::string::npos);
  EXPECT_NE(r.advice[0].find("fewer measured operations per size (--iters)"), std::string::npos);
  const std::string text = commtool::reports::render_trace_text(r);
  EXPECT_NE(text.find("\n  what to do: " + r.advice[0] + "\n"), std::string::npos) << text;
  EXPECT_EQ(commtool::reports::trace_to_json(r)["advice"][0], r.advice[0]);

  TraceRun dropped = split_run();
  dropped.ranks[0].records.dropped_records = 17;
  EXPECT_EQ(analyse(dropped).advice, r.advice);
  TraceRun cut = split_run();
  cut.warnings.push_back("rank0.jsonl:9: the last record is cut off");
  const TraceReport c = analyse(cut);
  ASSERT_EQ(c.advice.size(), 1u);
  EXPECT_NE(c.advice[0].find("run the trace again for a whole one"), std::string::npos);
}

TEST(TraceAnalysis, ScopeRowsCountWhichMarkerFinishedFirst) {
  TraceRun run = split_run();
  for (int i = 0; i < 4; ++i) {
    StreamScopeSample s;
    s.mode = CompletionMode::kAsyncWait;
    s.b_before_a_us = i < 3 ? 100000.0 : -1.0;
    s.complete_at_wait_return = i == 3;
    s.host_wait_us = 17.0;
    run.ranks[0].scope.push_back(s);
  }
  TraceReport r = analyse(run);
  ASSERT_EQ(r.scope.size(), 1u);
  EXPECT_EQ(r.scope[0].samples, 4);
  EXPECT_EQ(r.scope[0].b_first, 3);
  EXPECT_EQ(r.scope[0].complete_at_wait_return, 1);
  EXPECT_DOUBLE_EQ(r.scope[0].host_wait_us.median, 17.0);
}

TEST(TraceReportText, SyncWaitIsInsideTheCallAndPollingIsLabelledHostTime) {
  TraceRun run = split_run();
  run.meta.modes = {CompletionMode::kSync, CompletionMode::kBlockingWait};
  run.ranks[0].samples[0].mode = CompletionMode::kSync;
  run.ranks[0].samples[1].mode = CompletionMode::kBlockingWait;
  run.ranks[0].samples[1].poll_ms = 10;
  run.ranks[0].records.operations[1].wait_polls = true;
  std::string text = commtool::reports::render_trace_text(analyse(run));
  EXPECT_NE(text.find("- (inside the call)"), std::string::npos) << text;
  EXPECT_NE(text.find("blocking-wait 10ms poll"), std::string::npos) << text;
  EXPECT_NE(text.find("host, polling"), std::string::npos) << text;
}

TEST(TraceReportJson, HasSchemaVersionAndEveryTable) {
  nlohmann::json j = commtool::reports::trace_to_json(analyse(split_run()));
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_EQ(j.at("sizes").size(), 1u);
  EXPECT_EQ(j.at("completion_split").size(), 2u);
  EXPECT_TRUE(j.at("sizes")[0].at("traced_over_untraced").is_null());
  EXPECT_EQ(j.at("completion_split")[0].at("mode"), "async-wait");
}

TEST(TraceRunModes, ParseTakesEachNameBackAndNothingElse) {
  for (CompletionMode m : {CompletionMode::kSync, CompletionMode::kAsyncWait,
                           CompletionMode::kDeviceSync, CompletionMode::kBlockingWait}) {
    EXPECT_EQ(parse_completion_mode(to_string(m)), m);
    EXPECT_NE(std::string(kCompletionModeNames).find(to_string(m)), std::string::npos);
  }
  EXPECT_EQ(parse_completion_mode("blocking"), std::nullopt);
  EXPECT_EQ(parse_completion_mode("all"), std::nullopt);  // the CLI's, expanded before
}

// --- Ranks on one GPU, and kernel starts across ranks ---

namespace {

// Two ranks, each with the traced operations 1 and 2 (async-wait, 4 KiB); rank 1's records run
// `rank1_late_ns` later than rank 0's on the common clock. `bus0` and `bus1` are their GPUs.
TraceRun two_rank_split_run(const std::string& bus0, const std::string& bus1,
                            uint64_t rank1_late_ns = 500) {
  TraceRun run;
  run.meta.collective = Collective::kAllReduce;
  run.meta.dtype = DataType::kFloat32;
  run.meta.op = ReduceOp::kSum;
  run.meta.nranks = 2;
  run.meta.sizes = {4096};
  run.meta.modes = {CompletionMode::kAsyncWait};
  run.meta.cupti = true;
  for (int r = 0; r < 2; ++r) {
    RankRun rank;
    rank.rank = r;
    rank.device = r;
    rank.bus_id = r == 0 ? bus0 : bus1;
    rank.plugin_status = "loaded";
    const uint64_t late = r == 1 ? rank1_late_ns : 0;
    add_traced_operation(rank, 1, 0 + late, CompletionMode::kAsyncWait);
    add_traced_operation(rank, 2, 10000 + late, CompletionMode::kAsyncWait);
    run.ranks.push_back(rank);
  }
  return run;
}

const std::string kBusA = "0000:1b:00.0";
const std::string kBusB = "0000:2c:00.0";

}  // namespace

TEST(TraceAnalysis, RanksWithTheSameBusIdShareAGpu) {
  TraceReport r = analyse(two_rank_split_run(kBusA, kBusA));
  EXPECT_TRUE(r.placement.shared_gpu());
  EXPECT_EQ(r.placement.ranks, 2);
  EXPECT_EQ(r.placement.gpus, 1);
}

// An MPI run: the same bus id on two hosts is two GPUs, and each rank's GPU names its host.
TEST(TraceAnalysis, TheSameBusIdOnTwoHostsIsTwoGpusNamedWithTheirHosts) {
  TraceRun run = two_rank_split_run(kBusA, kBusA);
  run.ranks[0].host = "node-a";
  run.ranks[1].host = "node-b";
  TraceReport r = analyse(run);
  EXPECT_FALSE(r.placement.shared_gpu());
  EXPECT_EQ(r.placement.gpus, 2);
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus[1].rfind("rank 1: node-b GPU 1 (" + kBusA, 0), 0u) << r.gpus[1];
}

TEST(TraceAnalysis, RanksOfOneHostAreNamedWithoutIt) {
  TraceRun run = two_rank_split_run(kBusA, kBusA);
  run.ranks[0].host = run.ranks[1].host = "node-a";
  TraceReport r = analyse(run);
  EXPECT_TRUE(r.placement.shared_gpu());
  EXPECT_EQ(r.gpus[0].rfind("rank 0: GPU 0 (", 0), 0u) << r.gpus[0];
}

TEST(TraceAnalysis, RanksWithDifferentBusIdsDoNotShareAGpu) {
  TraceReport r = analyse(two_rank_split_run(kBusA, kBusB));
  EXPECT_FALSE(r.placement.shared_gpu());
  EXPECT_EQ(r.placement.gpus, 2);
}

TEST(TraceReportText, SharedGpuRunStartsWithTheSharedGpuLabel) {
  std::string text =
      commtool::reports::render_trace_text(analyse(two_rank_split_run(kBusA, kBusA)));
  EXPECT_EQ(text.rfind("SHARED GPU: 2 ranks on 1 GPU", 0), 0u) << text;
}

TEST(TraceReportText, RunOnGpusOfTheirOwnHasNoSharedGpuLabel) {
  std::string text =
      commtool::reports::render_trace_text(analyse(two_rank_split_run(kBusA, kBusB)));
  EXPECT_EQ(text.find("SHARED GPU"), std::string::npos) << text;
}

TEST(TraceReportJson, SharedGpuRunHasItsRankPlacement) {
  nlohmann::json j = commtool::reports::trace_to_json(analyse(two_rank_split_run(kBusA, kBusA)));
  EXPECT_EQ(j.at("rank_placement"),
            nlohmann::json(
                {{"ranks", 2}, {"gpus", 1}, {"shared_gpu", true}, {"most_ranks_on_a_gpu", 2}}));
}

TEST(TraceReportJson, RunOnGpusOfTheirOwnIsNotMarkedShared) {
  nlohmann::json j = commtool::reports::trace_to_json(analyse(two_rank_split_run(kBusA, kBusB)));
  EXPECT_EQ(j.at("rank_placement").at("shared_gpu"), false);
}

TEST(TraceReportJson, CarriesTheCommunicatorModeOfTheRun) {
  TraceRun run = two_rank_split_run(kBusA, kBusB);
  run.meta.comm = commtool::nccl::CommMode::kNonBlocking;
  nlohmann::json j = commtool::reports::trace_to_json(analyse(run));
  EXPECT_EQ(j.at("comm"), "nonblocking");
}

TEST(TraceAnalysis, SplitRowGetsTheKernelStartSpreadAcrossRanks) {
  TraceReport r = analyse(two_rank_split_run(kBusA, kBusB, 500));
  ASSERT_EQ(r.splits.size(), 1u);
  EXPECT_EQ(r.splits[0].start_spread_us.n, 2);  // operations 1 and 2
  EXPECT_DOUBLE_EQ(r.splits[0].start_spread_us.median, 0.5);
}

TEST(TraceAnalysis, RankWhoseKernelStartsLaterHasTheLargerStartLag) {
  TraceReport r = analyse(two_rank_split_run(kBusA, kBusB, 500));
  ASSERT_EQ(r.splits.size(), 1u);
  ASSERT_EQ(r.splits[0].rank_start_lag_us.size(), 2u);
  EXPECT_DOUBLE_EQ(r.splits[0].rank_start_lag_us[0], 0.0);
  EXPECT_DOUBLE_EQ(r.splits[0].rank_start_lag_us[1], 0.5);
}

TEST(TraceAnalysis, OneRankHasNoStartLags) {
  TraceReport r = analyse(split_run());
  ASSERT_FALSE(r.splits.empty());
  EXPECT_TRUE(r.splits[0].rank_start_lag_us.empty());
}

TEST(TraceReportText, MultiRankRunHasTheKernelStartAcrossRanksTable) {
  std::string text =
      commtool::reports::render_trace_text(analyse(two_rank_split_run(kBusA, kBusB)));
  EXPECT_NE(text.find("Kernel start across ranks"), std::string::npos) << text;
}

TEST(TraceReportJson, SplitRowCarriesEachRanksStartLag) {
  nlohmann::json j =
      commtool::reports::trace_to_json(analyse(two_rank_split_run(kBusA, kBusB, 500)));
  EXPECT_EQ(j.at("completion_split")[0].at("rank_start_lag_us"), nlohmann::json({0.0, 0.5}));
}
