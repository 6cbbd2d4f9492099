// The NCCL profiler plugin as NCCL uses it: dlopen the built library, look up ncclProfiler_v5,
// and drive it with synthetic event descriptors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tracing/profiler/collective_record.hpp"
#include "tracing/profiler/nccl_profiler_v5.hpp"

#include "plugin_test_support.hpp"

namespace fs = std::filesystem;
using namespace commtool::nccl_profiler;

namespace {

class PluginTest : public LoadedPluginTest {
 protected:
  void SetUp() override {
    LoadedPluginTest::SetUp();
    if (HasFatalFailure()) return;
    out_ = fs::temp_directory_path() / ("commtool-profiler-" + std::to_string(getpid()) + ".jsonl");
    fs::remove(out_);
    setenv(kOutputEnv, out_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv(kOutputEnv);
    fs::remove(out_);
    LoadedPluginTest::TearDown();
  }

  std::vector<CollectiveRecord> records() const {
    std::vector<CollectiveRecord> out;
    std::ifstream in(out_);
    for (std::string line; std::getline(in, line);) {
      auto r = parse_json_line(line);
      EXPECT_TRUE(r.has_value()) << line;
      if (r) out.push_back(*r);
    }
    return out;
  }

  static EventDescrV5 coll(uint64_t seq) {
    EventDescrV5 d{};
    d.type = kColl;
    d.rank = 3;
    d.coll.seqNumber = seq;
    d.coll.func = "AllReduce";
    d.coll.count = 1024;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = 16;
    d.coll.nWarps = 8;
    d.coll.algo = "RING";
    d.coll.proto = "LL";
    return d;
  }

  fs::path out_;
};

}  // namespace

TEST_F(PluginTest, ExportsTheV5TableUnderItsName) {
  EXPECT_STREQ(table_->name, "commtool");
  EXPECT_NE(table_->init, nullptr);
  EXPECT_NE(table_->finalize, nullptr);
}

TEST_F(PluginTest, AsksForCollectiveAndP2pEventsOnly) {
  void* ctx = nullptr;
  int mask = -1;
  ASSERT_EQ(table_->init(&ctx, 0xabc, &mask, "c", 1, 8, 3, nullptr), kSuccess);
  EXPECT_EQ(static_cast<uint64_t>(mask), kColl | kP2p);
  EXPECT_EQ(table_->finalize(ctx), kSuccess);
}

TEST_F(PluginTest, RecordsWhatNcclChoseForEachCollective) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(table_->init(&ctx, 0xabc, &mask, "c", 1, 8, 3, nullptr), kSuccess);
  for (uint64_t seq : {7u, 8u}) {
    EventDescrV5 d = coll(seq);
    void* ev = nullptr;
    ASSERT_EQ(table_->startEvent(ctx, &ev, &d), kSuccess);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(table_->recordEventState(ev, 22, nullptr), kSuccess);
    ASSERT_EQ(table_->stopEvent(ev), kSuccess);
  }
  ASSERT_EQ(table_->finalize(ctx), kSuccess);
  auto rs = records();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].seq, 7u);
  EXPECT_EQ(rs[1].seq, 8u);
  EXPECT_EQ(rs[0].func, "AllReduce");
  EXPECT_EQ(rs[0].algo, "RING");
  EXPECT_EQ(rs[0].proto, "LL");
  EXPECT_EQ(rs[0].channels, 16);
  EXPECT_EQ(rs[0].warps, 8);
  EXPECT_EQ(rs[0].rank, 3);
  EXPECT_EQ(rs[0].nranks, 8);
  EXPECT_EQ(rs[0].comm_id, 0xabcu);
  EXPECT_LE(rs[0].start_ns, rs[0].stop_ns);
}

TEST_F(PluginTest, OtherEventKindsGetNoHandleAndNoRecord) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(table_->init(&ctx, 1, &mask, "c", 1, 2, 0, nullptr), kSuccess);
  EventDescrV5 d{};
  d.type = kKernelCh;
  void* ev = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(table_->startEvent(ctx, &ev, &d), kSuccess);
  EXPECT_EQ(ev, nullptr);
  EXPECT_EQ(table_->stopEvent(nullptr), kSuccess);
  table_->finalize(ctx);
  EXPECT_TRUE(records().empty());
}

TEST_F(PluginTest, NullStringsFromNcclBecomeEmptyNotACrash) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(table_->init(&ctx, 1, &mask, "c", 1, 2, 0, nullptr), kSuccess);
  EventDescrV5 d = coll(1);
  d.coll.algo = nullptr;
  d.coll.proto = nullptr;
  void* ev = nullptr;
  ASSERT_EQ(table_->startEvent(ctx, &ev, &d), kSuccess);
  ASSERT_EQ(table_->stopEvent(ev), kSuccess);
  table_->finalize(ctx);
  auto rs = records();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].algo, "");  // reported as unknown, never guessed
}

TEST_F(PluginTest, WithoutAnOutputFileItAsksForNothing) {
  unsetenv(kOutputEnv);
  void* ctx = nullptr;
  int mask = -1;
  ASSERT_EQ(table_->init(&ctx, 1, &mask, "c", 1, 2, 0, nullptr), kSuccess);
  EXPECT_EQ(mask, 0);
  table_->finalize(ctx);
}

TEST_F(PluginTest, LinesFromManyThreadsNeverInterleave) {
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(table_->init(&ctx, 1, &mask, "c", 1, 2, 0, nullptr), kSuccess);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        EventDescrV5 d = coll(static_cast<uint64_t>(t * 1000 + i));
        void* ev = nullptr;
        table_->startEvent(ctx, &ev, &d);
        table_->stopEvent(ev);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  table_->finalize(ctx);
  EXPECT_EQ(records().size(), 800u);  // every line parses: none torn
}

TEST(CollectiveRecordLine, TornLineIsNotARecord) {
  EXPECT_FALSE(parse_json_line("{\"comm\": 1, \"rank\"").has_value());
  EXPECT_FALSE(parse_json_line("{}").has_value());
  CollectiveRecord r;
  r.func = "Send";
  r.algo = "";
  auto back = parse_json_line(to_json_line(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->func, "Send");
}
