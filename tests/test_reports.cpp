#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "next_step_checks.hpp"
#include "probes/base/error.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "probes/topo/sysfs_reader.hpp"
#include "reports/format/text_table.hpp"
#include "reports/topo/topo_report.hpp"
#include "tests/topo_fixtures.hpp"

using namespace commtool;
using namespace commtool::topo;

namespace {

Topology dgx() {
  return read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/dgx_h100.xml");
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST(TextTable, AlignsColumnsAndTrimsTrailingSpace) {
  reports::TextTable t({"a", "bb"}, "");
  t.add_row({"xxx", "y"});
  t.add_row({"z", ""});
  EXPECT_EQ(t.render(), "a    bb\nxxx  y\nz\n");
}

TEST(TextTable, CountsUtf8AsOneColumnPerCodePoint) {
  EXPECT_EQ(reports::display_width("└─x"), 3u);
  EXPECT_EQ(reports::display_width("×"), 1u);
}

TEST(TopoJson, HasSchemaVersionAndTheMatrix) {
  Topology t = dgx();
  auto doc = reports::topo_to_json(t, analyze(t));
  EXPECT_EQ(doc["schema_version"], reports::kTopoSchemaVersion);
  EXPECT_EQ(doc["command"], "topo");
  EXPECT_EQ(doc["gpus"].size(), 8u);
  EXPECT_EQ(doc["matrix"]["labels"][0], "GPU0");
  EXPECT_EQ(doc["matrix"]["cells"][0][1], "NV18");
  EXPECT_EQ(doc["gpus"][0]["expected"]["nvlink_gbps"], 450.0);
}

TEST(TopoJson, UnknownValuesAreNullNotZero) {
  commtool::fixtures::SysfsBuilder fs;
  commtool::fixtures::build_vm_one_gpu(fs);
  Topology t = read_sysfs({fs.root(), true, ""});
  auto doc = reports::topo_to_json(t, analyze(t));
  EXPECT_TRUE(doc["gpus"][0]["numa_node"].is_null());
  EXPECT_TRUE(doc["gpus"][0]["pcie"]["port_max_gen"].is_null());
  EXPECT_EQ(doc["gpus"][0]["pcie"]["max_gen"], 5);
  EXPECT_TRUE(doc["driver_version"].is_null());
  EXPECT_FALSE(doc["missing"].empty());
}

TEST(TopoJson, FindingsCarrySeverityCodeAndEvidence) {
  commtool::fixtures::SysfsBuilder fs;
  commtool::fixtures::build_degraded_link(fs);
  Topology t = read_sysfs({fs.root(), true, ""});
  auto doc = reports::topo_to_json(t, analyze(t));
  bool found = false;
  for (const auto& f : doc["findings"]) {
    if (f["code"] == "pcie-width-degraded") {
      found = true;
      EXPECT_EQ(f["severity"], "warning");
      EXPECT_FALSE(f["evidence"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(found);
}

TEST(TopoText, PrintsMatrixLegendAndPairing) {
  Topology t = dgx();
  std::string text = reports::render_topo_text(t, analyze(t));
  EXPECT_TRUE(contains(text, "Connection matrix"));
  EXPECT_TRUE(contains(text, "NV18"));
  EXPECT_TRUE(contains(text, "Legend:"));
  EXPECT_TRUE(contains(text, "NV#  = Connection traversing a bonded set of # NVLinks"));
  EXPECT_TRUE(contains(text, "GPU0 -> NIC"));
  EXPECT_TRUE(contains(text, "450 GB/s per direction"));
}

TEST(TopoText, SaysTheCurrentGenerationDropsAtIdle) {
  Topology t = dgx();
  EXPECT_TRUE(contains(reports::render_topo_text(t, analyze(t)), "lower the generation when idle"));
}

TEST(TopoText, SingleGpuVmShowsNoPeerAndWhatIsMissing) {
  commtool::fixtures::SysfsBuilder fs;
  commtool::fixtures::build_vm_one_gpu(fs);
  Topology t = read_sysfs({fs.root(), true, ""});
  std::string text = reports::render_topo_text(t, analyze(t));
  EXPECT_TRUE(contains(text, "no peer: only one GPU"));
  EXPECT_TRUE(contains(text, "Not available"));
  EXPECT_TRUE(contains(text, "Gen5 x16"));
}

TEST(TopoDot, DrawsTreeEdgesAndNvLinkBundles) {
  Topology t = dgx();
  std::string dot = reports::render_topo_dot(t);
  // A comment first says what draws it and which package has that.
  EXPECT_EQ(dot.rfind("// commtool topo --dot: draw it with `dot -Tsvg -o topo.svg` (dot is in "
                      "package graphviz)\ngraph commtool_topo {",
                      0),
            0u)
      << dot.substr(0, 200);
  EXPECT_TRUE(contains(dot, "\"cpu0\" -- \"0000:15:00.0\""));
  EXPECT_TRUE(contains(dot, "label=\"NV5\""));
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_TRUE(contains(dot, "}\n"));
}

// Names come from NCCL topology files and drivers: a quote must not end a DOT string.
TEST(TopoDot, NamesAreEscapedInsideTheirQuotes) {
  Topology t = dgx();
  t.gpus[0].name = "H100 \"80GB\"\\x\n";
  const std::string dot = reports::render_topo_dot(t);
  EXPECT_TRUE(contains(dot, "\\nH100 \\\"80GB\\\"\\\\x\\n")) << dot;
  EXPECT_FALSE(contains(dot, "\"80GB\" ")) << dot;
}

TEST(TopoJson, CudaNotAskedIsNullNotFalse) {
  commtool::fixtures::SysfsBuilder fs;
  commtool::fixtures::build_vm_one_gpu(fs);
  Topology t = read_sysfs({fs.root(), true, ""});
  auto doc = reports::topo_to_json(t, analyze(t));
  EXPECT_EQ(doc["cuda_queried"], false);
  EXPECT_TRUE(doc["cuda_available"].is_null());
}

namespace {

// An NCCL topology file of `gpus` GPUs, 32 to a PCIe switch under one CPU: every pair PIX within
// a switch, PHB across switches.
std::string many_gpus_xml(int gpus) {
  std::string xml = R"(<system version="1"><cpu numaid="0" affinity="ff" arch="x86_64" )"
                    R"(vendor="GenuineIntel" familyid="6" modelid="143">)";
  for (int sw = 0; sw * 32 < gpus; ++sw) {
    xml += fmt::format(R"(<pci busid="0002:{:02x}:00.0" class="0x060400" vendor="0x1000" )"
                       R"(device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">)",
                       sw);
    for (int i = sw * 32; i < std::min(gpus, sw * 32 + 32); ++i) {
      xml += fmt::format(R"(<pci busid="0001:{:02x}:{:02x}.0" class="0x030200" vendor="0x10de" )"
                         R"(device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">)"
                         R"(<gpu dev="{}" sm="90" rank="{}" gdr="1"/></pci>)",
                         i / 32, i % 32, i, i);
    }
    xml += "</pci>";
  }
  return xml + "</cpu></system>";
}

}  // namespace

// Past 64 devices the matrix is counted by path in the text and in the JSON alike: 4,096 GPUs
// once made a 256 MB document and took 2.2 GB to build.
TEST(TopoJson, PastSixtyFourDevicesTheMatrixIsCountedByPathNotListed) {
  const Topology small = parse_nccl_xml(many_gpus_xml(64), "small.xml");
  const auto listed = reports::topo_to_json(small, analyze(small));
  EXPECT_EQ(listed["matrix"]["cells"].size(), 64u);
  EXPECT_FALSE(listed["matrix"].contains("pairs_by_path"));

  const Topology big = parse_nccl_xml(many_gpus_xml(96), "big.xml");
  const Analysis a = analyze(big);
  const auto doc = reports::topo_to_json(big, a);
  EXPECT_TRUE(doc["matrix"]["cells"].is_null());
  EXPECT_EQ(doc["matrix"]["labels"].size(), 96u);
  // 3 switches of 32: 3 x C(32,2) = 1,488 PIX pairs, the other 4,560 - 1,488 = 3,072 PHB.
  EXPECT_EQ(doc["matrix"]["pairs_by_path"]["gpu_gpu"],
            nlohmann::json::parse(R"([{"path":"PIX","pairs":1488},{"path":"PHB","pairs":3072}])"));
  EXPECT_EQ(doc["matrix"]["pairs_by_path"]["gpu_nic"], nlohmann::json::array());
  const std::string text = reports::render_topo_text(big, a);
  EXPECT_TRUE(contains(text, "96 GPUs and 0 NICs: too many to print as a table (more than 64)"))
      << text;
  EXPECT_TRUE(contains(text, "GPU-GPU: PIX 1488, PHB 3072")) << text;
  EXPECT_LT(doc.dump().size(), 96u * 1000) << "the document grows with the GPUs";
}

TEST(TopoReaders, MoreGpusThanAnyMachineHasIsUsageErrorNamingTheCount) {
  try {
    parse_nccl_xml(many_gpus_xml(4097), "huge.xml");
    FAIL() << "4,097 GPUs were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_TRUE(contains(e.what(),
                         "huge.xml: 4097 GPUs; commtool reads topologies of at most "
                         "4096 GPUs"))
        << e.what();
  }
}

// --- every finding's next step; unknown values written one way ---

namespace {

// Every topology the tests have at hand: the NCCL files and the sysfs machines.
std::vector<Topology> every_fixture() {
  std::vector<Topology> out;
  for (const char* f :
       {"nccl_xml/dgx_h100.xml", "nccl_xml/h200_vm_nccl_dump.xml", "nccl_xml/nvlink_pair.xml",
        "nccl_xml/pcie_4gpu_2socket.xml", "nccl_xml/vendor_pci_only.xml", "cluster/rank3.xml"})
    out.push_back(read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/" + f));
  for (auto build :
       {commtool::fixtures::build_vm_one_gpu, commtool::fixtures::build_two_socket_8gpu,
        commtool::fixtures::build_degraded_link}) {
    commtool::fixtures::SysfsBuilder fs;
    build(fs);
    out.push_back(read_sysfs({fs.root(), true, ""}));
  }
  out.push_back(read_sysfs({std::string(COMMTOOL_FIXTURES_DIR) + "/sysfs/h200_vm", true, ""}));
  return out;
}

}  // namespace

TEST(TopoFindings, EveryFindingOfEveryFixtureEndsWithWhatToDoNext) {
  size_t findings = 0;
  for (Topology& t : every_fixture()) {
    const Analysis a = analyze(t);
    const std::string text = reports::render_topo_text(t, a);
    for (const Finding& f : a.findings) {
      ++findings;
      next_step::expect_next_step(f.advice, t.source + ": " + f.code);
      EXPECT_TRUE(contains(text, "      what to do: " + f.advice + "\n")) << text;
    }
  }
  EXPECT_GT(findings, 5u);
}

TEST(TopoFindings, NoNicSaysWhatToCheckForAMachineAndForAFile) {
  Topology t = read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/dgx_h100.xml");
  t.nics.clear();
  t.reindex();
  Analysis a = analyze(t);
  auto no_nic = std::find_if(a.findings.begin(), a.findings.end(),
                             [](const Finding& f) { return f.code == "no-nic"; });
  ASSERT_NE(no_nic, a.findings.end());
  EXPECT_TRUE(contains(no_nic->advice, "NCCL_TOPO_DUMP_FILE")) << no_nic->advice;
  commtool::fixtures::SysfsBuilder fs;
  commtool::fixtures::build_vm_one_gpu(fs);
  Topology live = read_sysfs({fs.root(), true, ""});
  live.nics.clear();
  a = analyze(live);
  no_nic = std::find_if(a.findings.begin(), a.findings.end(),
                        [](const Finding& f) { return f.code == "no-nic"; });
  ASSERT_NE(no_nic, a.findings.end());
  next_step::expect_next_step(no_nic->advice, "no-nic");
  EXPECT_TRUE(contains(no_nic->advice, "lspci")) << no_nic->advice;
}

// An unknown value is "-" in a table cell and "unknown" in a sentence: never "?", a blank cell
// or a made-up id. The NCCL file with vendor-only functions knows no names, ids or current link.
TEST(TopoText, UnknownValuesAreADashInTablesAndUnknownInSentences) {
  Topology t =
      read_nccl_xml_file(std::string(COMMTOOL_FIXTURES_DIR) + "/nccl_xml/vendor_pci_only.xml");
  const std::string text = reports::render_topo_text(t, analyze(t));
  EXPECT_FALSE(contains(text, "?")) << text;
  EXPECT_FALSE(contains(text, "[0000:0000]")) << text;
  EXPECT_TRUE(contains(text, "  0    0001:00:00.0  -     -     0     0-15  -         Gen4 x16  -"))
      << text;
  EXPECT_TRUE(contains(text, "├─ 0001:00:00.0 GPU0 (name unknown) [ids unknown] Gen4 x16")) << text;
  EXPECT_TRUE(contains(text, "  GPU0 -> NIC0 (name unknown) (PIX)")) << text;
  // The matrix has a cell for every row: a NIC's CPU affinity is "-", not blank.
  EXPECT_TRUE(contains(text, "  NIC0  PIX   PIX   X     PIX   -             0")) << text;
  // The P2P section points at the section by its title.
  EXPECT_TRUE(contains(text, "unknown: CUDA was not asked (see Not available below)")) << text;
  EXPECT_TRUE(contains(text, "\nNot available\n")) << text;
  // Every fixture's text: no "?" anywhere.
  for (Topology& f : every_fixture()) {
    const std::string all = reports::render_topo_text(f, analyze(f));
    EXPECT_FALSE(contains(all, "?")) << f.source << "\n" << all;
  }
}

TEST(TopoText, ALinkWithOnePartKnownShowsADashForTheOther) {
  Topology t = dgx();
  t.gpus[0].pcie.current_gen = 0;
  t.gpus[0].pcie.current_width = 8;
  const std::string text = reports::render_topo_text(t, analyze(t));
  EXPECT_TRUE(contains(text, "Gen- x8")) << text;
}
