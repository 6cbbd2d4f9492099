#include "probes/base/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "probes/base/error.hpp"
#include "probes/base/workers/unique_fd.hpp"

namespace commtool::files {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a pipe (FIFO)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// `path` opened for reading and checked on the open descriptor, so that what is read is what
// was checked: a regular file of at most `max_bytes`. Its size is stored in `size`.
workers::UniqueFd open_checked(const std::string& path, uint64_t max_bytes, uint64_t& size) {
  // Opened without blocking so that a FIFO with no writer cannot hang the open.
  workers::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) throw usage_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw usage_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw usage_error(fmt::format("{}: is {}; give a regular file", path, kind_of(st.st_mode)));
  }
  size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw usage_error(
        fmt::format("{}: {} bytes, more than the {} bytes commtool reads", path, size, max_bytes));
  }
  return fd;
}

// Reads up to `length` bytes at `offset` into `out` (appended); fewer when the file is shorter.
size_t read_at(int fd, const std::string& path, uint64_t offset, size_t length, std::string& out) {
  const size_t base = out.size();
  out.resize(base + length);
  size_t done = 0;
  while (done < length) {
    const ssize_t n =
        ::pread(fd, out.data() + base + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.resize(base);
      throw usage_error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    }
    if (n == 0) break;  // the file shrank while being read: what is there is what it holds
    done += static_cast<size_t>(n);
  }
  out.resize(base + done);
  return done;
}

}  // namespace

std::string read_input_file(const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  const workers::UniqueFd fd = open_checked(path, max_bytes, size);
  std::string text;
  read_at(fd.get(), path, 0, size, text);
  return text;
}

size_t AppendedFile::read_more(std::string& out, size_t max_chunk) {
  uint64_t size = 0;
  const workers::UniqueFd fd = open_checked(path_, max_bytes_, size);
  if (size < offset_) {
    throw usage_error(fmt::format(
        "{}: {} bytes, fewer than the {} already read: the file was truncated or replaced", path_,
        size, offset_));
  }
  const size_t n = read_at(fd.get(), path_, offset_,
                           static_cast<size_t>(std::min<uint64_t>(size - offset_, max_chunk)), out);
  offset_ += n;
  return n;
}

bool input_exists(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  const int err = errno;
  if (err == ENOENT || err == ENOTDIR) return false;
  throw usage_error(fmt::format("{}: cannot be read: {}", excerpt(path), std::strerror(err)));
}

namespace {

// The deepest nesting of arrays and objects in `text`, read as JSON reads it: brackets inside
// strings do not count. One pass, no allocation; malformed text is left to the parser.
int json_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

nlohmann::json parse_json_bounded(const std::string& text, const std::string& source) {
  // Measured before parsing, not with nlohmann's parser callback: that parser scans the whole
  // enclosing array each time an object in it ends, which made an array of n objects (a saved
  // run's samples) cost n^2 (12 s for 60,000 operations' samples).
  if (json_depth(text) > kMaxJsonDepth) {
    throw usage_error(
        fmt::format("{}: JSON nested deeper than {} levels; commtool's formats need far fewer",
                    source, kMaxJsonDepth));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range& e) {  // 1e999: no double holds it
    throw usage_error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
}

const nlohmann::json& json_member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) throw usage_error(fmt::format("expected an object, got {}", j.type_name()));
  auto it = j.find(key);
  if (it == j.end()) throw usage_error(fmt::format("\"{}\": missing", key));
  return *it;
}

const nlohmann::json* find_member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

}  // namespace commtool::files
