#include "probes/base/output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

#include "probes/base/error.hpp"

namespace fs = std::filesystem;

namespace commtool::files {

bool link_is_protected(mode_t dir_mode, uid_t dir_uid, uid_t link_uid, uid_t follower_uid) {
  const bool sticky_world_writable = (dir_mode & S_ISVTX) != 0 && (dir_mode & S_IWOTH) != 0;
  return sticky_world_writable && link_uid != follower_uid && link_uid != dir_uid;
}

void check_name_length(const std::string& path, const std::string& role) {
  if (path.size() >= PATH_MAX) {
    throw usage_error(fmt::format("{} {}: a path of {} bytes; Linux takes at most {}", role,
                                  excerpt(path), path.size(), PATH_MAX - 1));
  }
  for (const fs::path& part : fs::path(path)) {
    const std::string name = part.string();
    if (name.size() > NAME_MAX) {
      throw usage_error(fmt::format("{} {}: the name {} is {} bytes; a file name takes at most {}",
                                    role, excerpt(path), excerpt(name), name.size(), NAME_MAX));
    }
  }
}

namespace {

std::string directory_of(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? "." : dir.string();
}

Error write_error(const std::string& role, const std::string& path, const std::string& what,
                  int err) {
  return usage_error(role + " " + path + ": " + what + ": " + std::strerror(err));
}

// As many links as Linux follows in one path lookup before ELOOP.
constexpr int kMaxLinks = 40;

// The kernel's fs.protected_symlinks rule, for the links commtool follows itself: a symlink in
// a sticky world-writable directory (/tmp) is followed only by its owner, or when it belongs to
// the directory's owner. Anyone may plant a link in /tmp; followed by root, it would make
// commtool replace whatever file it points to. `link` is the symlink, lstat()ed by the caller.
void refuse_planted_link(const fs::path& link, const struct stat& link_st, const std::string& path,
                         const std::string& role) {
  const fs::path dir = link.has_parent_path() ? link.parent_path() : fs::path(".");
  struct stat dir_st {};
  if (::stat(dir.c_str(), &dir_st) != 0) return;  // the write itself will say why
  if (!link_is_protected(dir_st.st_mode, dir_st.st_uid, link_st.st_uid, ::geteuid())) return;
  throw usage_error(fmt::format(
      "{} {}: refusing to follow the symlink {}: it belongs to uid {}, not to you or to the "
      "owner of {}, a sticky world-writable directory, where anyone may plant a link (the "
      "kernel's fs.protected_symlinks rule); remove the link or give another path",
      role, excerpt(path), excerpt(link.string()), link_st.st_uid, excerpt(dir.string())));
}

// The file `path` names once every symlink at its end is followed, a dangling link's target
// included (as `> link` in a shell creates it): that is the file to replace, and its directory
// the one for the temp file. Links inside the directory part need no resolving: the kernel
// follows those itself, under its own rules.
std::string resolve_links(const std::string& path, const std::string& role) {
  fs::path p = path;
  for (int i = 0; i < kMaxLinks; ++i) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    refuse_planted_link(p, st, path, role);
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw write_error(role, path, "cannot read the link " + p.string(), ec.value());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw write_error(role, path, "cannot follow its links", ELOOP);
}

// ---- the temp file being written, removed if a terminating signal ends the process -------------
//
// A signal handler may neither allocate nor lock, so the pending temp file's name lives in a
// fixed buffer, set while the signals are blocked. The handler composes with whatever handled
// the signal before (the launcher's SignalTrap turns it into a byte on a pipe and stops the
// workers in order): when there is such a handler the process goes on, write_atomically
// finishes or cleans up itself, and the handler only passes the signal on. Only when the signal
// would end the process (the default action) does the handler unlink the temp file, restore
// the default and re-raise, so the process still dies of the signal, as its parent expects.

// Ctrl-C, a kill, a closed terminal or ssh session (SIGHUP) and Ctrl-\ (SIGQUIT): each ends the
// process by default, and each is one a user meets while a report is being written.
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kSignalCount = sizeof kCleanupSignals / sizeof kCleanupSignals[0];
char g_pending_path[PATH_MAX];
volatile sig_atomic_t g_pending_set = 0;
struct sigaction g_previous[kSignalCount];
std::mutex g_pending_mutex;  // one pending temp file at a time

int slot_of(int sig) {
  for (int i = 0; i < kSignalCount; ++i) {
    if (kCleanupSignals[i] == sig) return i;
  }
  return 0;  // only ever installed for kCleanupSignals
}

extern "C" void on_signal_while_writing(int sig, siginfo_t* info, void* context) {
  const struct sigaction& previous = g_previous[slot_of(sig)];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != SIG_DFL &&
      previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  if (g_pending_set) ::unlink(g_pending_path);
  ::sigaction(sig, &previous, nullptr);
  ::raise(sig);  // pending while blocked in this handler; unblocking delivers it now
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

sigset_t cleanup_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kCleanupSignals)
    sigaddset(&set, sig);
  return set;
}

// Creates the temp file in `dir` and registers it for the handler, with the signals blocked
// from just before it exists until the handler knows its name. Mode 0666 less the umask, as
// any new file gets; write_atomically gives it the replaced file's mode where there is one.
class PendingTemp {
 public:
  PendingTemp() : lock_(g_pending_mutex) {
    for (int sig : kCleanupSignals) {
      struct sigaction action {};
      action.sa_sigaction = on_signal_while_writing;
      action.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&action.sa_mask);
      struct sigaction& previous = g_previous[slot_of(sig)];
      ::sigaction(sig, nullptr, &previous);
      installed_[slot_of(sig)] =
          previous.sa_handler != SIG_IGN && ::sigaction(sig, &action, nullptr) == 0;
    }
  }
  ~PendingTemp() {
    if (fd_ >= 0) ::close(fd_);
    remove();
    for (int sig : kCleanupSignals) {
      if (installed_[slot_of(sig)]) ::sigaction(sig, &g_previous[slot_of(sig)], nullptr);
    }
  }
  PendingTemp(const PendingTemp&) = delete;
  PendingTemp& operator=(const PendingTemp&) = delete;

  // Returns 0 or the errno of the failure.
  int create(const std::string& dir) {
    std::random_device random;
    const sigset_t set = cleanup_signal_set();
    for (int attempt = 0; attempt < 100; ++attempt) {
      const std::string name = dir + "/.commtool-" + std::to_string(::getpid()) + "-" +
                               std::to_string(random() % 1000000000u);
      if (name.size() >= sizeof g_pending_path) return ENAMETOOLONG;
      sigset_t old;
      ::pthread_sigmask(SIG_BLOCK, &set, &old);
      fd_ = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      const int err = errno;
      if (fd_ >= 0) {
        std::memcpy(g_pending_path, name.c_str(), name.size() + 1);
        g_pending_set = 1;
      }
      ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
      if (fd_ >= 0) return 0;
      if (err != EEXIST) return err;
    }
    return EEXIST;
  }
  int fd() const { return fd_; }
  const char* path() const { return g_pending_path; }
  // Closes the file; returns 0 or the errno of the failure.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }
  // After the rename: nothing left to remove.
  void release() { g_pending_set = 0; }

 private:
  void remove() {
    if (g_pending_set) ::unlink(g_pending_path);
    g_pending_set = 0;
  }
  std::lock_guard<std::mutex> lock_;
  bool installed_[kSignalCount] = {};
  int fd_ = -1;
};

}  // namespace

void refuse_planted_links(const std::string& path, const std::string& role) {
  std::string name = path;
  while (name.size() > 1 && name.back() == '/')
    name.pop_back();  // dir/ names dir itself
  resolve_links(name, role);
}

namespace {

// What `path` opens, links followed as open() follows them, is no file to replace: /dev/null,
// a FIFO, a terminal, /dev/stdout onto a pipe (its /proc/self/fd link reads "pipe:[N]", which
// is no path to resolve). Such a name is written through.
bool written_through(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

// Whether a new file can be created in dir, tried rather than inferred from permission bits:
// root passes those everywhere, even in /proc. 0 or the errno of the failure. The terminating
// signals wait while the probe file exists, so none can end the process with it left behind.
int try_create_in(const std::string& dir) {
  std::random_device random;
  const sigset_t set = cleanup_signal_set();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string name = dir + "/.commtool-probe-" + std::to_string(::getpid()) + "-" +
                             std::to_string(random() % 1000000000u);
    sigset_t old;
    ::pthread_sigmask(SIG_BLOCK, &set, &old);
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const int err = errno;
    if (fd >= 0) {
      ::close(fd);
      ::unlink(name.c_str());
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (fd >= 0) return 0;
    if (err != EEXIST) return err;
  }
  return EEXIST;
}

}  // namespace

void check_writable(const std::string& path, const std::string& role) {
  if (path.empty()) throw usage_error(role + ": empty file name; give a path such as out.json");
  check_name_length(path, role);
  // First, so that a planted link is refused whatever it points to, a device included.
  const std::string target = resolve_links(path, role);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw usage_error(role + " " + path + ": is a directory; give a file path");
  }
  if (written_through(path)) {
    if (::access(path.c_str(), W_OK) != 0)
      throw write_error(role, path, "cannot write to it", errno);
    return;
  }
  std::string dir = directory_of(target);
  if (!fs::is_directory(dir, ec)) {
    throw usage_error(role + " " + path + ": directory " + dir + " does not exist");
  }
  if (int err = try_create_in(dir); err != 0) {
    throw write_error(role, path, "cannot write in " + dir, err);
  }
}

void check_distinct(const std::vector<std::pair<std::string, std::string>>& outputs,
                    const std::vector<std::pair<std::string, std::string>>& inputs) {
  struct Seen {
    const std::string* role;
    const std::string* path;
    fs::path name;  // absolute, links followed, . and .. gone
    struct stat st {};
    bool exists = false;

    bool same_file(const Seen& other) const {
      return name == other.name || (exists && other.exists && st.st_dev == other.st.st_dev &&
                                    st.st_ino == other.st.st_ino);
    }
    // Whether `other` lies under this one, a directory.
    bool holds(const Seen& other) const {
      if (!exists || !S_ISDIR(st.st_mode)) return false;
      const std::string dir = name.string() + (name.string().ends_with('/') ? "" : "/");
      return other.name.string().starts_with(dir);
    }
  };
  auto seen_as = [](const std::string& role, const std::string& path, const fs::path& file) {
    Seen s{&role, &path, {}, {}, false};
    std::error_code ec;
    s.name = fs::weakly_canonical(fs::absolute(file, ec), ec);
    s.exists = ::stat(s.name.c_str(), &s.st) == 0;
    return s;
  };
  std::vector<Seen> read;
  for (const auto& [role, path] : inputs) {
    if (!path.empty()) read.push_back(seen_as(role, path, path));
  }
  std::vector<Seen> seen;
  for (const auto& [role, path] : outputs) {
    if (path.empty() || written_through(path)) continue;
    Seen s = seen_as(role, path, resolve_links(path, role));
    for (const Seen& other : seen) {
      if (s.same_file(other)) {
        throw usage_error(fmt::format(
            "{} {} and {} {} name the same file; one would replace the other: give each its own",
            *other.role, excerpt(*other.path), role, excerpt(path)));
      }
    }
    for (const Seen& in : read) {
      if (s.same_file(in) || in.holds(s)) {
        throw usage_error(fmt::format("{} {}: {} {}, which this command reads; write it elsewhere",
                                      role, excerpt(path), s.same_file(in) ? "is" : "is inside",
                                      *in.role + " " + excerpt(*in.path)));
      }
    }
    seen.push_back(std::move(s));
  }
}

namespace {

// Writes all of content to fd; returns 0 or the errno of the failure.
int write_all(int fd, const std::string& content) {
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    data += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

// /dev/stdout, a FIFO, a terminal: not files to replace. Write through them as they are.
void write_through(const std::string& path, const std::string& content, const std::string& role) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw write_error(role, path, "cannot open", errno);
  int err = write_all(fd, content);
  ::close(fd);
  if (err != 0) throw write_error(role, path, "write failed", err);
}

// The replaced file's owner (where the caller may set it) and mode onto the new one; 0 or the
// errno of the failure. A file that did not exist keeps the mode it was created with.
int keep_owner_and_mode(int fd, const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) return 0;
  struct stat mine {};
  if (::fstat(fd, &mine) == 0 && (mine.st_uid != st.st_uid || mine.st_gid != st.st_gid)) {
    const int ignored = ::fchown(fd, st.st_uid, st.st_gid);  // only root may; others keep theirs
    (void)ignored;
  }
  return ::fchmod(fd, st.st_mode & 07777) == 0 ? 0 : errno;
}

}  // namespace

void write_atomically(const std::string& path, const std::string& content,
                      const std::string& role) {
  check_writable(path, role);
  if (written_through(path)) {
    write_through(path, content, role);
    return;
  }
  const std::string target = resolve_links(path, role);
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_regular_file(target, ec)) {
    write_through(target, content, role);  // renaming over /dev/null would replace the device
    return;
  }
  PendingTemp temp;
  if (int err = temp.create(directory_of(target)); err != 0) {
    throw write_error(role, path, "cannot create a temporary file", err);
  }
  if (int err = keep_owner_and_mode(temp.fd(), target); err != 0) {
    throw write_error(role, path, "cannot set the mode of " + target, err);
  }
  if (int err = write_all(temp.fd(), content); err != 0) {
    throw write_error(role, path, "write failed", err);
  }
  // A report is small; fsync makes "renamed" mean "on disk" even after a crash.
  if (::fsync(temp.fd()) != 0) throw write_error(role, path, "cannot flush", errno);
  if (int err = temp.close(); err != 0) throw write_error(role, path, "cannot flush", err);
  if (::rename(temp.path(), target.c_str()) != 0) {
    throw write_error(role, path, "cannot rename into place", errno);
  }
  temp.release();
}

}  // namespace commtool::files
