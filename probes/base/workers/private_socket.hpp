// Where the launcher listens for its workers: a Unix socket in a fresh directory of mode 0700
// (mkdtemp), so only this user can connect, removed with everything in it when the run ends.
#pragma once

#include <string>

#include "probes/base/workers/unique_fd.hpp"

namespace commtool::workers {

class PrivateDir {
 public:
  // Under $TMPDIR, else /tmp (a $TMPDIR too deep for a socket path is passed over). Throws
  // Error(kEnvironment) when neither works.
  PrivateDir();
  ~PrivateDir();
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  const std::string& path() const { return path_; }
  std::string socket_path() const { return path_ + "/" + kSocketName; }

 private:
  static constexpr const char* kSocketName = "socket";
  std::string path_;
};

// A non-blocking listening socket at `path` (a PrivateDir's socket_path). Throws
// Error(kEnvironment) when it cannot listen there.
UniqueFd listen_at(const std::string& path, int backlog);

}  // namespace commtool::workers
