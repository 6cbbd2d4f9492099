#include <gtest/gtest.h>

#include "cli/device_list.hpp"
#include "probes/base/error.hpp"

using commtool::Error;
using commtool::ExitCode;
using commtool::cli::parse_device_list;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_device_list(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "'" << text << "' was accepted";
  return {};
}

}  // namespace

TEST(DeviceList, AllMeansEveryGpu) {
  EXPECT_TRUE(parse_device_list("all").empty());
}

TEST(DeviceList, ListsAndRangesAreSortedAndUnique) {
  EXPECT_EQ(parse_device_list("3,0-2,1"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_device_list("5"), (std::vector<int>{5}));
}

TEST(DeviceList, EmptyEntryIsRejected) {
  EXPECT_NE(error_of("0,,3").find("an entry is empty"), std::string::npos);
}

TEST(DeviceList, NegativeIndexIsRejected) {
  EXPECT_NE(error_of("-1").find("'-1': it is negative"), std::string::npos);
  EXPECT_NE(error_of("0,-1").find("'0,-1': '-1' is negative"), std::string::npos);
}

TEST(DeviceList, BackwardRangeIsRejected) {
  EXPECT_NE(error_of("3-1").find("runs backwards"), std::string::npos);
}

TEST(DeviceList, WordsAndTrailingCommaAreRejected) {
  EXPECT_NE(error_of("gpu0").find("'gpu0': it is not a GPU index"), std::string::npos);
  EXPECT_NE(error_of("0,gpu1").find("'0,gpu1': 'gpu1' is not a GPU index"), std::string::npos);
  EXPECT_NE(error_of("1,").find("empty"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
}

TEST(DeviceList, ErrorNamesTheWholeValueAndTheAcceptedForm) {
  std::string msg = error_of("0,,3");
  EXPECT_NE(msg.find("'0,,3'"), std::string::npos);
  EXPECT_NE(msg.find("0-3"), std::string::npos);
}

TEST(DeviceList, RepeatsKeepOrderAndDuplicatesForRanks) {
  EXPECT_EQ(parse_device_list("0,0,0,0", true), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(parse_device_list("0-1,0-1", true), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(parse_device_list("1,0", true), (std::vector<int>{1, 0}));
  EXPECT_EQ(parse_device_list("0,0,1"), (std::vector<int>{0, 1}));  // each GPU once
}

TEST(DeviceList, TooManyRanksAreRejectedBeforeTheyExist) {
  std::string list = "0-1023";
  for (int i = 0; i < 3; ++i)
    list += ",0-1023";
  try {
    parse_device_list(list, true);
    ADD_FAILURE() << "accepted 4096 ranks";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("more than 1024 ranks"), std::string::npos) << e.what();
  }
}
