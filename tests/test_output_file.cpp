#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"
#include "probes/base/workers/signal_trap.hpp"

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

// `--output /dev/stdout` with standard output a pipe: /proc/self/fd/1 links to "pipe:[N]",
// which is no path. What the name opens is written through, as for a FIFO.
TEST(OutputFile, DevStdoutOntoAPipeIsWrittenThrough) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string path = "/proc/self/fd/" + std::to_string(fds[1]);
  EXPECT_NO_THROW(commtool::files::write_atomically(path, "report\n", "--output"));
  ::close(fds[1]);
  char buf[64] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof buf), 7);
  EXPECT_STREQ(buf, "report\n");
  ::close(fds[0]);
}

namespace {

// Runs `check` in a child process as an unprivileged user where this one is root (root passes
// every permission check); true if the child exited 0.
bool as_unprivileged_user(const std::function<bool()>& check) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) _exit(2);
    _exit(check() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

// `--output /dev/null` needs the device to be writable, not /dev, which only root may write in.
TEST(OutputFile, ADeviceInADirectoryTheUserCannotWriteIsWrittenThrough) {
  EXPECT_TRUE(as_unprivileged_user([] {
    try {
      commtool::files::check_writable("/dev/null", "--output");
      commtool::files::write_atomically("/dev/null", "report\n", "--output");
      return fs::is_character_file("/dev/null");
    } catch (const Error&) {
      return false;
    }
  }));
}

// Root passes every permission bit, even in /proc: whether a file can be created there is
// tried, so the run is refused before it is measured, not lost at the end.
TEST(OutputFile, ADirectoryThatTakesNoNewFileIsRefusedEvenForRoot) {
  EXPECT_THROW(commtool::files::check_writable("/proc/commtool-report.json", "--output"), Error);
  EXPECT_FALSE(fs::exists("/proc/commtool-report.json"));
}

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// Sets the process's umask for one scope and puts the old one back.
struct Umask {
  mode_t previous;
  explicit Umask(mode_t m) : previous(::umask(m)) {}
  ~Umask() { ::umask(previous); }
};

}  // namespace

// `--output link` must write where the link points, as `> link` in a shell does: replacing the
// link with a regular file would silently detach whatever the user pointed it at.
TEST(OutputFile, ASymlinkIsWrittenThroughToItsTargetAndStaysALink) {
  TempDir dir;
  fs::create_directory(dir.path / "real");
  const fs::path target = dir.path / "real" / "report.json";
  std::ofstream(target) << "old\n";
  const fs::path link = dir.path / "latest.json";
  fs::create_symlink(fs::path("real") / "report.json", link);  // relative, as users make them
  commtool::files::write_atomically(link.string(), "new\n", "--output");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::read_symlink(link), fs::path("real") / "report.json");
  EXPECT_EQ(read_file(target), "new\n");
  EXPECT_EQ(dir.entries(), 2u);  // the link and real/: no temp file beside the link
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path / "real"), {}), 1);
}

TEST(OutputFile, AChainOfLinksAndADanglingLinkEndAtTheFinalTarget) {
  TempDir dir;
  const fs::path target = dir.path / "final.txt";  // does not exist yet
  fs::create_symlink(target, dir.path / "b");
  fs::create_symlink("b", dir.path / "a");
  commtool::files::write_atomically((dir.path / "a").string(), "x\n", "--output");
  EXPECT_TRUE(fs::is_symlink(dir.path / "a"));
  EXPECT_TRUE(fs::is_symlink(dir.path / "b"));
  EXPECT_EQ(read_file(target), "x\n");
}

TEST(OutputFile, ALinkLoopIsUsageErrorNamingThePath) {
  TempDir dir;
  fs::create_symlink("b", dir.path / "a");
  fs::create_symlink("a", dir.path / "b");
  const std::string a = (dir.path / "a").string();
  try {
    commtool::files::write_atomically(a, "x", "--output");
    FAIL() << "a link loop was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("--output " + a), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(dir.path / "a"));
}

// fs.protected_symlinks, as the kernel applies it to a shell's `> /tmp/link`.
TEST(OutputFile, ALinkInAStickyWorldWritableDirectoryIsFollowedOnlyByItsOwnerOrTheDirectorys) {
  using commtool::files::link_is_protected;
  const mode_t tmp = S_IFDIR | 01777;
  EXPECT_TRUE(link_is_protected(tmp, /*dir*/ 0, /*link*/ 1000, /*follower*/ 0));
  EXPECT_TRUE(link_is_protected(tmp, 0, 1000, 1001));
  EXPECT_FALSE(link_is_protected(tmp, 0, 1000, 1000));           // one's own link
  EXPECT_FALSE(link_is_protected(tmp, 1000, 1000, 0));           // the directory owner's link
  EXPECT_FALSE(link_is_protected(S_IFDIR | 0777, 0, 1000, 0));   // not sticky
  EXPECT_FALSE(link_is_protected(S_IFDIR | 01775, 0, 1000, 0));  // not world-writable
}

// Another user's link in /tmp pointing at a file root owns: root must not replace that file.
TEST(OutputFile, ALinkPlantedByAnotherUserInAStickyDirectoryIsRefusedAndItsTargetKept) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the link another owner (CI is root)";
  TempDir dir;
  const fs::path shared = dir.path / "tmp";
  fs::create_directory(shared);
  ::chmod(shared.c_str(), 01777);
  const fs::path precious = dir.path / "precious";
  std::ofstream(precious) << "keep\n";
  const fs::path link = shared / "report.json";
  fs::create_symlink(precious, link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);  // nobody's
  for (auto call :
       {+[](const std::string& p) { commtool::files::check_writable(p, "--output"); },
        +[](const std::string& p) { commtool::files::write_atomically(p, "x", "--output"); }}) {
    try {
      call(link.string());
      FAIL() << "a planted link was followed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
      EXPECT_NE(std::string(e.what()).find("refusing to follow the symlink"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("fs.protected_symlinks"), std::string::npos);
    }
  }
  EXPECT_EQ(read_file(precious), "keep\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(std::distance(fs::directory_iterator(shared), {}), 1);  // no temp file either
  // The same link owned by the directory's owner is followed, as the kernel follows it.
  ASSERT_EQ(::lchown(link.c_str(), 0, 0), 0);
  commtool::files::write_atomically(link.string(), "x", "--output");
  EXPECT_EQ(read_file(precious), "x");
}

TEST(OutputFile, ANameLongerThanLinuxTakesIsUsageErrorBeforeAnythingIsWritten) {
  TempDir dir;
  const std::string long_name = (dir.path / std::string(300, 'n')).string();
  for (const std::string& path : {long_name, "/" + std::string(5000, 'd') + "/x"}) {
    try {
      commtool::files::check_writable(path, "--trace");
      FAIL() << "an over-long name was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), commtool::ExitCode::kUsage);
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--trace ", 0), 0u) << what;
      EXPECT_NE(what.find("at most"), std::string::npos) << what;
      EXPECT_LT(what.size(), 400u) << "the name is quoted in part, not whole";
    }
  }
  EXPECT_NO_THROW(
      commtool::files::check_writable((dir.path / std::string(255, 'n')).string(), "--trace"));
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(OutputFile, AnExistingFileKeepsItsMode) {
  TempDir dir;
  const fs::path file = dir.path / "private.json";
  std::ofstream(file) << "old\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  commtool::files::write_atomically(file.string(), "new\n", "--output");
  EXPECT_EQ(mode_of(file), 0600u);
  fs::permissions(file, static_cast<fs::perms>(0664));
  commtool::files::write_atomically(file.string(), "newer\n", "--output");
  EXPECT_EQ(mode_of(file), 0664u);
  EXPECT_EQ(read_file(file), "newer\n");
}

TEST(OutputFile, ANewFileGetsTheUmasksMode) {
  TempDir dir;
  {
    Umask m(077);
    commtool::files::write_atomically((dir.path / "a").string(), "a", "--output");
  }
  {
    Umask m(002);
    commtool::files::write_atomically((dir.path / "b").string(), "b", "--output");
  }
  EXPECT_EQ(mode_of(dir.path / "a"), 0600u);
  EXPECT_EQ(mode_of(dir.path / "b"), 0664u);
}

TEST(OutputFile, ModeOfALinksTargetIsKept) {
  TempDir dir;
  const fs::path target = dir.path / "t";
  std::ofstream(target) << "old";
  fs::permissions(target, static_cast<fs::perms>(0640));
  fs::create_symlink(target, dir.path / "l");
  commtool::files::write_atomically((dir.path / "l").string(), "new", "--output");
  EXPECT_EQ(read_file(target), "new");
  EXPECT_EQ(mode_of(target), 0640u);
}

namespace {

bool has_temp_file(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with(".commtool-")) return true;
  }
  return false;
}

struct Interrupted {
  bool caught_mid_write = false;  // the signal came while the temp file existed
  int status = 0;                 // the child's wait status
};

// A child process writes `bytes` to dir/out; `sig` is sent as soon as its temp file appears.
// With `own_handler` the child has the launcher's SignalTrap installed first and exits 0 if
// the trap got the signal and the file came out whole.
Interrupted interrupt_a_write(const fs::path& dir, size_t bytes, bool own_handler,
                              int sig = SIGTERM) {
  const fs::path out = dir / "out";
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_DUMPABLE, 0);  // SIGQUIT: no core file
    std::optional<commtool::workers::SignalTrap> trap;
    if (own_handler) trap.emplace();
    const std::string content(bytes, 'x');
    commtool::files::write_atomically(out.string(), content, "--output");
    _exit(trap && trap->take() == SIGTERM && fs::file_size(out) == bytes ? 0 : 1);
  }
  Interrupted r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline && !fs::exists(out)) {
    if (has_temp_file(dir)) {
      r.caught_mid_write = true;
      ::kill(child, sig);
      break;
    }
  }
  ::waitpid(child, &r.status, 0);
  r.caught_mid_write = r.caught_mid_write && (own_handler || !fs::exists(out));
  return r;
}

}  // namespace

// Ctrl-C or a kill while a report is being written must not leave .commtool-* files behind:
// the process still dies of the signal, and its temp file is gone.
TEST(OutputFile, SigtermWhileWritingRemovesTheTempFileAndStillEndsTheProcess) {
  TempDir dir;
  bool caught = false;
  for (size_t bytes = 16u << 20; !caught && bytes <= (1u << 30); bytes *= 2) {
    const Interrupted r = interrupt_a_write(dir.path, bytes, false);
    EXPECT_FALSE(has_temp_file(dir.path)) << bytes << " bytes";
    if (!r.caught_mid_write) continue;  // the write won the race: try a longer one
    caught = true;
    EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM) << r.status;
    EXPECT_FALSE(fs::exists(dir.path / "out"));
  }
  EXPECT_TRUE(caught) << "no write was slow enough to interrupt";
}

// A closed terminal or ssh session (SIGHUP) and Ctrl-\ (SIGQUIT) end the process as well: no
// temp file may be left by them either.
TEST(OutputFile, SighupOrSigquitWhileWritingRemovesTheTempFileAndStillEndsTheProcess) {
  for (int sig : {SIGHUP, SIGQUIT}) {
    TempDir dir;
    bool caught = false;
    for (size_t bytes = 16u << 20; !caught && bytes <= (1u << 30); bytes *= 2) {
      const Interrupted r = interrupt_a_write(dir.path, bytes, false, sig);
      EXPECT_FALSE(has_temp_file(dir.path)) << strsignal(sig) << ", " << bytes << " bytes";
      if (!r.caught_mid_write) continue;  // the write won the race: try a longer one
      caught = true;
      EXPECT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == sig) << r.status;
      EXPECT_FALSE(fs::exists(dir.path / "out"));
    }
    EXPECT_TRUE(caught) << strsignal(sig) << ": no write was slow enough to interrupt";
  }
}

// A handler installed before (the launcher's SignalTrap, which stops the workers in order)
// still gets the signal, the process goes on, and the write completes whole.
TEST(OutputFile, TheLaunchersSignalTrapStillGetsTheSignalAndTheWriteCompletes) {
  TempDir dir;
  const Interrupted r = interrupt_a_write(dir.path, 16u << 20, true);
  ASSERT_TRUE(r.caught_mid_write);
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << r.status;
  EXPECT_FALSE(has_temp_file(dir.path));
  EXPECT_EQ(dir.entries(), 1u);
}
