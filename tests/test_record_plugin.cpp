// The profiler plugin's record mode as NCCL drives it: dlopen the built library, call its
// ncclProfiler_v5 table with the events NCCL 2.28 sends (API call, operation, kernel channels
// with GPU timers), then read the recording back with parse_line.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

// record_line.hpp before nccl_profiler_v5.hpp: see record_mode.cpp.
#include "tracing/profiler/record_line.hpp"

#include "tracing/profiler/collective_record.hpp"
#include "tracing/profiler/nccl_profiler_v5.hpp"

namespace fs = std::filesystem;
using namespace commtool::nccl_profiler;

namespace {

constexpr int kRecordMask = static_cast<int>(kColl | kP2p | kCollApi | kP2pApi | kKernelCh);

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

class RecordPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // NODELETE as in test_profiler_plugin.cpp; the library is linked -z nodelete anyway.
    handle_ = dlopen(COMMTOOL_PROFILER_PLUGIN, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    ASSERT_NE(handle_, nullptr) << dlerror();
    table_ = static_cast<ProfilerV5*>(dlsym(handle_, "ncclProfiler_v5"));
    ASSERT_NE(table_, nullptr);
    static int test_number = 0;
    dir_ = fs::temp_directory_path() /
           ("commtool-record-" + std::to_string(getpid()) + "-" + std::to_string(++test_number));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    setenv(kRecordDirEnv, dir_.c_str(), 1);
    unsetenv(kOutputEnv);
  }
  void TearDown() override {
    // A test that stopped at a failed assertion leaves its communicators: finalising them here
    // keeps the next test's finalize the process's last, which is what flushes its lines.
    while (!open_contexts_.empty())
      finalize(open_contexts_.back());
    unsetenv(kRecordDirEnv);
    unsetenv("COMMTOOL_RECORD_MAX_OPERATIONS");
    unsetenv("COMMTOOL_RECORD_BUFFER_BYTES");
    fs::remove_all(dir_);
    if (handle_) dlclose(handle_);
  }

  fs::path file_of(pid_t pid) const {
    return dir_ / "procs" / (host_name() + "-" + std::to_string(pid) + ".jsonl");
  }

  std::vector<RecordLine> lines(pid_t pid = getpid()) const {
    std::vector<RecordLine> out;
    std::ifstream in(file_of(pid));
    for (std::string text; std::getline(in, text);) {
      auto line = parse_line(text);
      EXPECT_TRUE(line.has_value()) << text;
      if (line) out.push_back(*line);
    }
    return out;
  }

  template <class T>
  std::vector<T> lines_of_kind(pid_t pid = getpid()) const {
    std::vector<T> out;
    for (const RecordLine& line : lines(pid)) {
      if (auto* l = std::get_if<T>(&line)) out.push_back(*l);
    }
    return out;
  }

  // The flush period is 100 ms; three of them leave no doubt.
  static void wait_for_flush() { sleep_ms(350); }

  void* init(uint64_t comm, int nranks = 2, int rank = 0, int* mask_out = nullptr) {
    void* ctx = nullptr;
    int mask = -1;
    EXPECT_EQ(table_->init(&ctx, comm, &mask, "pg:0", 1, nranks, rank, nullptr), kSuccess);
    if (mask_out != nullptr) *mask_out = mask;
    if (ctx != nullptr) open_contexts_.push_back(ctx);
    return ctx;
  }

  void finalize(void* ctx) {
    std::erase(open_contexts_, ctx);
    EXPECT_EQ(table_->finalize(ctx), kSuccess);
  }

  void* api_start(void* ctx, bool graph = false) {
    EventDescrV5 d{};
    d.type = kCollApi;
    d.collApi.func = "AllReduce";
    d.collApi.count = 256;
    d.collApi.datatype = "ncclFloat32";
    d.collApi.root = -1;
    d.collApi.graphCaptured = graph;
    void* h = nullptr;
    EXPECT_EQ(table_->startEvent(ctx, &h, &d), kSuccess);
    return h;
  }

  void* coll_start(void* ctx, void* api, uint64_t seq, uint8_t channels) {
    EventDescrV5 d{};
    d.type = kColl;
    d.parentObj = api;
    d.coll.seqNumber = seq;
    d.coll.func = "AllReduce";
    d.coll.count = 256;
    d.coll.root = -1;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = channels;
    d.coll.nWarps = 8;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* h = nullptr;
    EXPECT_EQ(table_->startEvent(ctx, &h, &d), kSuccess);
    return h;
  }

  void* p2p_start(void* ctx, void* api, int peer, uint8_t channels) {
    EventDescrV5 d{};
    d.type = kP2p;
    d.parentObj = api;
    d.p2p.func = "Send";
    d.p2p.count = 64;
    d.p2p.datatype = "ncclInt8";
    d.p2p.peer = peer;
    d.p2p.nChannels = channels;
    void* h = nullptr;
    EXPECT_EQ(table_->startEvent(ctx, &h, &d), kSuccess);
    return h;
  }

  // What NCCL's proxy thread does when it sees a channel start: a KernelCh event whose parent
  // is the operation's handle, with the GPU's start time.
  void* channel_start(void* ctx, void* op, uint8_t channel, uint64_t gpu_start) {
    EventDescrV5 d{};
    d.type = kKernelCh;
    d.parentObj = op;
    d.kernelCh.channelId = channel;
    d.kernelCh.pTimer = gpu_start;
    void* h = nullptr;
    EXPECT_EQ(table_->startEvent(ctx, &h, &d), kSuccess);
    return h;
  }

  // ... and when it sees the channel finish: the state with the GPU's end time, then the stop.
  void channel_stop(void* channel, uint64_t gpu_end) {
    EventStateArgsV5 args{};
    args.kernelCh.pTimer = gpu_end;
    EXPECT_EQ(table_->recordEventState(channel, kKernelChStop, &args), kSuccess);
    EXPECT_EQ(table_->stopEvent(channel), kSuccess);
  }

  // One whole collective in NCCL's order: API call, launch, then the kernel's channels.
  void run_collective(void* ctx, uint64_t seq, uint8_t channels, uint64_t gpu_base) {
    void* api = api_start(ctx);
    table_->stopEvent(api);
    void* op = coll_start(ctx, api, seq, channels);
    table_->stopEvent(op);
    std::vector<void*> chs;
    for (uint8_t c = 0; c < channels; ++c)
      chs.push_back(channel_start(ctx, op, c, gpu_base + c));
    for (uint8_t c = 0; c < channels; ++c)
      channel_stop(chs[c], gpu_base + 100 + c);
  }

  void* handle_ = nullptr;
  ProfilerV5* table_ = nullptr;
  fs::path dir_;
  std::vector<void*> open_contexts_;
};

}  // namespace

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

TEST_F(RecordPluginTest, OverTheOperationBoundTheOldestEndsIncomplete) {
  setenv("COMMTOOL_RECORD_MAX_OPERATIONS", "2", 1);
  void* ctx = init(7);
  void* first = coll_start(ctx, nullptr, 0, 1);
  void* first_channel = channel_start(ctx, first, 0, 5);
  coll_start(ctx, nullptr, 1, 1);
  coll_start(ctx, nullptr, 2, 1);
  wait_for_flush();
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].op.index, 0u);
  EXPECT_FALSE(ends[0].complete);
  EXPECT_EQ(ends[0].gpu, (Interval{5, 5}));
  // NCCL still holds the evicted operation's handles: they must be harmless.
  channel_stop(first_channel, 9);
  table_->stopEvent(first);
  finalize(ctx);
  EXPECT_EQ(lines_of_kind<EndLine>().size(), 3u);
}

TEST_F(RecordPluginTest, LinesBeyondTheBufferAreCountedInADropLine) {
  setenv("COMMTOOL_RECORD_BUFFER_BYTES", "3000", 1);
  void* ctx = init(7);
  constexpr int kOperations = 200;  // about 200 bytes each: far more than one flush holds
  for (int i = 0; i < kOperations; ++i)
    coll_start(ctx, nullptr, static_cast<uint64_t>(i), 1);
  wait_for_flush();
  const size_t kept = lines_of_kind<StartLine>().size();
  auto drops = lines_of_kind<DropLine>();
  ASSERT_FALSE(drops.empty());
  uint64_t dropped = 0;
  for (const DropLine& d : drops) {
    dropped += d.lines;
    EXPECT_LE(d.since_ns, d.t_ns);
  }
  EXPECT_EQ(kept + dropped, static_cast<size_t>(kOperations));
  EXPECT_LT(kept, static_cast<size_t>(kOperations));
  finalize(ctx);
}

TEST_F(RecordPluginTest, AnAliveLineComesOnceASecond) {
  void* ctx = init(7);
  std::vector<AliveLine> alive;
  for (int waited_ms = 0; alive.empty() && waited_ms < 5000; waited_ms += 100) {
    sleep_ms(100);
    alive = lines_of_kind<AliveLine>();
  }
  ASSERT_FALSE(alive.empty());
  const ProcLine proc = lines_of_kind<ProcLine>().at(0);
  EXPECT_GE(alive[0].t_ns - proc.monotonic_ns, 1'000'000'000);  // not before a second is up
  finalize(ctx);
}

TEST_F(RecordPluginTest, ThreadsOfTheApplicationAndTheProxyMayCallAtOnce) {
  // One application thread per communicator (NCCL allows no more), each operation's channels
  // reported by a proxy thread while the application thread stops the launch.
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::vector<void*> contexts;
  for (int t = 0; t < kThreads; ++t)
    contexts.push_back(init(static_cast<uint64_t>(t)));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* ctx = contexts[static_cast<size_t>(t)];
      for (int i = 0; i < kPerThread; ++i) {
        void* api = api_start(ctx);
        table_->stopEvent(api);
        void* op = coll_start(ctx, api, static_cast<uint64_t>(i), 2);
        std::thread proxy([&, op] {
          channel_stop(channel_start(ctx, op, 0, 1), 2);
          channel_stop(channel_start(ctx, op, 1, 1), 3);
        });
        table_->stopEvent(op);
        proxy.join();
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (void* ctx : contexts)
    finalize(ctx);
  auto ends = lines_of_kind<EndLine>();
  ASSERT_EQ(ends.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<std::pair<uint64_t, uint64_t>> operations;
  for (const EndLine& e : ends) {
    operations.emplace(e.op.comm, e.op.index);
    EXPECT_LT(e.op.index, static_cast<uint64_t>(kPerThread));
    EXPECT_TRUE(e.complete);
    EXPECT_EQ(e.gpu, (Interval{1, 3}));
    EXPECT_TRUE(e.api.has_value());
  }
  EXPECT_EQ(operations.size(), ends.size());
}

TEST_F(RecordPluginTest, AForkedChildThatUsesNcclWritesItsOwnFile) {
  void* ctx = init(7);
  run_collective(ctx, 0, 1, 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Like a dataloader worker that builds its own communicator.
    void* child_ctx = nullptr;
    int mask = 0;
    table_->init(&child_ctx, 99, &mask, "child", 1, 2, 1, nullptr);
    void* op = coll_start(child_ctx, nullptr, 0, 1);
    table_->stopEvent(op);
    finalize(child_ctx);
    _exit(mask == kRecordMask ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  finalize(ctx);

  auto child_lines = lines(child);
  ASSERT_GE(child_lines.size(), 4u) << file_of(child);
  EXPECT_EQ(std::get<ProcLine>(child_lines[0]).pid, child);
  EXPECT_EQ(std::get<CommLine>(child_lines[1]).comm, 99u);
  for (const RecordLine& l : child_lines) {
    if (auto* e = std::get_if<EndLine>(&l)) {
      EXPECT_EQ(e->op.comm, 99u);
    }
  }
  for (const EndLine& e : lines_of_kind<EndLine>()) {
    EXPECT_EQ(e.op.comm, 7u);
  }
  EXPECT_EQ(lines_of_kind<ProcLine>().size(), 1u);
}

TEST_F(RecordPluginTest, AKilledProcessKeepsWhatItStartedUpTo100msBeforeDeath) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* ctx = init(7);
    coll_start(ctx, nullptr, 0, 1);
    sleep_ms(250);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto child_lines = lines(child);
  ASSERT_EQ(child_lines.size(), 3u) << file_of(child);
  EXPECT_TRUE(std::holds_alternative<StartLine>(child_lines[2]));
}

TEST_F(RecordPluginTest, AProcessThatExitsAtOnceStillWritesWhatItQueued) {
  std::fflush(nullptr);  // the child's exit flushes stdio: nothing of ours may be in it twice
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* ctx = init(7);
    coll_start(ctx, nullptr, 0, 1);
    std::exit(0);  // well within the first flush period
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  auto child_lines = lines(child);
  ASSERT_EQ(child_lines.size(), 3u) << file_of(child);
  EXPECT_TRUE(std::holds_alternative<StartLine>(child_lines[2]));
}

TEST_F(RecordPluginTest, RecordModeWinsOverTraceMode) {
  const fs::path trace = dir_ / "trace.jsonl";
  setenv(kOutputEnv, trace.c_str(), 1);
  int mask = 0;
  void* ctx = init(7, 2, 0, &mask);
  run_collective(ctx, 0, 1, 0);
  finalize(ctx);
  unsetenv(kOutputEnv);
  EXPECT_EQ(mask, kRecordMask);
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_EQ(lines_of_kind<EndLine>().size(), 1u);
}

TEST_F(RecordPluginTest, AnUnwritableDirectoryRecordsNothingAndSaysSoOnce) {
  setenv(kRecordDirEnv, "/proc/commtool-no-such-dir", 1);
  testing::internal::CaptureStderr();
  int mask = -1;
  void* ctx = init(7, 2, 0, &mask);
  void* op = coll_start(ctx, nullptr, 0, 1);
  table_->stopEvent(op);
  int second_mask = -1;
  void* second = init(8, 2, 0, &second_mask);  // another communicator: no second message
  finalize(second);
  finalize(ctx);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(mask, 0);
  EXPECT_EQ(second_mask, 0);
  EXPECT_EQ(op, nullptr);
  EXPECT_EQ(err.rfind("commtool record: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// The profiler table, the CUDA driver's injection entry (record --cupti) and the stand-ins for
// CUPTI's subscribe calls; nothing of libstdc++ or of commtool's own code.
TEST(RecordPluginLibrary, ExportsOnlyItsEntryPoints) {
  const std::string command =
      std::string("nm -D --defined-only ") + COMMTOOL_PROFILER_PLUGIN + " 2>&1";
  FILE* nm = popen(command.c_str(), "r");
  ASSERT_NE(nm, nullptr);
  std::vector<std::string> symbols;
  char row[1024];
  while (fgets(row, sizeof(row), nm) != nullptr) {
    std::string text(row);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    symbols.push_back(text.substr(text.rfind(' ') + 1));
  }
  ASSERT_EQ(pclose(nm), 0);
  std::sort(symbols.begin(), symbols.end());
  EXPECT_EQ(symbols, (std::vector<std::string>{"InitializeInjection", "cuptiSubscribe",
                                               "cuptiSubscribe_v2", "ncclProfiler_v5"}));
}

// record --cupti's injection entry on a machine where its CUPTI layer cannot run: it says why
// in a `cupti` line and returns success, so CUDA (and the job) go on without it.
TEST_F(RecordPluginTest, TheInjectionEntryThatCannotStartCuptiSaysWhyAndLetsTheJobRun) {
  using Entry = int (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle_, "InitializeInjection"));
  ASSERT_NE(entry, nullptr);
  setenv("COMMTOOL_CUPTI_LIBRARY", "/nonexistent/commtool-test/libcupti.so.13", 1);
  EXPECT_EQ(entry(), 1);
  unsetenv("COMMTOOL_CUPTI_LIBRARY");
  wait_for_flush();
  const std::vector<CuptiLine> states = lines_of_kind<CuptiLine>();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].state, CuptiState::kOff);
  // Where no CUPTI was loaded before, the one named is tried and named; where a test before
  // this one loaded the toolkit's, CUPTI itself refuses on a machine without a GPU.
  EXPECT_FALSE(states[0].why.empty());
  if (states[0].why.starts_with("cannot load")) {
    EXPECT_NE(states[0].why.find("/nonexistent/commtool-test/libcupti.so.13"), std::string::npos);
  }
}
