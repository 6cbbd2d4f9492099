#include "tracing/crossrank/job_artifacts.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "tracing/crossrank/flight_recorder.hpp"
#include "tracing/crossrank/nccl_log.hpp"
#include "tracing/crossrank/ras.hpp"

namespace commtool::crossrank {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxArtifactFiles = 1'000'000;

// The first bytes of a regular file; empty for anything else. Opened without blocking and
// checked once open, so that a FIFO put in the file's place cannot hold the report.
std::string head_of(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "";
  std::string head;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    head.resize(8192);
    const ssize_t n = ::read(fd, head.data(), head.size());
    head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return head;
}

// The list of `a` a file with these first bytes belongs in; none for what is none of them.
std::vector<fs::path>* list_for(JobArtifacts& a, const std::string& head) {
  if (looks_like_ras(head)) return &a.ras;
  if (looks_like_flight_recorder(head)) return &a.dumps;
  if (looks_like_nccl_log(head)) return &a.logs;
  return nullptr;
}

}  // namespace

JobArtifacts find_job_artifacts(const std::vector<std::string>& paths) {
  JobArtifacts out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!files::input_exists(p)) {
      throw usage_error(fmt::format("report {}: no such file or directory", p));
    }
    if (!fs::is_directory(p, ec)) {
      // Not a regular file (a FIFO, a device): refused by the reader, naming what it is.
      if (!fs::is_regular_file(p, ec)) files::read_input_file(p);
      std::vector<fs::path>* list = list_for(out, head_of(p));
      if (list == nullptr) {
        throw usage_error(fmt::format(
            "report {}: neither a saved run, a recording, a Flight Recorder dump (a pickle, or "
            "JSON with pg_config and entries), an answer of NCCL's RAS nor NCCL's log",
            p));
      }
      list->emplace_back(p);
      continue;
    }
    JobArtifacts here;  // this directory's, sorted before they join the others
    size_t files_found = 0;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
      if (std::vector<fs::path>* list = list_for(here, head_of(it->path()))) {
        list->push_back(it->path());
        if (++files_found > kMaxArtifactFiles) {
          throw usage_error(
              fmt::format("report {}: more than {} files to read", p, kMaxArtifactFiles));
        }
      }
    }
    if (ec) throw usage_error(fmt::format("report {}: {}", p, ec.message()));
    for (auto [from, to] :
         {std::pair{&here.dumps, &out.dumps}, {&here.ras, &out.ras}, {&here.logs, &out.logs}}) {
      std::sort(from->begin(), from->end());
      to->insert(to->end(), from->begin(), from->end());
    }
    out.found.insert(here.dumps.begin(), here.dumps.end());
  }
  return out;
}

}  // namespace commtool::crossrank
