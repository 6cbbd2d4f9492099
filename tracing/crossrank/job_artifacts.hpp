// What a job commtool did not launch left, among the paths given to `commtool report`: a file is
// taken for what its first bytes look like (a RAS answer, NCCL's log, or a Flight Recorder dump,
// whose reader says if it is not one); a directory gives the regular files in it (not below)
// that look like one of them, sorted, `found` holding the dumps among them (the reader leaves
// out, with a warning, one that is not). Files are opened without blocking and checked to be
// regular once open, so a FIFO put in a file's place cannot hold the report.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace commtool::crossrank {

struct JobArtifacts {
  std::vector<std::filesystem::path> dumps;
  std::vector<std::filesystem::path> ras;
  std::vector<std::filesystem::path> logs;  // NCCL's logs
  std::set<std::filesystem::path> found;

  bool empty() const { return dumps.empty() && ras.empty() && logs.empty(); }
};

// Throws Error(kUsage) naming the path: one that does not exist, a file that is none of them, a
// directory that cannot be read or holds more than a million of them.
JobArtifacts find_job_artifacts(const std::vector<std::string>& paths);

}  // namespace commtool::crossrank
