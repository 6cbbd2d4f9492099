// What the record-line test files share: lines the plugin writes for an allreduce and a send, one
// line of each kind with every field set, and text edits that make bad lines of them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tracing/profiler/record_line.hpp"

namespace record_line_test {

using namespace commtool::nccl_profiler;

inline constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

inline StartLine allreduce() {
  StartLine op;
  op.comm = 0x0123456789abcdefULL;
  op.rank = 3;
  op.index = 41;
  op.kind = OpKind::kCollective;
  op.seq = 17;
  op.func = "AllReduce";
  op.count = 1 << 20;
  op.datatype = "ncclFloat32";
  op.peer = -1;
  op.t_ns = 1'000'000'123;
  return op;
}

inline StartLine send() {
  StartLine op;
  op.comm = 7;
  op.rank = 0;
  op.index = 0;
  op.kind = OpKind::kP2p;
  op.func = "Send";
  op.count = 5;
  op.datatype = "ncclInt8";
  op.peer = 1;
  op.t_ns = 9;
  return op;
}

inline EndLine finished_allreduce() {
  EndLine l;
  l.op = allreduce();
  l.root = -1;
  l.algo = "RING";
  l.proto = "SIMPLE";
  l.channels = 16;
  l.warps = 16;
  l.api = Interval{100, 200};
  l.enqueue = Interval{110, 190};
  l.gpu = Interval{1'700'000'000'000'000'000, 1'700'000'000'000'050'000};
  l.seen = Interval{300, 400};
  l.kernel_channels = 16;
  l.complete = true;
  l.graph_captured = true;
  return l;
}

// Every kind of line, each field away from its default.
inline std::vector<RecordLine> one_of_each() {
  EndLine unfinished_send;
  unfinished_send.op = send();
  unfinished_send.enqueue = Interval{10, 12};
  unfinished_send.channels = 2;
  unfinished_send.complete = false;
  return {
      ProcLine{1, 4242, "node-07", 1'764'800'000'000'000'000, 123'456, "2.28.9"},
      CommLine{0xfedcba9876543210ULL, 5, 16, 2, "pg:0", 77,
               "GPU-5a0ed1c2-0000-1111-2222-333344445555", ""},
      allreduce(),
      send(),
      finished_allreduce(),
      unfinished_send,
      AliveLine{kMaxInt64},
      FinLine{0x0123456789abcdefULL, 3, 88},
      DropLine{12, 1000, 2000},
  };
}

inline std::string end_line_text() {
  return to_line(finished_allreduce());
}

// `text` with the first occurrence of `from` replaced by `to`; fails the test if it is absent.
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace record_line_test
