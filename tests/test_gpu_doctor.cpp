// GPU tests of `commtool doctor` (ctest -L gpu): on the GPU machine, each level end to end, its
// verdicts on the real counters, and the counters beside what `nvidia-smi -q` reads from the
// same driver. Where there is no GPU they fail, loudly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"

using cli_test::contains;
using cli_test::run_commtool;
using cli_test::run_shell;
using nlohmann::json;

namespace {

json doctor_json(const std::string& args, int& code) {
  const cli_test::CliResult r = run_commtool("doctor --json " + args, false);
  code = r.code;
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "doctor " << args << " printed no JSON (exit " << r.code << "): " << r.out;
    return json::object();
  }
}

// A check of `doc` itself (value() would return a copy, and a pointer into it would dangle).
const json* find_check(const json& doc, int gpu, const std::string& area) {
  const auto checks = doc.find("checks");
  if (checks == doc.end() || !checks->is_array()) return nullptr;
  for (const json& c : *checks)
    if (c.value("gpu", -1) == gpu && c.value("area", "") == area) return &c;
  return nullptr;
}

// The value `nvidia-smi -q` prints for `label` within the section `section` of GPU `bdf`.
std::string smi_value(const std::string& bdf, const std::string& section,
                      const std::string& label) {
  const std::string text = run_shell("nvidia-smi -q -i " + bdf + " 2>/dev/null").out;
  size_t at = text.find(section);
  if (at == std::string::npos) return "";
  at = text.find(label, at);
  if (at == std::string::npos) return "";
  at = text.find(':', at);
  const size_t end = text.find('\n', at);
  std::string v = text.substr(at + 1, end - at - 1);
  while (!v.empty() && v.front() == ' ')
    v.erase(0, 1);
  return v;
}

}  // namespace

TEST(GpuDoctor, QuickLevelJudgesEveryGpuAndRunsAVerifiedAllReduce) {
  int code = -1;
  const json doc = doctor_json("--level quick", code);
  ASSERT_EQ(doc.value("schema_version", 0), 1);
  EXPECT_TRUE(code == 0 || code == 6 || code == 7) << code;
  EXPECT_EQ(code == 0, doc.value("verdict", "") == "PASS");
  EXPECT_EQ(doc["steps"]["allreduce"].value("ok", false), true) << doc["steps"].dump(2);
  EXPECT_EQ(doc["steps"]["probe"].value("ok", false), true) << doc["steps"].dump(2);
  const json* ar = find_check(doc, -1, "all-reduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->value("severity", ""), "PASS") << ar->dump(2);
  ASSERT_FALSE(doc["counters"].empty()) << "NVML gave no counters: " << doc.dump(2);
  for (size_t i = 0; i < doc["counters"].size(); ++i) {
    const int gpu = static_cast<int>(i);
    for (const char* area : {"Xid", "ECC", "memory repair", "PCIe replay", "clocks", "modes"}) {
      const json* c = find_check(doc, gpu, area);
      ASSERT_NE(c, nullptr) << "GPU" << gpu << " has no " << area << " check";
      EXPECT_NE(c->value("evidence", ""), "") << area;
    }
    for (const char* area : {"H2D", "D2H"}) {
      const json* c = find_check(doc, gpu, area);
      ASSERT_NE(c, nullptr) << "GPU" << gpu << " has no " << area << " figure";
      EXPECT_EQ(c->value("severity", ""), "PASS") << c->dump(2);
    }
  }
}

TEST(GpuDoctor, CountersAgreeWithNvidiaSmi) {
  int code = -1;
  const json doc = doctor_json("--level quick", code);
  ASSERT_FALSE(doc.value("counters", json::array()).empty());
  for (const json& g : doc["counters"]) {
    const std::string bdf = g.value("bdf", "");
    // nvidia-smi -q: "Remapped Rows / Correctable Error", "PCIe ... Replays Since Reset",
    // "Persistence Mode", "ECC Errors / Volatile / DRAM Uncorrectable".
    if (g["remapped_rows_correctable"].is_number()) {
      EXPECT_EQ(std::to_string(g["remapped_rows_correctable"].get<uint64_t>()),
                smi_value(bdf, "Remapped Rows", "Correctable Error"));
    }
    if (g["pcie_replay"].is_number()) {
      // Read after doctor's own traffic; nvidia-smi a moment later: it can only have grown.
      const std::string smi = smi_value(bdf, "PCI", "Replays Since Reset");
      ASSERT_FALSE(smi.empty());
      EXPECT_GE(std::stoull(smi), g["pcie_replay"].get<uint64_t>());
    }
    if (g["persistence_mode"].is_number()) {
      EXPECT_EQ(g["persistence_mode"].get<int>() == 1 ? "Enabled" : "Disabled",
                smi_value(bdf, "Persistence Mode", "Persistence Mode"));
    }
    if (g["ecc_enabled"].is_number()) {
      EXPECT_EQ(g["ecc_enabled"].get<int>() == 1 ? "Enabled" : "Disabled",
                smi_value(bdf, "ECC Mode", "Current"));
    }
  }
}

TEST(GpuDoctor, TextPageLeadsWithTheVerdictAndSaysWhatItCouldNotRead) {
  const cli_test::CliResult r = run_commtool("doctor --level quick", false);
  ASSERT_TRUE(r.out.rfind("commtool doctor: ", 0) == 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\nPassed\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "\nMeasured\n")) << r.out;
}
