// `commtool doctor` as a user runs it on the CI machine (no GPU): bad input is exit 2 before
// anything is examined, and a machine without a GPU gets its page and exit 3.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_support.hpp"

using cli_test::contains;
using cli_test::Result;
using cli_test::run;
using cli_test::TempDir;

namespace {

std::string kernel_log_fixture() {
  return std::string(COMMTOOL_FIXTURES_DIR) + "/kernel_log/public_xid_lines.txt";
}

}  // namespace

TEST(CliDoctor, AnUnknownLevelIsExit2NamingTheAcceptedOnes) {
  const Result r = run("doctor --level fast");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, "--level fast: not a level; accepted: quick, standard, long"))
      << r.out;
}

TEST(CliDoctor, ABadThresholdsFileIsExit2NamingItsLineAndWritesNothing) {
  TempDir dir;
  const std::string conf = (dir.path / "site.conf").string();
  std::ofstream(conf) << "# ours\nnvlink_crc_warn = 2\nnvlink_crc = 5\n";
  const std::string out = (dir.path / "page.txt").string();
  const Result r = run("doctor --thresholds " + conf + " --output " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, conf + ":3: 'nvlink_crc' is not a threshold")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(run("doctor --thresholds " + (dir.path / "none.conf").string()).code, 2);
}

TEST(CliDoctor, AMissingKernelLogIsExit2AndOneFileCannotBeBothInputAndOutput) {
  EXPECT_EQ(run("doctor --kernel-log /nonexistent/dmesg.txt").code, 2);
  const Result same =
      run("doctor --kernel-log " + kernel_log_fixture() + " --output " + kernel_log_fixture());
  EXPECT_EQ(same.code, 2) << same.out;
}

TEST(CliDoctor, NoGpuGivesThePageAndExit3) {
  const Result text = run("doctor --kernel-log " + kernel_log_fixture());
  if (text.code == 0 || text.code == 6 || text.code == 7) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(text.code, 3) << text.out;
  EXPECT_EQ(text.out.rfind("commtool doctor: FAIL", 0), 0u) << text.out;
  EXPECT_TRUE(contains(text.out, "probe: no NVIDIA GPU found")) << text.out;
  // The Xids of GPUs not on this machine are still the node's news.
  EXPECT_TRUE(contains(text.out, "NVSwitch")) << text.out;

  TempDir dir;
  const std::string out = (dir.path / "doctor.json").string();
  const Result json =
      run("doctor --json --kernel-log " + kernel_log_fixture() + " --output " + out);
  EXPECT_EQ(json.code, 3);
  std::ifstream in(out);
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["verdict"], "FAIL");
  EXPECT_EQ(doc["kernel_log"]["events"], 24);
  EXPECT_EQ(doc["steps"]["probe"]["ran"], false);
  EXPECT_FALSE(doc["thresholds"].empty());
}

TEST(CliDoctor, HelpStatesEachLevelAndTheExitCodes) {
  const Result r = run("doctor --help");
  EXPECT_EQ(r.code, 0);
  std::string flat;  // the help is wrapped to the terminal: compare its words
  for (char c : r.out) {
    if (c == '\n' || c == ' ') {
      if (!flat.empty() && flat.back() != ' ') flat += ' ';
    } else {
      flat += c;
    }
  }
  for (const char* s : {"quick:", "standard:", "long:", "Exit 0 all passed, 6 a WARN, 7 a FAIL"})
    EXPECT_TRUE(contains(flat, s)) << s << "\n" << r.out;
}

TEST(CliDoctor, ABaselineThatIsNoDoctorJsonIsExit2BeforeAnythingRuns) {
  TempDir dir;
  const std::string file = (dir.path / "good.json").string();
  std::ofstream(file) << "{\"command\": \"topo\", \"schema_version\": 1}";
  const Result r = run("doctor --baseline " + file);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "not a doctor --json document (command \"topo\")")) << r.out;
  EXPECT_FALSE(contains(r.out, "commtool doctor:")) << r.out;  // no page: nothing was examined
}

// A kernel log's line may carry any bytes (a process name, a corrupted record): --json is still
// one valid UTF-8 document, the bad bytes replaced, and the Xid is still read.
TEST(CliDoctor, AKernelLogLineThatIsNotUtf8GivesValidJson) {
  TempDir dir;
  const std::string log = (dir.path / "dmesg.txt").string();
  std::ofstream(log) << "[  12.5] NVRM: Xid (PCI:0000:91:00): 13, pid=4242, name=tr\xff\xfe"
                        "in, Graphics SM Warp Exception\n";
  const std::string out = (dir.path / "doctor.json").string();
  const Result r = run("doctor --json --kernel-log " + log + " --output " + out);
  EXPECT_NE(r.code, 1) << r.out;  // never "internal error"
  std::ifstream in(out);
  ASSERT_TRUE(in.good()) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["kernel_log"]["events"], 1) << doc.dump(2);
}
