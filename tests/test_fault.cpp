// `trace --inject-fault`: the four forms parse to the fault they name and print back the same,
// anything else is a usage error that names the value and the accepted forms.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "probes/base/error.hpp"
#include "tracing/trace/fault.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

bool operator==(const Fault& a, const Fault& b) {
  return a.kind == b.kind && a.rank == b.rank && a.seq == b.seq;
}

}  // namespace

TEST(Fault, DieTakesRankAndSeq) {
  const Fault f = parse_fault("die:1:3");
  EXPECT_EQ(f.kind, FaultKind::kDie);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.seq, 3u);
}

TEST(Fault, NoJoinTakesARankOnly) {
  const Fault f = parse_fault("no-join:2");
  EXPECT_EQ(f.kind, FaultKind::kNoJoin);
  EXPECT_EQ(f.rank, 2);
}

TEST(Fault, StallTakesRankAndSeq) {
  const Fault f = parse_fault("stall:0:7");
  EXPECT_EQ(f.kind, FaultKind::kStall);
  EXPECT_EQ(f.rank, 0);
  EXPECT_EQ(f.seq, 7u);
}

TEST(Fault, MismatchTakesRankAndSeq) {
  const Fault f = parse_fault("mismatch:3:0");
  EXPECT_EQ(f.kind, FaultKind::kMismatch);
  EXPECT_EQ(f.rank, 3);
  EXPECT_EQ(f.seq, 0u);
}

TEST(Fault, EveryFormPrintsBackAsItWasWritten) {
  for (const std::string text : {"die:1:3", "no-join:2", "stall:0:7", "mismatch:3:0"})
    EXPECT_EQ(to_string(parse_fault(text)), text);
}

TEST(Fault, StrikesOnlyItsKindRankAndSeq) {
  const Fault f = parse_fault("die:1:3");
  EXPECT_TRUE(f.at(FaultKind::kDie, 1, 3));
  EXPECT_FALSE(f.at(FaultKind::kStall, 1, 3));
  EXPECT_FALSE(f.at(FaultKind::kDie, 0, 3));
  EXPECT_FALSE(f.at(FaultKind::kDie, 1, 2));
}

TEST(Fault, NoFaultIsJsonNull) {
  EXPECT_TRUE(to_json(std::nullopt).is_null());
}

TEST(Fault, NullJsonIsNoFault) {
  EXPECT_FALSE(fault_from_json(nullptr).has_value());
}

TEST(Fault, RoundTripsThroughJson) {
  const Fault f = parse_fault("stall:2:9");
  const std::optional<Fault> back = fault_from_json(to_json(f));
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == f);
}

// A trailing ':' leaves an empty field: the text is not one of the accepted forms.
TEST(Fault, TrailingColonIsRejected) {
  EXPECT_THROW(parse_fault("no-join:1:"), Error);
}

class MalformedFault : public ::testing::TestWithParam<std::string> {};

TEST_P(MalformedFault, IsAUsageErrorNamingTheValueAndTheAcceptedForms) {
  const std::string text = GetParam();
  try {
    parse_fault(text);
    FAIL() << "accepted '" << text << "'";
  } catch (const commtool::BadValue& e) {
    // The field and the value; the CLI puts --inject-fault in the field's place.
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_EQ(e.field(), "fault");
    EXPECT_EQ(e.value(), text);
    EXPECT_TRUE(what.starts_with("fault " + text + ": ")) << what;
    EXPECT_NE(what.find("die:RANK:SEQ, no-join:RANK, stall:RANK:SEQ, mismatch:RANK:SEQ"),
              std::string::npos)
        << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Fault, MalformedFault,
                         ::testing::Values("", "die", "die:1", "no-join:1:2", "explode:1:2",
                                           "die:-1:2", "die:x:2", "die:1:y"));
