// Recordings for tests: record lines made from the line types (so a test says what it means,
// not JSON), written into a fresh directory as the plugin would write them.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "tracing/profiler/record_line.hpp"

namespace commtool::testing {

namespace np = nccl_profiler;

// Clocks every test recording shares: 2026-12-04 12:00:00 UTC is host time 500 s.
inline constexpr int64_t kRealtime0 = 1796385600'000'000'000;
inline constexpr int64_t kMono0 = 500'000'000'000;
inline constexpr int64_t kSecond = 1'000'000'000;
inline constexpr int64_t kUs = 1'000;

inline np::ProcLine proc_line(int64_t pid, const std::string& host = "node-a") {
  np::ProcLine p;
  p.pid = pid;
  p.host = host;
  p.realtime_ns = kRealtime0;
  p.monotonic_ns = kMono0;
  p.nccl_version = "2.28.9";
  return p;
}

inline np::CommLine comm_line(uint64_t comm, int rank, int nranks, const std::string& name = "") {
  np::CommLine c;
  c.comm = comm;
  c.rank = rank;
  c.nranks = nranks;
  c.nodes = 1;
  c.name = name;
  c.t_ns = kMono0;
  return c;
}

inline np::StartLine start_line(uint64_t comm, int rank, uint64_t index, int64_t t_ns,
                                const std::string& func = "AllReduce", uint64_t count = 1024) {
  np::StartLine s;
  s.comm = comm;
  s.rank = rank;
  s.index = index;
  s.seq = index;
  s.func = func;
  s.count = count;
  s.datatype = "ncclFloat32";
  s.t_ns = t_ns;
  return s;
}

// The end of `s`: its kernel ran [kernel_host_ns, +kernel_ns) on the host clock, stamped on a
// GPU clock `gpu_offset_ns` ahead, and the proxy saw each stamp `late_ns` after it happened.
inline np::EndLine end_line(const np::StartLine& s, int64_t kernel_host_ns, int64_t kernel_ns,
                            int64_t gpu_offset_ns = 0, int64_t late_ns = 5 * kUs,
                            bool complete = true) {
  np::EndLine e;
  e.op = s;
  e.algo = "RING";
  e.proto = "SIMPLE";
  e.channels = 2;
  e.warps = 16;
  // The application's call and NCCL's enqueue before the kernel, as they happen.
  e.api = np::Interval{kernel_host_ns - 20 * kUs, kernel_host_ns};
  e.enqueue = np::Interval{kernel_host_ns - 15 * kUs, kernel_host_ns - 2 * kUs};
  e.gpu = np::Interval{kernel_host_ns + gpu_offset_ns, kernel_host_ns + kernel_ns + gpu_offset_ns};
  e.seen = np::Interval{kernel_host_ns + late_ns, kernel_host_ns + kernel_ns + late_ns};
  e.kernel_channels = 2;
  e.complete = complete;
  return e;
}

inline std::string lines_of(std::initializer_list<np::RecordLine> lines) {
  std::string out;
  for (const np::RecordLine& l : lines)
    np::append_line(out, l);
  return out;
}

// A new empty recording directory (with procs/), removed with the object.
struct RecordingDir {
  std::filesystem::path path;
  RecordingDir() {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("commtool-recording-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path / "procs");
  }
  ~RecordingDir() { std::filesystem::remove_all(path); }
  RecordingDir(const RecordingDir&) = delete;
  RecordingDir& operator=(const RecordingDir&) = delete;

  std::filesystem::path proc_file(const std::string& name) const { return path / "procs" / name; }

  // Appends raw text to procs/<name>, as the plugin's write() would.
  void append(const std::string& name, const std::string& text) const {
    std::ofstream(proc_file(name), std::ios::binary | std::ios::app) << text;
  }
};

}  // namespace commtool::testing
