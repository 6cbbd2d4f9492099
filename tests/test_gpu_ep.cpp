// GPU tests of diagnose ep's exchange: grouped ncclSend/ncclRecv with a byte count per peer,
// run by real worker processes (the commtool binary) on every GPU here. At one rank every
// exchange is a self-send; odd sizes, empty segments and back-to-back scenarios must all come
// back verified byte for byte. Timing is printed by the benchmarks, never asserted here.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"
#include "probes/base/error.hpp"
#include "tracing/ep/ep_exchange.hpp"
#include "tracing/ep/ep_measure.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

// An n x n matrix of odd, distinct byte counts (no two segments line up by accident).
ByteMatrix odd_matrix(int n, uint64_t base) {
  ByteMatrix m(static_cast<size_t>(n), std::vector<uint64_t>(static_cast<size_t>(n)));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j)
      m[static_cast<size_t>(i)][static_cast<size_t>(j)] = base + 37 * i + 11 * j;
  }
  return m;
}

// Three measured exchanges per phase after one warm-up, run by the commtool binary.
EpMeasureRequest short_request() {
  EpMeasureRequest q;
  q.executable = COMMTOOL_BINARY;
  q.iters = 3;
  q.warmup = 1;
  q.timeout_s = 30;
  return q;
}

}  // namespace

TEST(GpuEp, EveryScenarioAndPhaseRunsVerifiedOnEveryRank) {
  const int n = ep_rank_count({});
  EpMeasureRequest q = short_request();
  ByteMatrix empty(static_cast<size_t>(n), std::vector<uint64_t>(static_cast<size_t>(n), 0));
  q.scenarios = {{EpScenarioKind::kRouted, odd_matrix(n, 12345), odd_matrix(n, 777)},
                 {EpScenarioKind::kUniform, odd_matrix(n, 64u << 20), odd_matrix(n, 1)},
                 {EpScenarioKind::kReplicated, empty, odd_matrix(n, 3)}};
  const EpMeasurement m = run_ep_measurement(q);  // a wrong byte throws kVerification
  ASSERT_EQ(m.nranks, n);
  ASSERT_EQ(m.scenarios.size(), 3u);
  EXPECT_EQ(m.gpus.size(), static_cast<size_t>(n));
  for (const EpScenarioTimes& s : m.scenarios) {
    for (const PhaseTimes* p : {&s.dispatch, &s.combine}) {
      ASSERT_EQ(p->slowest_us.size(), 3u) << to_string(s.kind);
      ASSERT_EQ(p->rank_us.size(), static_cast<size_t>(n)) << to_string(s.kind);
      for (double us : p->slowest_us)
        EXPECT_GT(us, 0.0) << to_string(s.kind);
    }
  }
}

TEST(GpuEp, MatrixOfTheWrongShapeIsRefusedBeforeAnyWorkerStarts) {
  const int n = ep_rank_count({});
  EpMeasureRequest q;
  q.executable = COMMTOOL_BINARY;
  q.scenarios = {{EpScenarioKind::kRouted, odd_matrix(n + 1, 8), odd_matrix(n + 1, 8)}};
  try {
    run_ep_measurement(q);
    FAIL() << "a matrix for " << n + 1 << " ranks ran on " << n;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find(fmt::format("routed dispatch: not a {}x{} matrix", n, n)),
              std::string::npos)
        << e.what();
  }
}

// What a user runs: the measured run on every GPU here verifies every byte of the routed,
// uniform and replicated traffic (exit 0, not 4), and its routing is exactly what --dry-run
// prints for the same rank count.
TEST(GpuEp, CliMeasuresWhatTheDryRunPlans) {
  const int n = ep_rank_count({});
  const std::string args =
      "diagnose ep --tokens 512 --hidden 1024 --experts 16 --topk 4 --skew zipf:1.2 "
      "--replicate 2 --json ";
  const cli_test::CliResult measured = cli_test::run_commtool(args + "-n 3 -w 1", false);
  ASSERT_EQ(measured.code, 0) << measured.out;
  const cli_test::CliResult planned =
      cli_test::run_commtool(args + "--dry-run --ranks " + std::to_string(n), false);
  ASSERT_EQ(planned.code, 0) << planned.out;
  const nlohmann::json m = nlohmann::json::parse(measured.out);
  const nlohmann::json p = nlohmann::json::parse(planned.out);
  EXPECT_TRUE(m.at("measured").get<bool>());
  EXPECT_EQ(m.at("dispatch_bytes"), p.at("dispatch_bytes"));
  EXPECT_EQ(m.at("combine_bytes"), p.at("combine_bytes"));
  EXPECT_EQ(m.at("metrics"), p.at("metrics"));
  // Routed and uniform always; replicated only where a second rank can take a replica.
  ASSERT_EQ(m.at("scenarios").size(), n > 1 ? 3u : 2u) << measured.out;
  for (const nlohmann::json& s : m.at("scenarios")) {
    for (const char* phase : {"dispatch", "combine"}) {
      EXPECT_EQ(s.at(phase).at("time_us").at("n").get<int>(), 3) << s.dump();
      EXPECT_GT(s.at(phase).at("time_us").at("median").get<double>(), 0.0) << s.dump();
    }
  }
}

// --trace runs the turns again under CUPTI: every rank returns one operation mark per measured
// exchange of the traced pass, each named in the exchange list, and CUPTI saw GPU work.
TEST(GpuEp, TracedPassMarksEveryExchangeOnEveryRank) {
  const int n = ep_rank_count({});
  EpMeasureRequest q = short_request();
  q.trace = true;
  q.scenarios = {{EpScenarioKind::kRouted, odd_matrix(n, 12345), odd_matrix(n, 777)},
                 {EpScenarioKind::kUniform, odd_matrix(n, 16u << 20), odd_matrix(n, 1)}};
  const EpMeasurement m = run_ep_measurement(q);
  ASSERT_EQ(m.traces.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const EpRankTrace& t = m.traces[static_cast<size_t>(r)];
    EXPECT_EQ(t.rank, r);
    ASSERT_EQ(t.exchanges.size(), 3u * 2 * 2) << "rank " << r;
    ASSERT_EQ(t.records.operations.size(), t.exchanges.size()) << "rank " << r;
    for (size_t i = 0; i < t.exchanges.size(); ++i) {
      EXPECT_EQ(t.records.operations[i].seq, t.exchanges[i].seq);
      EXPECT_GT(t.exchanges[i].time_us, 0.0);
    }
    EXPECT_FALSE(t.records.gpu.empty()) << "rank " << r;
    EXPECT_FALSE(t.clock_note.empty());
  }
  // The timed pass is untouched by the traced one.
  for (const EpScenarioTimes& s : m.scenarios)
    EXPECT_EQ(s.dispatch.slowest_us.size(), 3u) << to_string(s.kind);
}

// What a user runs: diagnose ep --cupti --trace prints the split of every phase with an interval
// for every traced exchange, no attribution warning, and writes a Perfetto trace whose host spans
// name the traffic and phase.
TEST(GpuEp, CliTraceSplitsEveryPhaseAndWritesThePerfettoTrace) {
  const std::string file = ::testing::TempDir() + "commtool-ep-trace.json";
  std::remove(file.c_str());
  const cli_test::CliResult r = cli_test::run_commtool(
      "diagnose ep --tokens 256 --hidden 512 --experts 8 --topk 2 --skew hot:1:0.5 -n 4 -w 1 "
      "--json --cupti --trace " +
          file,
      false);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const nlohmann::json& split = doc.at("split");
  ASSERT_TRUE(split.is_object()) << r.out;
  EXPECT_TRUE(split.at("warnings").empty()) << split.at("warnings").dump(2);
  ASSERT_EQ(split.at("rows").size(), 2 * doc.at("scenarios").size());
  for (const nlohmann::json& row : split.at("rows")) {
    EXPECT_EQ(row.at("exchanges").get<int>(), 4) << row.dump();
    for (const char* interval : {"host_enqueue_us", "kernel_us", "input_wait_us"}) {
      ASSERT_TRUE(row.at(interval).is_object()) << interval << " " << row.dump();
      EXPECT_EQ(row.at(interval).at("n").get<int>(), 4) << interval << " " << row.dump();
    }
    EXPECT_GT(row.at("kernel_us").at("median").get<double>(), 0.0) << row.dump();
    EXPECT_TRUE(row.at("traced_over_untraced").is_number()) << row.dump();
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file << " was not written";
  const nlohmann::json trace = nlohmann::json::parse(in);
  int dispatch_spans = 0, gpu_spans = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    if (e.at("name").get<std::string>().rfind("enqueue routed dispatch #", 0) == 0) {
      ++dispatch_spans;
    }
    if (e.value("cat", "") == "gpu") ++gpu_spans;
  }
  EXPECT_EQ(dispatch_spans, 4 * ep_rank_count({}));
  EXPECT_GT(gpu_spans, 0);
  std::remove(file.c_str());
}
