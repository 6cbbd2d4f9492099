#include "probes/base/input_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

}  // namespace

std::string read_input_file(const std::string& path, uint64_t max_bytes) {
  // Opened without blocking so that a FIFO with no writer cannot hang the open; checked on the
  // open descriptor so that what is read is what was checked.
  workers::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) throw usage_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw usage_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw usage_error(fmt::format("{}: is {}; give a regular file", path, kind_of(st.st_mode)));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw usage_error(
        fmt::format("{}: {} bytes, more than the {} bytes commtool reads", path, size, max_bytes));
  }
  std::string text(size, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw usage_error(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    if (n == 0) break;  // the file shrank while being read: what is there is what it holds
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

nlohmann::json parse_json_bounded(const std::string& text, const std::string& source) {
  const auto depth_check = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) {
      throw usage_error(
          fmt::format("{}: JSON nested deeper than {} levels; commtool's formats "
                      "need far fewer",
                      source, kMaxJsonDepth));
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, depth_check);
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond a double: 1e400
    throw usage_error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
}

}  // namespace commtool::files
