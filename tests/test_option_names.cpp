// Lower layers refuse a value by its request field (BadValue); the CLI names the option. Every
// field a lower layer refuses must have an option, or the user would read a field name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "cli/option_names.hpp"

namespace fs = std::filesystem;

namespace {

// Every "field" in a bad_value("field", ...) under probes/ and tracing/.
std::set<std::string> refused_fields() {
  const std::regex call(R"re(bad_value\(\s*"([a-z_]+)")re");
  std::set<std::string> out;
  for (const char* top : {"probes", "tracing"}) {
    for (const auto& entry :
         fs::recursive_directory_iterator(fs::path(COMMTOOL_SOURCE_DIR) / top)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      for (std::sregex_iterator it(s.begin(), s.end(), call), end; it != end; ++it)
        out.insert((*it)[1]);
    }
  }
  return out;
}

TEST(OptionNames, EveryFieldALowerLayerRefusesHasAnOption) {
  const std::set<std::string> fields = refused_fields();
  ASSERT_GE(fields.size(), 8u);  // the scan found the calls
  for (const std::string& f : fields)
    EXPECT_TRUE(commtool::cli::option_for_field(f).starts_with("--")) << f;
}

TEST(OptionNames, TheUserReadsTheOptionInPlaceOfTheField) {
  const commtool::BadValue e("tokens_per_rank", "0", "must be at least 1");
  EXPECT_EQ(std::string(e.what()), "tokens_per_rank 0: must be at least 1");
  EXPECT_EQ(commtool::cli::user_message(e), "--tokens 0: must be at least 1");
  EXPECT_EQ(commtool::cli::option_for_field("no_such_field"), "no_such_field");
}

}  // namespace
