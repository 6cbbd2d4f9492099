// What the diagnose allreduce test files share: hand-made sweeps of NCCL's default, forced NCCL
// settings and the IPC paths, on 8 ranks, one per GPU.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reports/allreduce/allreduce_diagnosis.hpp"

namespace allreduce_test {

using namespace commtool;
using namespace commtool::reports;
using commtool::tracing::NcclChoice;
using commtool::tracing::NcclWay;

inline constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;

// What NCCL's profiler plugin saw: one way (20 operations).
inline NcclChoice ran(std::string algo, std::string proto, int channels = 1) {
  return {{{std::move(algo), std::move(proto), channels, 20}}, ""};
}

// A valid point with a tight spread: min and max 2% either side of the median.
inline AllReducePoint ok(uint64_t bytes, double median_us, NcclChoice ran = {}) {
  AllReducePoint p;
  p.bytes = bytes;
  p.time_us.n = 20;
  p.time_us.median = median_us;
  p.time_us.min = median_us * 0.98;
  p.time_us.max = median_us * 1.02;
  p.busbw_gbps = static_cast<double>(bytes) / (median_us * 1e3);
  p.nccl_ran = std::move(ran);
  return p;
}

inline AllReducePoint bad(uint64_t bytes, AllReducePointStatus status, std::string reason) {
  AllReducePoint p;
  p.bytes = bytes;
  p.status = status;
  p.reason = std::move(reason);
  return p;
}

inline AllReducePath nccl_default(std::vector<AllReducePoint> points) {
  return {"NCCL default", AllReducePathKind::kNccl, true, "", "", std::move(points)};
}

inline AllReducePath nccl_forced(std::string algo, std::string proto,
                                 std::vector<AllReducePoint> points) {
  std::string name = "NCCL " + algo + (algo.empty() || proto.empty() ? "" : "/") + proto;
  return {name, AllReducePathKind::kNccl, false, algo, proto, std::move(points)};
}

inline AllReducePath one_shot(std::vector<AllReducePoint> points) {
  return {"IPC one-shot", AllReducePathKind::kIpcOneShot, false, "", "", std::move(points)};
}

inline AllReducePath two_shot(std::vector<AllReducePoint> points) {
  return {"IPC two-shot", AllReducePathKind::kIpcTwoShot, false, "", "", std::move(points)};
}

inline AllReduceSweep sweep(std::vector<AllReducePath> paths) {
  return {{8, 8, 1}, "float32", std::move(paths), {}};  // 8 ranks, one per GPU
}

// IPC one-shot wins up to 64 KiB, NCCL's default at 256 KiB, NCCL Ring/Simple from 1 MiB.
inline AllReduceSweep clean_crossover() {
  return sweep({
      nccl_default({ok(4 * KiB, 20, ran("RING", "LL")), ok(16 * KiB, 22, ran("RING", "LL")),
                    ok(64 * KiB, 30, ran("RING", "LL")), ok(256 * KiB, 60, ran("RING", "LL")),
                    ok(1 * MiB, 200, ran("TREE", "SIMPLE")),
                    ok(4 * MiB, 600, ran("TREE", "SIMPLE"))}),
      nccl_forced("Ring", "Simple",
                  {ok(4 * KiB, 40), ok(16 * KiB, 42), ok(64 * KiB, 50), ok(256 * KiB, 70),
                   ok(1 * MiB, 150), ok(4 * MiB, 450)}),
      one_shot({ok(4 * KiB, 8), ok(16 * KiB, 9), ok(64 * KiB, 14), ok(256 * KiB, 90),
                ok(1 * MiB, 400), ok(4 * MiB, 1500)}),
  });
}

}  // namespace allreduce_test
