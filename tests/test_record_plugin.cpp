// The profiler plugin's record mode as NCCL 2.28 drives it: the proc, comm, start, end and fin
// lines it writes, and when it decides that an operation has ended.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <variant>
#include <vector>

#include "record_plugin_test_support.hpp"

using namespace commtool::nccl_profiler;
using record_plugin_test::host_name;
using record_plugin_test::kRecordMask;
using record_plugin_test::RecordPluginTest;

TEST_F(RecordPluginTest, AsksForOperationsTheirApiCallsAndKernelChannels) {
  int mask = 0;
  void* ctx = init(1, 2, 0, &mask);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(mask, kRecordMask);
  finalize(ctx);
}

TEST_F(RecordPluginTest, FileStartsWithProcThenCommAndEndsWithFin) {
  void* ctx = init(0xfedcba9876543210ULL, 8, 3);
  finalize(ctx);
  auto all = lines();
  ASSERT_EQ(all.size(), 3u);
  auto proc = std::get<ProcLine>(all[0]);
  EXPECT_EQ(proc.pid, getpid());
  EXPECT_EQ(proc.host, host_name());
  EXPECT_GT(proc.realtime_ns, 0);
  EXPECT_GT(proc.monotonic_ns, 0);
  // Empty unless a test before this one loaded NCCL into the process.
  EXPECT_TRUE(std::regex_match(proc.nccl_version, std::regex("([0-9]+\\.[0-9]+\\.[0-9]+)?")))
      << proc.nccl_version;
  auto comm = std::get<CommLine>(all[1]);
  EXPECT_EQ(comm.comm, 0xfedcba9876543210ULL);
  EXPECT_EQ(comm.rank, 3);
  EXPECT_EQ(comm.nranks, 8);
  EXPECT_EQ(comm.nodes, 1);
  EXPECT_EQ(comm.name, "pg:0");
  auto fin = std::get<FinLine>(all[2]);
  EXPECT_EQ(fin.comm, comm.comm);
  EXPECT_EQ(fin.rank, 3);
  EXPECT_GE(fin.t_ns, comm.t_ns);
}

// PyTorch loads its NCCL privately (RTLD_LOCAL): a global lookup of ncclGetVersion finds
// nothing, so the version is asked of the library that called init.
TEST_F(RecordPluginTest, ProcLineNamesTheVersionOfAPrivatelyLoadedNccl) {
  void* nccl = dlopen(COMMTOOL_FAKE_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nccl, nullptr) << dlerror();
  ASSERT_EQ(dlsym(RTLD_DEFAULT, "ncclGetVersion"), nullptr) << "a global NCCL is loaded";
  using Init = int (*)(ProfilerV5*, void**, uint64_t, int*);
  auto fake_init = reinterpret_cast<Init>(dlsym(nccl, "fake_nccl_init"));
  ASSERT_NE(fake_init, nullptr);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(fake_init(table_, &ctx, 42, &mask), 0);
  ASSERT_NE(ctx, nullptr);
  open_contexts_.push_back(ctx);
  finalize(ctx);
  auto procs = lines_of_kind<ProcLine>();
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].nccl_version, "2.28.9");
  // The comm line names it too: with record --cupti the proc line is written at cuInit, before
  // NCCL's init, and has no version.
  auto comms = lines_of_kind<CommLine>();
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0].nccl_version, "2.28.9");
  // No CUDA driver in this process: no GPU named.
  EXPECT_EQ(comms[0].gpu, "");
  dlclose(nccl);
}

TEST_F(RecordPluginTest, StartLineIsWrittenWhileTheOperationRuns) {
  void* ctx = init(7);
  void* api = api_start(ctx);
  table_->stopEvent(api);
  void* op = coll_start(ctx, api, 41, 2);
  ASSERT_NE(op, nullptr);
  wait_for_flush();  // no finalize: what a hung process leaves
  auto starts = lines_of_kind<StartLine>();
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].comm, 7u);
  EXPECT_EQ(starts[0].index, 0u);
  EXPECT_EQ(starts[0].kind, OpKind::kCollective);
  EXPECT_EQ(starts[0].seq, 41u);
  EXPECT_EQ(starts[0].func, "AllReduce");
  EXPECT_EQ(starts[0].count, 256u);
  EXPECT_EQ(starts[0].datatype, "ncclFloat32");
  EXPECT_TRUE(lines_of_kind<EndLine>().empty());
  finalize(ctx);
}

TEST_F(RecordPluginTest, EndLineHoldsTheCallTheLaunchAndTheKernelsGpuTime) {
  void* ctx = init(7);
  void* api = api_start(ctx);
  table_->stopEvent(api);
  void* op = coll_start(ctx, api, 5, 3);
  table_->stopEvent(op);
  void* c0 = channel_start(ctx, op, 0, 5000);
  void* c1 = channel_start(ctx, op, 1, 4990);
  void* c2 = channel_start(ctx, op, 2, 5010);
  channel_stop(c1, 9000);
  channel_stop(c0, 9100);
  wait_for_flush();
  EXPECT_TRUE(lines_of_kind<EndLine>().empty()) << "one channel has not finished";
  channel_stop(c2, 8000);
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  const EndLine& e = ends[0];
  const StartLine start = lines_of_kind<StartLine>().at(0);
  EXPECT_EQ(e.op, start);
  EXPECT_EQ(e.gpu, (Interval{4990, 9100}));
  EXPECT_EQ(e.kernel_channels, 3);
  EXPECT_EQ(e.channels, 3);
  EXPECT_TRUE(e.complete);
  EXPECT_FALSE(e.graph_captured);
  EXPECT_EQ(e.algo, "RING");
  EXPECT_EQ(e.proto, "SIMPLE");
  EXPECT_EQ(e.warps, 8);
  EXPECT_EQ(e.root, -1);
  ASSERT_TRUE(e.api.has_value());
  EXPECT_LE(e.api->start_ns, e.api->end_ns);
  EXPECT_LE(e.api->end_ns, e.enqueue.start_ns);  // NCCL stops the API event before launching
  EXPECT_EQ(e.enqueue.start_ns, start.t_ns);
  EXPECT_LE(e.enqueue.start_ns, e.enqueue.end_ns);
  ASSERT_TRUE(e.seen.has_value());
  EXPECT_GE(e.seen->start_ns, e.enqueue.end_ns);  // channels were reported after the stop
  EXPECT_LT(e.seen->start_ns, e.seen->end_ns);    // the last one 350 ms after the first
}

TEST_F(RecordPluginTest, ChannelsReportedBeforeTheLaunchEndsWaitForIt) {
  void* ctx = init(7);
  void* api = api_start(ctx);
  table_->stopEvent(api);
  void* op = coll_start(ctx, api, 0, 1);
  channel_stop(channel_start(ctx, op, 0, 10), 20);
  wait_for_flush();
  EXPECT_TRUE(lines_of_kind<EndLine>().empty());
  table_->stopEvent(op);
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_TRUE(ends[0].complete);
  EXPECT_EQ(ends[0].gpu, (Interval{10, 20}));
}

TEST_F(RecordPluginTest, AnApiCallThatStopsLastIsWaitedFor) {
  void* ctx = init(7);
  void* api = api_start(ctx);
  void* op = coll_start(ctx, api, 0, 1);
  table_->stopEvent(op);
  channel_stop(channel_start(ctx, op, 0, 10), 20);
  wait_for_flush();
  EXPECT_TRUE(lines_of_kind<EndLine>().empty());
  table_->stopEvent(api);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  ASSERT_TRUE(ends[0].api.has_value());
  EXPECT_GE(ends[0].api->end_ns, ends[0].enqueue.end_ns);
  EXPECT_TRUE(ends[0].complete);
  finalize(ctx);
}

TEST_F(RecordPluginTest, WithoutAnApiEventTheOperationStillEnds) {
  void* ctx = init(7);
  void* op = coll_start(ctx, nullptr, 0, 1);
  table_->stopEvent(op);
  channel_stop(channel_start(ctx, op, 0, 10), 20);
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_FALSE(ends[0].api.has_value());
  EXPECT_TRUE(ends[0].complete);
}

TEST_F(RecordPluginTest, PointToPointHasAPeerAndNoSequenceNumber) {
  void* ctx = init(7);
  EventDescrV5 d{};
  d.type = kP2pApi;
  void* api = nullptr;
  table_->startEvent(ctx, &api, &d);
  table_->stopEvent(api);
  void* op = p2p_start(ctx, api, 1, 2);
  table_->stopEvent(op);
  void* c0 = channel_start(ctx, op, 0, 100);
  void* c1 = channel_start(ctx, op, 1, 101);
  channel_stop(c0, 200);
  channel_stop(c1, 201);
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].op.kind, OpKind::kP2p);
  EXPECT_EQ(ends[0].op.seq, std::nullopt);
  EXPECT_EQ(ends[0].op.peer, 1);
  EXPECT_EQ(ends[0].op.func, "Send");
  EXPECT_EQ(ends[0].algo, "");
  EXPECT_TRUE(ends[0].api.has_value());
  EXPECT_EQ(ends[0].gpu, (Interval{100, 201}));
  EXPECT_TRUE(ends[0].complete);
}

TEST_F(RecordPluginTest, IndexCountsEveryOperationOfACommunicator) {
  void* a = init(1);
  void* b = init(2);
  run_collective(a, 0, 1, 0);
  run_collective(b, 0, 1, 0);
  run_collective(a, 1, 1, 0);
  void* op = p2p_start(a, nullptr, 1, 1);
  table_->stopEvent(op);
  channel_stop(channel_start(a, op, 0, 1), 2);
  finalize(a);
  finalize(b);
  std::vector<uint64_t> of_a, of_b;
  for (const EndLine& e : lines_of_kind<EndLine>())
    (e.op.comm == 1 ? of_a : of_b).push_back(e.op.index);
  EXPECT_EQ(of_a, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(of_b, (std::vector<uint64_t>{0}));
}

TEST_F(RecordPluginTest, OneRankOperationsEndAtOnceWithoutGpuTime) {
  // NCCL copies without a kernel on a 1-rank communicator: no channel is ever reported.
  void* ctx = init(7, /*nranks=*/1);
  void* api = api_start(ctx);
  table_->stopEvent(api);
  void* op = coll_start(ctx, api, 0, 1);
  table_->stopEvent(op);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_FALSE(ends[0].gpu.has_value());
  EXPECT_FALSE(ends[0].seen.has_value());
  EXPECT_EQ(ends[0].kernel_channels, 0);
  EXPECT_FALSE(ends[0].complete);
  EXPECT_TRUE(ends[0].api.has_value());
  finalize(ctx);
}

TEST_F(RecordPluginTest, ASendToTheRankItselfEndsAtOnceWithoutGpuTime) {
  // A copy inside the kernel: NCCL reports no channel for it. A send to another rank waits.
  void* ctx = init(7, /*nranks=*/2, /*rank=*/1);
  void* api = api_start(ctx);
  table_->stopEvent(api);
  void* other = p2p_start(ctx, api, /*peer=*/0, 1);
  table_->stopEvent(other);
  void* api2 = api_start(ctx);
  table_->stopEvent(api2);
  void* self = p2p_start(ctx, api2, /*peer=*/1, 1);
  table_->stopEvent(self);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].op.peer, 1);
  EXPECT_FALSE(ends[0].gpu.has_value());
  EXPECT_FALSE(ends[0].complete);
  finalize(ctx);
}

TEST_F(RecordPluginTest, AnOperationWithoutChannelsEndsWhenALaterOneCompletes) {
  void* ctx = init(7);
  void* api = api_start(ctx);
  table_->stopEvent(api);
  void* silent = coll_start(ctx, api, 0, 4);  // e.g. a path without proxy: no KernelCh
  table_->stopEvent(silent);
  wait_for_flush();
  EXPECT_TRUE(lines_of_kind<EndLine>().empty()) << "it may still be queued on the GPU";
  run_collective(ctx, 1, 2, 1000);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].op.index, 1u);
  EXPECT_TRUE(ends[0].complete);
  EXPECT_EQ(ends[1].op.index, 0u);
  EXPECT_FALSE(ends[1].complete);
  EXPECT_FALSE(ends[1].gpu.has_value());
  EXPECT_EQ(ends[1].kernel_channels, 0);
  EXPECT_TRUE(ends[1].api.has_value());
  finalize(ctx);
}

TEST_F(RecordPluginTest, AnOperationOfAnotherCommunicatorEndsNoSilentOne) {
  void* a = init(1);
  void* b = init(2);
  void* silent = coll_start(a, nullptr, 0, 1);
  table_->stopEvent(silent);
  run_collective(b, 0, 1, 0);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].op.comm, 2u);
  finalize(a);
  finalize(b);
}

TEST_F(RecordPluginTest, FinalizeEndsOperationsWithChannelsOutstanding) {
  void* ctx = init(7);
  void* op = coll_start(ctx, nullptr, 0, 3);
  table_->stopEvent(op);
  void* c0 = channel_start(ctx, op, 0, 100);
  channel_start(ctx, op, 1, 90);
  channel_stop(c0, 300);
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_FALSE(ends[0].complete);
  EXPECT_EQ(ends[0].kernel_channels, 1);
  EXPECT_EQ(ends[0].gpu, (Interval{90, 300}));  // what was reported, nothing more
  auto all = lines();
  EXPECT_TRUE(std::holds_alternative<FinLine>(all.back()));
}

TEST_F(RecordPluginTest, ALaunchThatNeverStoppedEndsAtFinalizeWithAnEmptyEnqueue) {
  void* ctx = init(7);
  coll_start(ctx, nullptr, 0, 1);
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_FALSE(ends[0].complete);
  EXPECT_EQ(ends[0].enqueue.start_ns, ends[0].enqueue.end_ns);
}

TEST_F(RecordPluginTest, GraphReplaysAreMarkedAndClaimNoApiCall) {
  void* ctx = init(7);
  void* api = api_start(ctx, /*graph=*/true);  // at capture
  table_->stopEvent(api);
  for (int replay = 0; replay < 2; ++replay) {  // each replay starts the operation again
    void* op = coll_start(ctx, api, static_cast<uint64_t>(replay), 1);
    table_->stopEvent(op);
    channel_stop(channel_start(ctx, op, 0, 10), 20);
  }
  finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 2u);
  for (const EndLine& e : ends) {
    EXPECT_TRUE(e.graph_captured);
    EXPECT_FALSE(e.api.has_value());
    EXPECT_TRUE(e.complete);
  }
}
