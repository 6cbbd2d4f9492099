// diagnose allreduce's text and JSON reports of a sweep: the table, crossovers, recommendation and
// exclusions, and the rates of commtool's IPC kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "allreduce_test_support.hpp"
#include "reports/allreduce/allreduce_diagnosis.hpp"

using namespace commtool;
using namespace commtool::reports;
using namespace allreduce_test;

namespace {

TEST(AllReduceText, TableHasOneRowPerSizeThenCrossoversRecommendationAndExclusions) {
  AllReduceSweep s = clean_crossover();
  s.paths.push_back(two_shot({bad(1 * MiB, AllReducePointStatus::kFailedVerification, "")}));
  const std::string text = allreduce_text(s, diagnose_allreduce(s));
  EXPECT_NE(text.find("size"), std::string::npos);
  EXPECT_NE(text.find("4 KiB    IPC one-shot"), std::string::npos) << text;
  EXPECT_NE(text.find("RING/LL, 1 ch"), std::string::npos);
  EXPECT_NE(text.find("2.50x"), std::string::npos);
  EXPECT_NE(text.find("between 64 KiB and 256 KiB: IPC one-shot -> NCCL default"),
            std::string::npos);
  EXPECT_NE(text.find("  - up to 64 KiB use IPC one-shot"), std::string::npos);
  EXPECT_NE(text.find("  - IPC two-shot failed verification at every size measured: excluded"),
            std::string::npos);
}

TEST(AllReduceJson, CarriesVerdictsCrossoversAndSentences) {
  const AllReduceSweep s = clean_crossover();
  const nlohmann::json j = nlohmann::json::parse(allreduce_json(s, diagnose_allreduce(s)));
  EXPECT_EQ(j["ranks"], 8);
  EXPECT_EQ(j["paths"].size(), 3u);
  EXPECT_EQ(j["sizes"][0]["fastest"], "IPC one-shot");
  EXPECT_EQ(j["sizes"][0]["outcome"], "win");
  EXPECT_DOUBLE_EQ(j["sizes"][0]["speedup"].get<double>(), 2.5);
  EXPECT_EQ(j["crossovers"][1]["to"], "NCCL Ring/Simple");
  EXPECT_EQ(j["recommendation"].size(), 3u);
  EXPECT_TRUE(j["exclusions"].empty());
}

// An IPC point as the sweep makes it: the kernel's bytes and their rate at the median.
AllReducePoint ipc_ok(uint64_t bytes, double median_us, double kernel_bytes) {
  AllReducePoint p = ok(bytes, median_us);
  p.kernel_bytes = kernel_bytes;
  p.kernel_gbps = kernel_bytes / (median_us * 1e3);
  return p;
}

AllReduceSweep one_rank_with_kernel_rates() {
  AllReduceSweep s =
      sweep({nccl_default({ok(8, 6), ok(256 * MiB, 130)}),
             one_shot({ipc_ok(8, 5, 16), ipc_ok(256 * MiB, 160, 512.0 * MiB)}),
             two_shot({ipc_ok(8, 5.5, 16), bad(256 * MiB, AllReducePointStatus::kFailedVerification,
                                               "3 wrong byte(s) over 20 calls")})});
  s.placement = {1, 1, 1};
  return s;
}

TEST(AllReduceJson, IpcPointsCarryTheirKernelBytesAndRateNcclPointsNull) {
  const AllReduceSweep s = one_rank_with_kernel_rates();
  const nlohmann::json j = nlohmann::json::parse(allreduce_json(s, diagnose_allreduce(s)));
  const nlohmann::json& nccl = j["paths"][0]["points"][1];
  EXPECT_TRUE(nccl["kernel_bytes_read_written"].is_null());
  EXPECT_TRUE(nccl["kernel_gbps"].is_null());
  const nlohmann::json& one = j["paths"][1]["points"][1];
  EXPECT_DOUBLE_EQ(one["kernel_bytes_read_written"].get<double>(), 512.0 * MiB);
  EXPECT_NEAR(one["kernel_gbps"].get<double>(), 3355.4, 0.1);        // 512 MiB in 160 us
  EXPECT_TRUE(j["paths"][2]["points"][1]["kernel_gbps"].is_null());  // failed: no figure
}

TEST(AllReduceText, ListsTheIpcKernelsRatesPerSizeAndLeavesFailedPointsOut) {
  const AllReduceSweep s = one_rank_with_kernel_rates();
  const std::string text = allreduce_text(s, diagnose_allreduce(s));
  const size_t at = text.find("commtool's IPC kernels");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string table = text.substr(at);
  EXPECT_NE(table.find("IPC one-shot us"), std::string::npos) << table;
  EXPECT_NE(table.find("3355.4"), std::string::npos) << table;
  EXPECT_NE(table.find("160.0 [156.8-163.2]"), std::string::npos) << table;
  // Two-shot failed at 256 MiB: its cells there are empty, the one-shot's stay.
  const std::string row = table.substr(table.find("  256 MiB"));
  EXPECT_NE(row.find("3355.4  -                -"), std::string::npos) << table;
}

TEST(AllReduceText, NoIpcKernelTableWithoutIpcRates) {
  const AllReduceSweep s = clean_crossover();  // hand-made points without kernel bytes
  EXPECT_EQ(allreduce_text(s, diagnose_allreduce(s)).find("IPC kernels"), std::string::npos);
}

}  // namespace
