// What the record-mode plugin test files share: a fixture that dlopens the built plugin, calls its
// ncclProfiler_v5 table as NCCL 2.28 does, and reads the recording back with parse_line.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

// record_line.hpp before nccl_profiler_v5.hpp: see record_mode.cpp.
#include "tracing/profiler/record_line.hpp"

#include "tracing/profiler/collective_record.hpp"
#include "tracing/profiler/nccl_profiler_v5.hpp"

#include "plugin_test_support.hpp"

namespace record_plugin_test {

namespace fs = std::filesystem;
using namespace commtool::nccl_profiler;

inline constexpr int kRecordMask = static_cast<int>(kColl | kP2p | kCollApi | kP2pApi | kKernelCh);

inline std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

inline void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

class RecordPluginTest : public LoadedPluginTest {
 protected:
  void SetUp() override {
    LoadedPluginTest::SetUp();
    if (HasFatalFailure()) return;
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
    LoadedPluginTest::TearDown();
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

  fs::path dir_;
  std::vector<void*> open_contexts_;
};

}  // namespace record_plugin_test
