// The cross-rank verdict over what a real PyTorch job left when one rank departed from the
// others (tests/torch/diverge.py: 3 ranks on one H100, torch 2.11, NCCL 2.28.9, captured on the
// GPU machine 2026-12-07 by scripts/gpu-diverge.sh; rank 1 departs at its 6th all_reduce, op 5):
// recordings made under `commtool record --hang-timeout 8 --kill-on-hang`, and Flight Recorder
// dumps of the same cases run without commtool. Each must name the right rank and operation.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "reports/record/record_report.hpp"
#include "tracing/crossrank/flight_recorder.hpp"
#include "tracing/record/recording.hpp"

namespace fs = std::filesystem;
using namespace commtool;
using crossrank::Rule;

namespace {

const fs::path kFixtures = fs::path(COMMTOOL_FIXTURES_DIR);

struct Expected {
  const char* name;
  reports::Verdict verdict;
  std::optional<Rule> rule;  // the first finding's
  std::vector<int> ranks;    // at fault: the odd side of a disagreement, else Finding::ranks
  uint64_t seq = 0;
  const char* field = "";
};

std::vector<int> at_fault(const crossrank::Finding& f) {
  return f.rule == Rule::kDisagree ? f.sides.back().ranks : f.ranks;
}

}  // namespace

TEST(RealDivergence, EachRecordedCaseNamesTheRankAndTheOperation) {
  using V = reports::Verdict;
  const std::vector<Expected> cases = {
      {"torch_clean", V::kNone, std::nullopt, {}, 0, ""},
      {"torch_func", V::kHang, Rule::kDisagree, {1}, 5, "func"},
      {"torch_gather", V::kHang, Rule::kDisagree, {1}, 5, "func"},
      {"torch_size", V::kFault, Rule::kDisagree, {1}, 5, "count"},
      {"torch_dtype", V::kFault, Rule::kDisagree, {1}, 5, "datatype"},
      {"torch_root", V::kFault, Rule::kDisagree, {1}, 5, "root"},
      // Rank 1 skipped op 5 and left after 11 operations: the others wait in their 12th.
      {"torch_skip", V::kHang, Rule::kMissing, {1}, 11, ""},
      // Rank 1 added one: ranks 0 and 2 left after 12, rank 1 waits in its 13th.
      {"torch_extra", V::kHang, Rule::kMissing, {0, 2}, 12, ""},
      {"torch_sleep", V::kHang, Rule::kBehind, {1}, 5, ""},
      // Stopped (SIGSTOP) and exited (os._exit) at op 5, their last lines still in their
      // buffers: the rank is named, at the last operation it wrote (op 1).
      {"torch_stop", V::kHang, Rule::kHeld, {1}, 1, ""},
      {"torch_exit", V::kHang, Rule::kHeld, {1}, 1, ""},
      // MAX where the others SUM: NCCL's profiler interface (v5) gives no reduction, so the
      // recording cannot tell. Pinned, so that a plugin that learns it changes this line.
      {"torch_redop", V::kNone, std::nullopt, {}, 0, ""},
  };
  for (const Expected& c : cases) {
    const reports::RecordingReport r =
        reports::analyse_recording(record::load_recording(kFixtures / "recordings" / c.name));
    EXPECT_EQ(r.verdict, c.verdict) << c.name;
    const crossrank::Verdict& v = r.standing.verdict;
    if (!c.rule) {
      EXPECT_TRUE(v.findings.empty()) << c.name;
      continue;
    }
    ASSERT_FALSE(v.findings.empty()) << c.name;
    const crossrank::Finding& f = v.findings[0];
    EXPECT_EQ(f.rule, *c.rule) << c.name << ": " << crossrank::finding_text(r.standing.job, f);
    EXPECT_EQ(at_fault(f), c.ranks) << c.name << ": " << crossrank::finding_text(r.standing.job, f);
    EXPECT_EQ(f.seq, c.seq) << c.name;
    EXPECT_EQ(f.field, c.field) << c.name;
  }
}

TEST(RealDivergence, EachFlightRecorderCaseNamesTheRankAndTheOperation) {
  // collective_seq_id counts from 1: op 5 is #6. Dumps: the watchdog's (nccl_trace_rank_N) of
  // the ranks that timed out, and the job's own at the end (rank-N.pickle) of those that ended.
  const std::vector<Expected> cases = {
      {"func", reports::Verdict::kHang, Rule::kDisagree, {1}, 6, "func"},
      {"size", reports::Verdict::kFault, Rule::kDisagree, {1}, 6, "count"},
      {"skip", reports::Verdict::kHang, Rule::kBehind, {1}, 12, ""},
      {"stop", reports::Verdict::kHang, Rule::kMissing, {1}, 6, ""},  // no dump from rank 1
  };
  for (const Expected& c : cases) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(kFixtures / "flight_recorder" / c.name)) {
      if (e.path().filename().string().find("pytorch") == 0) continue;  // its analyser's output
      files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    const crossrank::FlightRecorderJob fr = crossrank::read_flight_recorder(files);
    const crossrank::Verdict v = crossrank::analyse(fr.job);
    ASSERT_FALSE(v.findings.empty()) << c.name;
    const crossrank::Finding& f = v.findings[0];
    EXPECT_EQ(v.hang, c.verdict == reports::Verdict::kHang) << c.name;
    EXPECT_EQ(f.rule, *c.rule) << c.name << ": " << crossrank::finding_text(fr.job, f);
    EXPECT_EQ(at_fault(f), c.ranks) << c.name << ": " << crossrank::finding_text(fr.job, f);
    EXPECT_EQ(f.seq, c.seq) << c.name;
    EXPECT_EQ(f.field, c.field) << c.name;
  }
}
