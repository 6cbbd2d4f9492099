// NCCL RAS answers (tracing/crossrank/ras.hpp): the real ones captured while a 3-rank PyTorch job
// hung (tests/fixtures/ras, NCCL 2.28.9), the comma NCCL's JSON leaves out, and the findings.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "next_step_checks.hpp"
#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "tracing/crossrank/ras.hpp"

namespace fs = std::filesystem;
using namespace commtool::crossrank;

namespace {

const fs::path kDir = fs::path(COMMTOOL_FIXTURES_DIR) / "ras";

RasStatus fixture(const std::string& name) {
  return read_ras(commtool::files::read_input_file((kDir / name).string()), name);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string all_of(const std::vector<RasFinding>& f) {
  std::string out;
  for (const RasFinding& x : f)
    out += x.text + "\n";
  return out;
}

}  // namespace

TEST(Ras, NcclsJsonWithoutItsCommaIsRepairedAndSaysSo) {
  const RasStatus s = fixture("func/ras.json");
  EXPECT_TRUE(s.json);
  EXPECT_EQ(s.nccl_version, "2.28.9");
  ASSERT_EQ(s.repairs.size(), 1u);
  EXPECT_TRUE(contains(s.repairs[0], "1 missing comma(s) put back")) << s.repairs[0];
  ASSERT_EQ(s.comms.size(), 1u);
  EXPECT_EQ(s.comms[0].size, 3);
  ASSERT_EQ(s.comms[0].ranks.size(), 3u);
  EXPECT_EQ(s.comms[0].ranks[0].counts.at("AllReduce"), 12u);
  EXPECT_TRUE(s.comms[0].ranks[2].missing);
  EXPECT_EQ(s.comms[0].ranks[2].rank, 1);
  EXPECT_EQ(s.comms[0].ranks[2].pid, 1857);
}

TEST(Ras, TheMissingRankComesFirstThenTheErrors) {
  const std::vector<RasFinding> f = analyse_ras(fixture("skip/ras.json"));
  ASSERT_EQ(f.size(), 2u) << all_of(f);
  EXPECT_NE(f[0].advice.find("on 192.0.2.2, check whether process 2249 still runs"),
            std::string::npos)
      << f[0].advice;
  EXPECT_EQ(f[0].text.rfind("MISSING on communicator 0x604ac47e41b08d7e (3 ranks): rank 1 "
                            "(192.0.2.2 pid 2249, GPU 0) did not answer RAS",
                            0),
            0u)
      << f[0].text;
  EXPECT_TRUE(contains(f[1].text,
                       "rank 2 (192.0.2.2 pid 2250, GPU 0) reports remote process "
                       "error"))
      << f[1].text;
}

TEST(Ras, TheTextFormGivesItsErrorsAndWarningsRankByRank) {
  const RasStatus s = fixture("func/ras.txt");
  EXPECT_FALSE(s.json);
  EXPECT_EQ(s.nccl_version, "2.28.9");
  const std::string f = all_of(analyse_ras(s));
  EXPECT_TRUE(contains(f, "Rank 2 reported Remote process error -- GPU 0 managed by process 1858"))
      << f;
  EXPECT_TRUE(contains(f, "Rank 1 has status NOCOMM")) << f;
}

TEST(Ras, NoCommunicatorIsNoFindingAndSaidSo) {
  for (const char* name : {"size/ras.json", "size/ras.txt"}) {
    const RasStatus s = fixture(name);
    EXPECT_TRUE(s.no_communicators) << name;
    const std::vector<RasFinding> f = analyse_ras(s);
    EXPECT_TRUE(f.empty()) << name;
    EXPECT_TRUE(contains(render_ras_text(s, f, name), "RAS holds no communicator")) << name;
  }
}

TEST(Ras, FewerCollectivesOfAKindIsBehind) {
  const std::string doc = R"({"nccl_version": "2.28.9", "communicators": [{"hash": "0xab",
    "size": 4, "ranks": [
      {"rank": 0, "host": "a", "pid": 1, "collective_counts": {"AllReduce": 40}},
      {"rank": 1, "host": "a", "pid": 2, "collective_counts": {"AllReduce": 40}},
      {"rank": 2, "host": "b", "pid": 3, "collective_counts": {"AllReduce": 39}},
      {"rank": 3, "host": "b", "pid": 4, "collective_counts": {"AllReduce": 40}}]}]})";
  const std::string f = all_of(analyse_ras(read_ras(doc, "x")));
  EXPECT_TRUE(contains(f,
                       "BEHIND on communicator 0xab (4 ranks): rank 2 issued 39 AllReduce "
                       "where ranks 0,1,3 issued 40"))
      << f;
}

TEST(Ras, WhatIsNotAnAnswerIsAnErrorNamingTheSource) {
  const auto error_of = [](const std::string& text) -> std::string {
    try {
      read_ras(text, "src");
    } catch (const commtool::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(contains(error_of("hello"), "src: not an answer of NCCL's RAS"));
  EXPECT_TRUE(contains(error_of("{\n\"communicators\": [ {\"hash\": "), "src: a RAS answer that"));
  EXPECT_TRUE(contains(error_of("{\n\"nccl_version\": \"x\"\n}"), "without \"communicators\""));
  // A comma is put back only across a line end, between a value and a key.
  EXPECT_TRUE(contains(error_of("{\n\"communicators\": [] \"x\": 1}"), "src: a RAS answer that"));
}

// Every kind of RAS finding says what to do next, under it in the text.
TEST(Ras, EveryFindingEndsWithWhatToDoNext) {
  const std::string doc = R"({"nccl_version": "2.28.9", "communicators": [{"hash": "0xab",
    "size": 4, "ranks": [
      {"rank": 0, "host": "a", "pid": 1, "collective_counts": {"AllReduce": 40}},
      {"rank": 1, "host": "a", "pid": 2, "collective_counts": {"AllReduce": 40},
       "status": {"async_error": 6}},
      {"rank": 2, "host": "b", "pid": 3, "collective_counts": {"AllReduce": 39},
       "status": {"abort_flag": true}}]}]})";
  std::vector<RasStatus> answers = {read_ras(doc, "x"), fixture("skip/ras.json"),
                                    fixture("func/ras.txt")};
  size_t seen = 0;
  for (const RasStatus& s : answers) {
    const std::vector<RasFinding> f = analyse_ras(s);
    const std::string text = render_ras_text(s, f, "x");
    for (size_t i = 0; i < f.size(); ++i) {
      ++seen;
      next_step::expect_next_step(f[i].advice, f[i].text);
      EXPECT_TRUE(contains(
          text, f[i].text + ".\n" + (i == 0 ? "" : "  ") + "  what to do: " + f[i].advice + ".\n"))
          << text;
    }
  }
  EXPECT_GE(seen, 6u);
}
