#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"

namespace fs = std::filesystem;
using commtool::Error;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "commtool-out-XXXXXX").string();
    path = mkdtemp(p.data());
  }
  ~TempDir() {
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(path);
  }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path), {}));
  }
};

}  // namespace

TEST(OutputFile, WritesTheWholeDocumentAndNothingElse) {
  TempDir dir;
  auto file = (dir.path / "r.json").string();
  commtool::files::write_atomically(file, "{\"a\": 1}\n", "--output");
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "{\"a\": 1}\n");
  EXPECT_EQ(dir.entries(), 1u);  // no temp file left beside it
}

TEST(OutputFile, ReplacesAnExistingFileWhole) {
  TempDir dir;
  auto file = (dir.path / "r.txt").string();
  std::ofstream(file) << "old and much longer content\n";
  commtool::files::write_atomically(file, "new\n", "--output");
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "new\n");
}

TEST(OutputFile, MissingDirectoryIsUsageErrorNamingIt) {
  try {
    commtool::files::check_writable("/nonexistent-commtool-dir/r.json", "--output");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-commtool-dir"), std::string::npos);
  }
}

TEST(OutputFile, DirectoryAsOutputIsRejected) {
  TempDir dir;
  EXPECT_THROW(commtool::files::check_writable(dir.path.string(), "--output"), Error);
}

TEST(OutputFile, UnwritableLocationIsUsageErrorAndLeavesNoFile) {
  // /proc refuses new files even to root, so this holds for CI (root) and developers alike.
  try {
    commtool::files::write_atomically("/proc/commtool-test.json", "x", "--output");
    FAIL() << "writing into /proc succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("/proc/commtool-test.json"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists("/proc/commtool-test.json"));
}

TEST(OutputFile, FifoIsWrittenThroughNotReplaced) {
  // Renaming a temp file over a FIFO (or /dev/null) would replace it with a regular file.
  TempDir dir;
  fs::path fifo = dir.path / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo);
    received.assign(std::istreambuf_iterator<char>(in), {});
  });
  commtool::files::write_atomically(fifo.string(), "report\n", "--output");
  reader.join();
  EXPECT_EQ(received, "report\n");
  EXPECT_TRUE(fs::is_fifo(fifo));
}
