#include "probes/base/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "probes/base/error.hpp"

namespace fs = std::filesystem;

namespace commtool::files {

namespace {

std::string directory_of(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? "." : dir.string();
}

Error write_error(const std::string& role, const std::string& path, const std::string& what,
                  int err) {
  return usage_error(role + " " + path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

void check_writable(const std::string& path, const std::string& role) {
  if (path.empty()) throw usage_error(role + ": empty file name; give a path such as out.json");
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw usage_error(role + " " + path + ": is a directory; give a file path");
  }
  std::string dir = directory_of(path);
  if (!fs::is_directory(dir, ec)) {
    throw usage_error(role + " " + path + ": directory " + dir + " does not exist");
  }
  if (access(dir.c_str(), W_OK) != 0)
    throw write_error(role, path, "cannot write in " + dir, errno);
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

}  // namespace

void write_atomically(const std::string& path, const std::string& content,
                      const std::string& role) {
  check_writable(path, role);
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    write_through(path, content, role);  // renaming over /dev/null would replace the device
    return;
  }
  std::string pattern = (fs::path(directory_of(path)) / ".commtool-XXXXXX").string();
  std::vector<char> temp(pattern.begin(), pattern.end());
  temp.push_back('\0');
  int fd = mkstemp(temp.data());
  if (fd < 0) throw write_error(role, path, "cannot create a temporary file", errno);
  if (int err = write_all(fd, content); err != 0) {
    ::close(fd);
    ::unlink(temp.data());
    throw write_error(role, path, "write failed", err);
  }
  // A report is small; fsync makes "renamed" mean "on disk" even after a crash.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.data());
    throw write_error(role, path, "cannot flush", err);
  }
  if (::chmod(temp.data(), 0644) != 0 || ::rename(temp.data(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.data());
    throw write_error(role, path, "cannot rename into place", err);
  }
}

}  // namespace commtool::files
