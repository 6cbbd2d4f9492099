// GPU tests of every multi-rank path, run with several ranks on one GPU (--devices 0,0 and
// 0,0,0,0): each rank a process of its own, NCCL between them through its socket transport
// (commtool gives each its own NCCL_HOSTID). These runs check correctness only: what NCCL ran,
// that every output is right, that the cross-rank figures exist and agree with the clocks, that
// faults are caught, named and cleaned up. Their times are of time-sliced processes and are
// never asserted; the one bound asserted is the hang rule's (exit 5 within --timeout + 2 s).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "commtool-gpu-multirank-XXXXXX").string();
    path = mkdtemp(p.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

struct CliRun {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

// The commtool binary with `env` (NAME=value ...) before it, stdout and stderr apart, timed.
CliRun commtool_env(const std::string& env, const std::string& args) {
  TempDir dir;
  const fs::path err = dir.path / "stderr";
  const std::string cmd = env + " " + COMMTOOL_BINARY + " " + args + " 2>" + err.string();
  const auto start = std::chrono::steady_clock::now();
  CliRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe))
    run.out.append(buf, n);
  const int status = pclose(pipe);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  run.err = s.str();
  return run;
}

CliRun commtool(const std::string& args) {
  return commtool_env("", args);
}

std::string devices(int ranks) {
  std::string d = "0";
  for (int r = 1; r < ranks; ++r)
    d += ",0";
  return d;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Whether a rank list as the board prints it ("0, 2-3") includes `rank`.
bool names_rank(const std::string& list, int rank) {
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    int lo = -1, hi = -1;
    if (std::sscanf(item.c_str(), " %d-%d", &lo, &hi) == 2 && lo <= rank && rank <= hi) return true;
    if (std::sscanf(item.c_str(), " %d", &lo) == 1 && lo == rank) return true;
  }
  return false;
}

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  pclose(p);
  return out;
}

// Nothing of a run may outlive it: no worker process, no private socket directory, no process
// holding GPU memory (but this test process, which may have a CUDA context of its own).
void expect_nothing_left(const std::string& what) {
  EXPECT_EQ(shell("pgrep -f 'commtool [_]_worker' || true"), "") << what;
  EXPECT_EQ(shell("ls -d /tmp/commtool-?????? 2>/dev/null || true"), "") << what;
  const std::string apps =
      shell("nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null || true");
  std::istringstream lines(apps);
  for (std::string pid; std::getline(lines, pid);) {
    if (!pid.empty() && std::stol(pid) != static_cast<long>(getpid())) {
      ADD_FAILURE() << what << ": process " << pid << " still holds GPU memory";
    }
  }
}

const char* const kCollectives[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                    "reduce",    "alltoall",  "sendrecv"};

class GpuMultiRank : public ::testing::TestWithParam<int> {};

}  // namespace

// Every collective at 2 and 4 ranks in every completion mode, traced: right data, the rank
// placement labelled, what NCCL ran per size (the profiler plugin's real events), each rank's
// kernels found by the CUPTI split, and kernel starts compared across ranks on the one clock
// they share.
TEST_P(GpuMultiRank, EveryCollectiveRunsVerifiedWithTheSplitAndCrossRankFigures) {
  const int n = GetParam();
  for (const char* c : kCollectives) {
    CliRun r =
        commtool(fmt::format("--devices {} --timeout 60 trace {} -b 4K -e 256K -f 64 -n 2 -w 1 "
                             "--mode all --poll-ms 0 --json",
                             devices(n), c));
    ASSERT_EQ(r.code, 0) << c << "\n" << r.err;
    const json doc = json::parse(r.out);
    EXPECT_EQ(doc.at("nranks"), n);
    EXPECT_EQ(doc.at("comm"), "blocking");
    EXPECT_EQ(doc.at("rank_placement").at("shared_gpu"), true);
    EXPECT_EQ(doc.at("rank_placement").at("ranks"), n);
    EXPECT_EQ(doc.at("rank_placement").at("gpus"), 1);
    ASSERT_EQ(doc.at("sizes").size(), 2u) << c;
    for (const json& size : doc.at("sizes")) {
      EXPECT_EQ(size.at("wrong_elements"), 0) << c;
      const std::string ran = size.at("nccl_choice").get<std::string>();
      EXPECT_FALSE(ran.starts_with("unknown")) << c << ": " << ran;
      if (std::string(c) == "alltoall" || std::string(c) == "sendrecv") {
        EXPECT_TRUE(ran.starts_with("p2p")) << c << ": " << ran;
      } else {
        EXPECT_TRUE(std::regex_search(ran, std::regex("^[A-Z_]+/(LL|LL128|SIMPLE), [0-9]+ ch")))
            << c << ": " << ran;
      }
    }
    ASSERT_EQ(doc.at("completion_split").size(), 8u) << c;  // 2 sizes x 4 modes
    for (const json& row : doc.at("completion_split")) {
      EXPECT_EQ(row.at("operations"), 2 * n) << c;  // every rank's every measured operation
      ASSERT_FALSE(row.at("kernel_us").is_null()) << c << " " << row.dump();
      EXPECT_EQ(row.at("kernel_us").at("n"), 2 * n) << c;  // each rank's kernel found
      ASSERT_FALSE(row.at("start_spread_us").is_null()) << c << " " << row.dump();
      const json& lag = row.at("rank_start_lag_us");
      ASSERT_EQ(lag.size(), static_cast<size_t>(n)) << c;
      // Consistent with one clock: lags are never negative, and none exceeds the largest
      // spread seen.
      double most = 0;
      for (const json& l : lag) {
        EXPECT_GE(l.get<double>(), 0.0) << c;
        most = std::max(most, l.get<double>());
      }
      EXPECT_LE(most, row.at("start_spread_us").at("max").get<double>() + 1e-6) << c;
      EXPECT_GT(row.at("start_spread_us").at("max").get<double>(), 0.0) << c;
    }
    EXPECT_TRUE(doc.at("warnings").empty()) << c << ": " << doc.at("warnings").dump();
  }
  expect_nothing_left("after the collectives");
}

// Every completion mode and the stream-scope check at several ranks; the text report is
// labelled as a shared-GPU run before anything else.
TEST_P(GpuMultiRank, EveryModeAndStreamScopeAtSeveralRanks) {
  const int n = GetParam();
  TempDir dir;
  const fs::path saved = dir.path / "run";
  const fs::path trace = dir.path / "trace.json";
  CliRun r =
      commtool(fmt::format("--devices {} trace allreduce -b 64K -e 64K -n 3 -w 1 --mode all "
                           "--poll-ms 10,0 --stream-scope --scope-samples 2 --scope-sleep-ms 20 "
                           "--json --save {} --trace {}",
                           devices(n), saved.string(), trace.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("completion_split").size(), 5u);
  for (const json& row : doc.at("completion_split")) {
    EXPECT_FALSE(row.at("kernel_us").is_null()) << row.dump();
    EXPECT_FALSE(row.at("stream_dependency_us").is_null()) << row.dump();
    EXPECT_EQ(row.at("rank_start_lag_us").size(), static_cast<size_t>(n));
  }
  for (const json& row : doc.at("stream_scope")) {
    const std::string mode = row.at("mode");
    const int samples = row.at("samples");
    EXPECT_EQ(samples, 2 * n) << mode;
    if (mode == "async-wait" || mode == "sync") {
      EXPECT_EQ(row.at("b_before_a"), samples) << mode;  // a stream wait orders stream A only
    } else {
      EXPECT_EQ(row.at("complete_at_wait_return"), samples) << mode;
    }
  }
  // The text form of the same saved run says first where and when it was saved, then carries
  // the shared-GPU label; loading it passes every saved-run check without a warning.
  CliRun text = commtool("report " + saved.string());
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(text.out.starts_with("Saved run: 20")) << text.out.substr(0, 300);
  const std::string rest = text.out.substr(text.out.find_first_not_of('\n', text.out.find('\n')));
  EXPECT_TRUE(rest.starts_with("SHARED GPU: " + std::to_string(n) + " ranks on 1 GPU"))
      << text.out.substr(0, 300);
  EXPECT_FALSE(contains(text.out, "WARNING:")) << text.out.substr(0, 600);
  EXPECT_TRUE(contains(text.out, "Kernel start across ranks")) << text.out;
  // One Perfetto process per rank.
  std::ifstream in(trace);
  const json chrome = json::parse(in);
  int processes = 0;
  for (const json& e : chrome.at("traceEvents"))
    processes += e.value("ph", "") == "M" && e.value("name", "") == "process_name";
  EXPECT_EQ(processes, n);
  expect_nothing_left("after every mode");
}

// What the profiler plugin says NCCL ran is what NCCL itself prints (rank 0's
// NCCL_DEBUG_SUBSYS=TUNING lines: "AllReduce: 4096 Bytes -> Algo RING proto LL
// channel{Lo..Hi}={0..1}"), size by size: algorithm, protocol and channel count, for every
// collective NCCL plans (point-to-point operations get no such line). The line's bytes are the
// call's count times the element size.
TEST_P(GpuMultiRank, ProfilerPluginAgreesWithNcclsOwnTuningLines) {
  const int n = GetParam();
  const std::map<std::string, std::string> nccl_name = {{"allreduce", "AllReduce"},
                                                        {"allgather", "AllGather"},
                                                        {"reducescatter", "ReduceScatter"},
                                                        {"broadcast", "Broadcast"},
                                                        {"reduce", "Reduce"}};
  for (const auto& [c, func] : nccl_name) {
    CliRun r = commtool_env("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING",
                            fmt::format("--devices {} trace {} -b 4K -e 16M -f 64 -n 2 -w 1 "
                                        "--mode sync --no-cupti --json",
                                        devices(n), c));
    ASSERT_EQ(r.code, 0) << c << "\n" << r.err;
    const json doc = json::parse(r.out);
    const std::regex line(" " + func +
                          R"(: ([0-9]+) Bytes -> Algo ([A-Z_]+) proto ([A-Z0-9]+) )"
                          R"(channel\{Lo\.\.Hi\}=\{([0-9]+)\.\.([0-9]+)\})");
    std::map<uint64_t, std::string> nccl_says;
    std::istringstream err(r.err);
    for (std::string l; std::getline(err, l);) {
      std::smatch m;
      if (!std::regex_search(l, m, line)) continue;
      const int channels = std::stoi(m[5]) - std::stoi(m[4]) + 1;
      nccl_says[std::stoull(m[1])] = fmt::format("{}/{}, {} ch", m[2].str(), m[3].str(), channels);
    }
    ASSERT_EQ(doc.at("sizes").size(), 3u) << c;
    for (const json& size : doc.at("sizes")) {
      const uint64_t bytes = size.at("count").get<uint64_t>() * 4;  // float
      ASSERT_TRUE(nccl_says.contains(bytes)) << c << " " << bytes << " B: no TUNING line in\n"
                                             << r.err;
      EXPECT_EQ(size.at("nccl_choice").get<std::string>(), nccl_says[bytes]) << c << " " << bytes;
      std::printf("%d ranks, %s, %llu B per call: NCCL says %s, the plugin %s\n", n, c.c_str(),
                  static_cast<unsigned long long>(bytes), nccl_says[bytes].c_str(),
                  size.at("nccl_choice").get<std::string>().c_str());
    }
  }
}

// diagnose allreduce at several ranks: every forced NCCL_ALGO/NCCL_PROTO is what NCCL ran, or
// reported as refused with NCCL's words or the plugin's; the IPC one-shot and two-shot across
// processes are checked against the exact sum; no recommendation from a shared GPU.
TEST_P(GpuMultiRank, DiagnoseAllReduceConfirmsEveryForcedSettingAndChecksIpc) {
  const int n = GetParam();
  CliRun r = commtool(fmt::format(
      "--devices {} diagnose allreduce -b 4K -e 256K -f 64 -n 2 -w 1 --json", devices(n)));
  ASSERT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("rank_placement").at("shared_gpu"), true);
  ASSERT_FALSE(doc.at("withheld").is_null());
  ASSERT_EQ(doc.at("recommendation").size(), 1u);
  EXPECT_TRUE(contains(doc.at("recommendation")[0], "withheld")) << doc.at("recommendation");
  int confirmed = 0;
  for (const json& path : doc.at("paths")) {
    const std::string name = path.at("name");
    for (const json& p : path.at("points")) {
      const std::string status = p.at("status");
      if (path.at("kind") != "nccl") {
        EXPECT_EQ(status, "ok") << name << ": " << p.dump();  // verified against the exact sum
        continue;
      }
      if (status == "refused") {
        EXPECT_FALSE(p.at("reason").get<std::string>().empty()) << name;
        continue;
      }
      ASSERT_EQ(status, "ok") << name << ": " << p.dump();
      if (path.at("nccl_default")) continue;
      const std::string ran = p.at("nccl_ran");
      const std::string algo = path.at("nccl_algo"), proto = path.at("nccl_proto");
      std::string want = algo + "/" + proto;
      std::transform(want.begin(), want.end(), want.begin(), ::toupper);
      EXPECT_TRUE(ran.starts_with(want + ",")) << name << " ran " << ran;
      ++confirmed;
    }
  }
  EXPECT_GT(confirmed, 0) << "no forced setting ran at all";
  expect_nothing_left("after diagnose allreduce");
}

// diagnose ep at several ranks: real traffic between ranks, every byte checked, routed vs
// uniform vs replicated, the --trace split per rank; the skew cost withheld on a shared GPU.
TEST_P(GpuMultiRank, DiagnoseEpExchangesBetweenRanksAndSplitsPerRank) {
  const int n = GetParam();
  TempDir dir;
  const fs::path trace = dir.path / "ep.json";
  CliRun r = commtool(
      fmt::format("--devices {} diagnose ep --tokens 512 --hidden 1024 --experts 8 "
                  "--topk 2 --skew hot:1:0.6 --replicate 1 -n 3 -w 1 --json --cupti --trace {}",
                  devices(n), trace.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("rank_placement").at("ranks"), n);
  ASSERT_EQ(doc.at("scenarios").size(), 3u);  // routed, uniform, replicated
  for (const json& s : doc.at("scenarios")) {
    EXPECT_GT(s.at("dispatch").at("moved_bytes").get<uint64_t>(), 0u) << s.at("name");
    EXPECT_EQ(s.at("dispatch").at("time_us").at("n"), 3) << s.at("name");
  }
  const json& split = doc.at("split");
  ASSERT_FALSE(split.is_null());
  for (const json& row : split.at("rows")) {
    EXPECT_EQ(row.at("rank_start_lag_us").size(), static_cast<size_t>(n)) << row.dump();
    EXPECT_FALSE(row.at("kernel_us").is_null()) << row.dump();
  }
  EXPECT_TRUE(split.at("warnings").empty()) << split.at("warnings");
  bool withheld = false;
  for (const json& f : doc.at("findings")) {
    withheld = withheld || f.at("code") == "verdicts-withheld";
    EXPECT_NE(f.at("code"), "skew-cost") << f;
  }
  EXPECT_TRUE(withheld) << doc.at("findings");
  expect_nothing_left("after diagnose ep");
}

// probe --ipc between ranks on one GPU: labelled, verified, no LOW verdict from a non-link.
TEST_P(GpuMultiRank, ProbeIpcIsLabelledAndJudgesNoLink) {
  const int n = GetParam();
  CliRun r = commtool(
      fmt::format("--devices {} probe --ipc --size 4MiB --iters 1 --batches 2 --pingpong-rounds 20",
                  devices(n)));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("SHARED GPU: " + std::to_string(n) + " ranks")) << r.out;
  EXPECT_TRUE(contains(r.out, "every figure is as expected")) << r.out;  // no LOW verdict
}

INSTANTIATE_TEST_SUITE_P(Ranks, GpuMultiRank, ::testing::Values(2, 4),
                         [](const auto& p) { return std::to_string(p.param) + "Ranks"; });

// Faults, injected and caught: exit 5 within --timeout + 2 s of a clean run's time, the report
// names the rank, the operation and its seq, and nothing is left behind. Both communicator
// modes, 2 and 4 ranks.
struct FaultCase {
  int ranks;
  std::string comm;
};

class GpuFaults : public ::testing::TestWithParam<FaultCase> {};

TEST_P(GpuFaults, EveryFaultIsCaughtNamedAndCleanedUp) {
  const FaultCase c = GetParam();
  const double timeout = 5;
  const std::string base = fmt::format(
      "--devices {} --comm {} --timeout {} trace allreduce -b 64K -e 64K -n 6 -w 1 "
      "--mode sync --no-cupti",
      devices(c.ranks), c.comm, timeout);
  const CliRun clean = commtool(base);
  ASSERT_EQ(clean.code, 0) << clean.err;
  const int victim = c.ranks - 1;
  struct Expect {
    std::string fault;
    std::vector<std::string> words;
  };
  const std::vector<Expect> faults = {
      {fmt::format("die:{}:3", victim),
       {fmt::format("rank {} (GPU 0) died: killed by signal 9", victim), "#3"}},
      {fmt::format("no-join:{}", victim),
       {fmt::format("rank(s) {} never began joining the communicator", victim)}},
      {fmt::format("stall:{}:3", victim),
       {"enqueued allreduce float sum #3 but the GPU never started it"}},
      {fmt::format("mismatch:{}:3", victim),
       {"the ranks enqueued different operations at #3", fmt::format("rank {} enqueued", victim)}},
  };
  for (const Expect& f : faults) {
    const CliRun r = commtool(base + " --inject-fault " + f.fault);
    const std::string what = fmt::format("{} at {} ranks, {}", f.fault, c.ranks, c.comm);
    EXPECT_EQ(r.code, 5) << what << "\n" << r.err;
    for (const std::string& w : f.words)
      EXPECT_TRUE(contains(r.err, w)) << what << ": no '" << w << "' in\n" << r.err;
    EXPECT_TRUE(contains(r.err, "where each rank stood")) << what << "\n" << r.err;
    if (f.fault.starts_with("stall")) {
      // The stalled rank is among those the board names as behind ("rank(s) 1, 3 enqueued").
      std::smatch m;
      ASSERT_TRUE(
          std::regex_search(r.err, m, std::regex(R"(behind: rank\(s\) ([0-9, -]+) enqueued)")))
          << what << "\n"
          << r.err;
      EXPECT_TRUE(names_rank(m[1].str(), victim)) << what << ": " << m[1];
    }
    EXPECT_LE(r.seconds, clean.seconds + timeout + 2) << what << "\n" << r.err;
    std::printf("%s: exit %d after %.1f s (clean run %.1f s)\n%s\n", what.c_str(), r.code,
                r.seconds, clean.seconds, r.err.c_str());
    expect_nothing_left(what);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GpuFaults,
                         ::testing::Values(FaultCase{2, "blocking"}, FaultCase{2, "nonblocking"},
                                           FaultCase{4, "blocking"}, FaultCase{4, "nonblocking"}),
                         [](const auto& p) {
                           return std::to_string(p.param.ranks) + "Ranks" +
                                  (p.param.comm == "blocking" ? "Blocking" : "NonBlocking");
                         });
