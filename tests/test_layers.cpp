// The layering rule, kept by a test: includes run downward only. probes/base/ (errors, files,
// CUDA and NCCL wrappers, workers, statistics) is the ground floor; the probes, then tracing/,
// then reports/, then cli/ stand on it. A product source never includes a test file, and no
// source file grows past the length a reader can hold (600 lines).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The layer of a path inside the repository, from the floor up; -1: not a product source.
int layer_of(const std::string& path) {
  static const std::vector<std::pair<std::string, int>> kLayers = {
      {"probes/base/", 0}, {"probes/", 1}, {"tracing/", 2}, {"reports/", 3}, {"cli/", 4}};
  for (const auto& [prefix, layer] : kLayers) {
    if (path.starts_with(prefix)) return layer;
  }
  return -1;
}

struct Source {
  std::string path;  // relative to the repository root
  std::vector<std::string> includes;
  int lines = 0;
};

std::vector<Source> product_sources() {
  const fs::path root = COMMTOOL_SOURCE_DIR;
  const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
  std::vector<Source> out;
  for (const char* top : {"probes", "tracing", "reports", "cli"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      Source s;
      s.path = fs::relative(entry.path(), root).generic_string();
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line); ++s.lines) {
        std::smatch m;
        if (std::regex_search(line, m, include_line)) s.includes.push_back(m[1]);
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

TEST(Layers, TheTreeHasSourcesInEveryLayer) {
  std::map<int, int> per_layer;
  for (const Source& s : product_sources())
    ++per_layer[layer_of(s.path)];
  for (int layer = 0; layer <= 4; ++layer)
    EXPECT_GT(per_layer[layer], 0) << "layer " << layer;
}

TEST(Layers, IncludesRunDownwardOnly) {
  for (const Source& s : product_sources()) {
    const int from = layer_of(s.path);
    for (const std::string& inc : s.includes) {
      EXPECT_FALSE(inc.starts_with("tests/")) << s.path << " includes the test file " << inc;
      const int to = layer_of(inc);
      if (to < 0) continue;  // generated headers (build_info.hpp)
      EXPECT_LE(to, from) << s.path << " (layer " << from << ") includes " << inc << " (layer "
                          << to << "), a layer above it";
    }
  }
}

TEST(Layers, NoSourceFileIsLongerThanAReaderHolds) {
  constexpr int kMaxLines = 600;
  for (const Source& s : product_sources())
    EXPECT_LE(s.lines, kMaxLines) << s.path;
}

// MPI is reached through MpiSession alone: the plugin is the one file that includes mpi.h, so
// the commtool binary never needs an MPI library (probes/base/cluster/mpi_abi.hpp).
TEST(Layers, OnlyTheMpiPluginIncludesMpiH) {
  const fs::path root = COMMTOOL_SOURCE_DIR;
  const std::regex mpi_include(R"(^\s*#\s*include\s+[<"]mpi\.h[>"])");
  std::vector<std::string> includers;
  for (const char* top : {"probes", "tracing", "reports", "cli"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        if (std::regex_search(line, mpi_include)) {
          includers.push_back(fs::relative(entry.path(), root).generic_string());
        }
      }
    }
  }
  EXPECT_EQ(includers, std::vector<std::string>{"probes/base/cluster/mpi_plugin.cpp"});
}

// DEVELOPMENT.md's Layout section names every source folder, so the map a newcomer reads is
// the tree they find.
TEST(Layers, TheDevelopmentLayoutNamesEveryFolder) {
  const fs::path root = COMMTOOL_SOURCE_DIR;
  std::ifstream in(root / "DEVELOPMENT.md");
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t start = readme.find("\n## Layout\n");
  ASSERT_NE(start, std::string::npos) << "DEVELOPMENT.md has no Layout section";
  const std::string layout = readme.substr(start, readme.find("\n## ", start + 1) - start);
  for (const char* top : {"cli", "probes", "tracing", "reports"}) {
    EXPECT_NE(layout.find(std::string(top) + "/"), std::string::npos) << top;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_directory()) continue;
      const std::string name = entry.path().filename().string() + "/";
      EXPECT_NE(layout.find(name), std::string::npos)
          << fs::relative(entry.path(), root).generic_string()
          << " is not in DEVELOPMENT.md's Layout";
    }
  }
}

}  // namespace
