// GPU test of `commtool diagnose allreduce` as a user runs it, on every GPU here: every path
// (NCCL's default, each forced algorithm/protocol, IPC one-shot and two-shot) runs in its own
// workers and verifies; none is excluded on a healthy machine. Timing is not asserted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli_run.hpp"

TEST(GpuDiagnoseAllReduce, EveryPathRunsVerifiedAndTheReportNamesThem) {
  const cli_test::CliResult r =
      cli_test::run_commtool("diagnose allreduce -b 1K -e 1M -f 32 -n 3 -w 1 --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  std::set<std::string> names;
  for (const nlohmann::json& path : doc.at("paths")) {
    names.insert(path.at("name").get<std::string>());
    ASSERT_EQ(path.at("points").size(), 3u) << path.dump();  // 1 KiB, 32 KiB, 1 MiB
    for (const nlohmann::json& p : path.at("points")) {
      EXPECT_EQ(p.at("status"), "ok") << path.at("name") << ": " << p.dump();
      EXPECT_EQ(p.at("time_us").at("n"), 3) << p.dump();
    }
  }
  for (const char* name :
       {"NCCL default", "NCCL Ring/LL", "NCCL Ring/LL128", "NCCL Ring/Simple", "NCCL Tree/LL",
        "NCCL Tree/LL128", "NCCL Tree/Simple", "IPC one-shot", "IPC two-shot"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  EXPECT_FALSE(doc.at("recommendation").empty());
}
