// diagnose ep --trace: the split of every traced exchange gathered per traffic and phase, on
// synthetic records (tests/synthetic_records.hpp): slowest rank per exchange, per-rank medians,
// kernel start lags across ranks, the traced/untraced ratio, the host-bound finding and the
// Perfetto trace's names.
#include <gtest/gtest.h>

#include <string>

#include "reports/ep/ep_split.hpp"
#include "synthetic_records.hpp"

using namespace commtool;
using namespace commtool::reports;
using namespace synthetic_records;

namespace {

// Routed and uniform traffic on `ranks` ranks, `turns` traced turns (tests/synthetic_records.hpp:
// rank r `lag_ns * r` later, its kernels `longer_ns * r` longer); every exchange's CUDA-event time
// is 10 us traced and 8 us untraced, every untraced host enqueue 0.5 us.
tracing::EpMeasurement measurement(int ranks, int turns, uint64_t lag_ns, uint64_t longer_ns) {
  tracing::EpMeasurement m;
  m.nranks = ranks;
  for (tracing::EpScenarioKind kind :
       {tracing::EpScenarioKind::kRouted, tracing::EpScenarioKind::kUniform}) {
    tracing::EpScenarioTimes t;
    t.kind = kind;
    t.dispatch.slowest_us.assign(static_cast<size_t>(turns), 8.0);
    t.combine.slowest_us.assign(static_cast<size_t>(turns), 8.0);
    for (tracing::PhaseTimes* p : {&t.dispatch, &t.combine}) {
      p->rank_enqueue_us.assign(static_cast<size_t>(ranks),
                                std::vector<double>(static_cast<size_t>(turns), 0.5));
    }
    m.scenarios.push_back(t);
  }
  add_ep_traces(m, turns, lag_ns, longer_ns, 10.0);
  return m;
}

}  // namespace

TEST(EpSplit, NothingWithoutATracedPass) {
  tracing::EpMeasurement m = measurement(2, 3, 0, 0);
  m.traces.clear();
  EXPECT_FALSE(ep_split(m).has_value());
}

TEST(EpSplit, EachPhaseTakesTheSlowestRankPerExchange) {
  // Rank 1 starts 500 ns later and its kernel runs 1000 ns longer (3 us against 2 us).
  const std::optional<EpSplit> s = ep_split(measurement(2, 3, 500, 1000));
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->rows.size(), 4u);
  EXPECT_EQ(s->rows[0].scenario, tracing::EpScenarioKind::kRouted);
  EXPECT_EQ(s->rows[0].phase, tracing::EpPhase::kDispatch);
  EXPECT_EQ(s->rows[3].scenario, tracing::EpScenarioKind::kUniform);
  EXPECT_EQ(s->rows[3].phase, tracing::EpPhase::kCombine);
  EXPECT_TRUE(s->warnings.empty()) << s->warnings.front();
  for (const EpSplitRow& row : s->rows) {
    EXPECT_EQ(row.exchanges, 3);
    EXPECT_EQ(row.kernel_us.n, 3);
    EXPECT_DOUBLE_EQ(row.kernel_us.median, 3.0);  // rank 1's
    EXPECT_DOUBLE_EQ(row.host_enqueue_us.median, 0.05);
    EXPECT_DOUBLE_EQ(row.input_wait_us.median, 0.892);
    EXPECT_DOUBLE_EQ(row.start_spread_us.median, 0.5);
    ASSERT_EQ(row.rank_kernel_us.size(), 2u);
    EXPECT_DOUBLE_EQ(row.rank_kernel_us[0], 2.0);
    EXPECT_DOUBLE_EQ(row.rank_kernel_us[1], 3.0);
    EXPECT_DOUBLE_EQ(row.rank_start_lag_us[0], 0.0);
    EXPECT_DOUBLE_EQ(row.rank_start_lag_us[1], 0.5);
    EXPECT_DOUBLE_EQ(row.traced_time_us.median, 10.0);
    ASSERT_TRUE(row.traced_over_untraced.has_value());
    EXPECT_DOUBLE_EQ(*row.traced_over_untraced, 10.0 / 8.0);
    EXPECT_DOUBLE_EQ(row.untraced_host_enqueue_us.median, 0.5);
    EXPECT_EQ(row.launched_by_nccl_thread, 0);
  }
  ASSERT_EQ(s->clock_notes.size(), 1u);  // the same note from both ranks, once
  EXPECT_GT(s->records, 0u);
}

TEST(EpSplit, ARankWithoutItsRecordsIsNamedAndTheOthersStillCount) {
  tracing::EpMeasurement m = measurement(2, 2, 0, 1000);
  m.traces[1].records.gpu.clear();  // rank 1's kernels were lost
  const std::optional<EpSplit> s = ep_split(m);
  ASSERT_TRUE(s.has_value());
  ASSERT_FALSE(s->warnings.empty());
  EXPECT_EQ(s->warnings.front().rfind("rank 1: ", 0), 0u) << s->warnings.front();
  EXPECT_EQ(s->rows[0].kernel_us.n, 2);
  EXPECT_DOUBLE_EQ(s->rows[0].kernel_us.median, 2.0);  // rank 0's: the only one there
}

TEST(EpSplit, HostBoundPhasesOfTheRoutedTrafficAreAFinding) {
  tracing::EpMeasurement m = measurement(2, 3, 0, 0);
  EXPECT_TRUE(ep_split_findings(*ep_split(m), tracing::EpScenarioKind::kRouted)
                  .empty());  // 0.5 us to enqueue, 2 us
  // The traced enqueue does not count: CUPTI slows the host.
  for (tracing::EpRankTrace& t : m.traces) {
    for (OperationMark& op : t.records.operations)
      op.enqueue_end_ns = op.enqueue_start_ns + 50000;
  }
  EXPECT_TRUE(ep_split_findings(*ep_split(m), tracing::EpScenarioKind::kRouted).empty());
  for (tracing::EpScenarioTimes& s : m.scenarios) {
    for (tracing::PhaseTimes* p : {&s.dispatch, &s.combine})
      p->rank_enqueue_us[1].assign(3, 5.0);  // rank 1's untraced enqueue
  }
  const std::vector<EpFinding> f =
      ep_split_findings(*ep_split(m), tracing::EpScenarioKind::kRouted);
  ASSERT_EQ(f.size(), 2u);  // dispatch and combine; uniform is not under diagnosis
  EXPECT_EQ(f[0].code, "host-bound-exchange");
  EXPECT_EQ(f[0].severity, EpSeverity::kWarning);
  EXPECT_EQ(f[0].message.rfind("routed dispatch: issued back to back, these exchanges are "
                               "limited by the host",
                               0),
            0u)
      << f[0].message;
  EXPECT_EQ(f[0].evidence.rfind("the host takes 5.0 us to enqueue", 0), 0u) << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("no less than the 2.0 us its GPU work takes"), std::string::npos)
      << f[0].evidence;
  EXPECT_EQ(f[1].message.rfind("routed combine:", 0), 0u) << f[1].message;
  EXPECT_EQ(f[0].message.find("hand-off"), std::string::npos) << f[0].message;  // on the caller

  // Launched by NCCL's own thread: the sentence names the non-blocking hand-off.
  for (tracing::EpRankTrace& t : m.traces) {
    for (ApiCall& a : t.records.api)
      a.thread = 99;
  }
  const std::vector<EpFinding> g =
      ep_split_findings(*ep_split(m), tracing::EpScenarioKind::kRouted);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NE(g[0].message.find("a thread it starts for each group"), std::string::npos)
      << g[0].message;
}

TEST(EpSplit, PerfettoTraceNamesEachExchangeByTrafficAndPhase) {
  const tracing::EpMeasurement m = measurement(2, 1, 0, 0);
  const nlohmann::json trace = ep_chrome_trace(m);
  int routed_dispatch = 0, uniform_combine = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string name = e.value("name", "");
    routed_dispatch += name == "enqueue routed dispatch #100";
    uniform_combine += name == "enqueue uniform combine #103";
  }
  EXPECT_EQ(routed_dispatch, 2);  // once per rank
  EXPECT_EQ(uniform_combine, 2);
}
