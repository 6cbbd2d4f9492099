// Flight Recorder dumps as a cross-rank job (tracing/crossrank/flight_recorder.hpp): dumps
// written here as PyTorch writes their JSON form, one per rank, and the real pickle of a clean
// job captured on the GPU machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "probes/base/error.hpp"
#include "tracing/crossrank/flight_recorder.hpp"

namespace fs = std::filesystem;
using namespace commtool::crossrank;
using nlohmann::json;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Dumps {
  fs::path dir =
      fs::temp_directory_path() / ("commtool-fr-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::vector<fs::path> files;
  Dumps() { fs::create_directories(dir); }
  ~Dumps() { fs::remove_all(dir); }
  void write(const std::string& name, const json& doc) {
    files.push_back(dir / name);
    std::ofstream(files.back()) << doc.dump();
  }
};

json entry(int seq, const std::string& func = "all_reduce", uint64_t n = 1024,
           const std::string& state = "completed", const std::string& dtype = "Float",
           const std::string& pg = "0") {
  return {{"record_id", seq},
          {"pg_id", std::stoi(pg)},
          {"process_group", {pg, pg == "0" ? "default_pg" : "tp"}},
          {"collective_seq_id", seq},
          {"p2p_seq_id", 0},
          {"is_p2p", false},
          {"profiling_name", "nccl:" + func},
          {"input_sizes", {{n}}},
          {"input_dtypes", {dtype}},
          {"output_sizes", {{n}}},
          {"output_dtypes", {dtype}},
          {"state", state},
          {"time_created_ns", 1796637083417735864 + seq},
          {"timeout_ms", 15000},
          {"frames",
           {{{"filename", "/venv/lib/python3.12/site-packages/torch/distributed/c10d.py"},
             {"line", 3068},
             {"name", "all_reduce"}},
            {{"filename", "/job/train.py"}, {"line", 88}, {"name", "step"}}}}};
}

json dump_of(json entries, int nranks = 3) {
  std::string ranks = "[";
  for (int r = 0; r < nranks; ++r)
    ranks += (r ? ", " : "") + std::to_string(r);
  ranks += "]";
  return {{"version", "2.10"},
          {"comm_lib_version", "2.28.9"},
          {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", ranks}}}}},
          {"pg_status", json::object()},
          {"entries", std::move(entries)}};
}

// Ranks 0..nranks-1 each with completed #1..#done, then #done+1 started (when `hang`).
json lockstep(int done, bool hang) {
  json e = json::array();
  for (int s = 1; s <= done; ++s)
    e.push_back(entry(s));
  if (hang) e.push_back(entry(done + 1, "all_reduce", 1024, "started"));
  return e;
}

std::string verdict_text(const Dumps& d) {
  const FlightRecorderJob fr = read_flight_recorder(d.files);
  return render_flight_recorder_text(fr, analyse(fr.job));
}

}  // namespace

TEST(FlightRecorder, TheRankIsTheNumberEndingTheFileName) {
  EXPECT_EQ(rank_of_dump_file("/tmp/nccl_trace_rank_12"), 12);
  EXPECT_EQ(rank_of_dump_file("host-a_rank3.pickle"), 3);
  EXPECT_EQ(rank_of_dump_file("dump-7.json"), 7);
  EXPECT_EQ(rank_of_dump_file("nccl_trace"), -1);
}

TEST(FlightRecorder, OtherCollectiveAtOneSequenceNumberIsNamedWithItsCallSite) {
  Dumps d;
  for (int r = 0; r < 3; ++r) {
    json e = lockstep(4, false);
    e.push_back(entry(5, r == 1 ? "broadcast" : "all_reduce"));
    e.push_back(entry(6, "all_reduce", 1024, "started"));
    d.write("nccl_trace_rank_" + std::to_string(r), dump_of(e));
  }
  const FlightRecorderJob fr = read_flight_recorder(d.files);
  const Verdict v = analyse(fr.job);
  ASSERT_FALSE(v.findings.empty());
  EXPECT_EQ(v.findings[0].rule, Rule::kDisagree);
  EXPECT_EQ(v.findings[0].seq, 5u);
  EXPECT_TRUE(v.hang);
  const std::string text = render_flight_recorder_text(fr, v);
  EXPECT_TRUE(contains(text,
                       "DISAGREE on process group 0 (\"default_pg\") (3 ranks) at #5: ranks "
                       "0,2 called all_reduce #5 (1024 x Float) at train.py:88 step but "
                       "rank 1 called broadcast #5 (1024 x Float) at train.py:88 step"))
      << text;
}

TEST(FlightRecorder, SizeAndTypeMismatchesWithoutAHangAreFaults) {
  for (const char* field : {"count", "datatype"}) {
    Dumps d;
    for (int r = 0; r < 2; ++r) {
      json e = lockstep(3, false);
      if (r == 1) {
        e[1] = std::string(field) == "count"
                   ? entry(2, "all_reduce", 2048)
                   : entry(2, "all_reduce", 1024, "completed", "BFloat16");
      }
      d.write("rank_" + std::to_string(r) + ".json", dump_of(e, 2));
    }
    const FlightRecorderJob fr = read_flight_recorder(d.files);
    const Verdict v = analyse(fr.job);
    ASSERT_EQ(v.findings.size(), 1u) << field;
    EXPECT_EQ(v.findings[0].field, field);
    EXPECT_FALSE(v.hang);
    EXPECT_TRUE(contains(render_flight_recorder_text(fr, v), "FAULT:")) << field;
  }
}

TEST(FlightRecorder, ADumpMissingForARankNamesIt) {
  Dumps d;
  for (int r : {0, 2})
    d.write("nccl_trace_rank_" + std::to_string(r), dump_of(lockstep(4, true)));
  const FlightRecorderJob fr = read_flight_recorder(d.files);
  const Verdict v = analyse(fr.job);
  ASSERT_FALSE(v.findings.empty());
  EXPECT_EQ(v.findings[0].rule, Rule::kMissing);
  EXPECT_EQ(v.findings[0].no_records, (std::vector<int>{1}));
  EXPECT_EQ(v.findings[0].waiting, (std::vector<int>{0, 2}));
  EXPECT_TRUE(contains(render_flight_recorder_text(fr, v), "rank 1 has no records (no dump"));
}

TEST(FlightRecorder, ARankBehindIsNamedWithItsLastCompletedOperation) {
  Dumps d;
  for (int r = 0; r < 3; ++r)
    d.write("nccl_trace_rank_" + std::to_string(r), dump_of(lockstep(r == 2 ? 4 : 5, r != 2)));
  const std::string text = verdict_text(d);
  EXPECT_TRUE(contains(text,
                       "BEHIND on process group 0 (\"default_pg\") (3 ranks): rank 2 never "
                       "started all_reduce #6 (1024 x Float), which ranks 0,1 wait in"))
      << text;
  EXPECT_TRUE(contains(text, "its last completed operation is all_reduce #4")) << text;
}

TEST(FlightRecorder, RingBuffersThatDroppedTheirOldestStillCompare) {
  Dumps d;
  for (int r = 0; r < 2; ++r) {
    json e = lockstep(30, true);
    e.erase(e.begin(), e.begin() + (r == 0 ? 20 : 3));  // rank 0 holds #21-#31, rank 1 #4-#31
    d.write("nccl_trace_rank_" + std::to_string(r), dump_of(e, 2));
  }
  const FlightRecorderJob fr = read_flight_recorder(d.files);
  const Verdict v = analyse(fr.job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0].rule, Rule::kBelow);  // nobody behind: both wait in #31
  EXPECT_EQ(v.findings[0].seq, 31u);
}

TEST(FlightRecorder, SeveralProcessGroupsWithTheSameRanksAreKeptApart) {
  Dumps d;
  for (int r = 0; r < 2; ++r) {
    json doc = dump_of(lockstep(3, false), 2);
    doc["pg_config"]["1"] = {{"name", "1"}, {"desc", "tp"}, {"ranks", "[0, 1]"}};
    doc["entries"].push_back(entry(1, "all_gather", r == 0 ? 8 : 16, "completed", "Float", "1"));
    d.write("nccl_trace_rank_" + std::to_string(r), doc);
  }
  const FlightRecorderJob fr = read_flight_recorder(d.files);
  ASSERT_EQ(fr.job.groups.size(), 2u);
  const Verdict v = analyse(fr.job);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(fr.job.groups[v.findings[0].group].id, "1");
  EXPECT_EQ(v.findings[0].field, "count");
}

TEST(FlightRecorder, EntriesWithoutWhatTheyNeedAreLeftOutAndSaid) {
  Dumps d;
  json e = lockstep(3, false);
  e.push_back({{"profiling_name", "nccl:all_reduce"}});  // no group, no seq, no state
  e.push_back(entry(4, "all_reduce", 1024, "weird"));
  d.write("nccl_trace_rank_0", dump_of(e, 1));
  const FlightRecorderJob fr = read_flight_recorder(d.files);
  ASSERT_EQ(fr.dumps.size(), 1u);
  EXPECT_EQ(fr.dumps[0].entries, 3u);
  EXPECT_EQ(fr.dumps[0].left_out, 2u);
  ASSERT_EQ(fr.warnings.size(), 1u);
  EXPECT_TRUE(contains(fr.warnings[0], "2 entries without")) << fr.warnings[0];
}

TEST(FlightRecorder, BadFilesAreErrorsNamingTheFile) {
  const auto error_of = [](const std::vector<fs::path>& files) -> std::string {
    try {
      read_flight_recorder(files);
    } catch (const commtool::Error& e) {
      return e.what();
    }
    return "";
  };
  Dumps d;
  d.write("no_rank_here", dump_of(lockstep(1, false)));
  EXPECT_TRUE(contains(error_of(d.files), "no_rank_here: the name ends without a rank"));
  Dumps twice;
  twice.write("a_0", dump_of(lockstep(1, false)));
  twice.write("b_0", dump_of(lockstep(1, false)));
  EXPECT_TRUE(contains(error_of(twice.files), "a second dump of rank 0"));
  Dumps other;
  other.write("x_1", json{{"hello", 1}});
  EXPECT_TRUE(contains(error_of(other.files), "not a Flight Recorder dump"));
}

TEST(FlightRecorder, TheRealDumpOfACleanRankReads) {
  const fs::path real = fs::path(COMMTOOL_FIXTURES_DIR) / "pickle" / "fr_clean_rank0.pickle";
  const FlightRecorderJob fr = read_flight_recorder({real});
  ASSERT_EQ(fr.dumps.size(), 1u);
  EXPECT_EQ(fr.dumps[0].rank, 0);
  EXPECT_EQ(fr.dumps[0].version, "2.10");
  EXPECT_EQ(fr.dumps[0].entries, 12u);
  ASSERT_EQ(fr.job.groups.size(), 1u);
  EXPECT_EQ(fr.job.groups[0].nranks, 3);
  EXPECT_FALSE(fr.job.stuck);
  const Verdict v = analyse(fr.job);
  ASSERT_EQ(v.findings.size(), 1u);  // the two other ranks' dumps are not here
  EXPECT_EQ(v.findings[0].no_records, (std::vector<int>{1, 2}));
}

// 6 kB of pickle (Python's own pickle.dumps, protocol 2, which memoises shared objects): 1,000
// entries that are one entry, whose input_sizes are one list of 1,000 shapes that are one list of
// 1,000 dims. Read without copying, the reader would still visit 10^9 dims; it refuses the dump
// before walking it, as load() refuses one that copies past its limit, and in a directory the
// dump is left out with the reason.
TEST(FlightRecorder, ADumpWhoseSharedValuesWouldCostBillionsOfVisitsIsRefused) {
  const fs::path bomb =
      fs::path(COMMTOOL_FIXTURES_DIR) / "pickle" / "bomb" / "fr_shared_sizes_bomb_rank_0.pickle";
  std::string error;
  try {
    read_flight_recorder({bomb});
  } catch (const commtool::Error& e) {
    error = e.what();
  }
  EXPECT_TRUE(contains(error,
                       "fr_shared_sizes_bomb_rank_0.pickle: more than 5000000 values once "
                       "shared ones are counted"))
      << error;
  const FlightRecorderJob fr = read_flight_recorder({bomb}, {bomb});
  EXPECT_TRUE(fr.dumps.empty());
  ASSERT_EQ(fr.warnings.size(), 1u);
  EXPECT_TRUE(contains(fr.warnings[0], "left out: ")) << fr.warnings[0];
}
