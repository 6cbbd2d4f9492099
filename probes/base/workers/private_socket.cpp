#include "probes/base/workers/private_socket.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probes/base/error.hpp"

namespace commtool::workers {

PrivateDir::PrivateDir() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::vector<std::string> bases;
  if (tmpdir && *tmpdir) bases.emplace_back(tmpdir);
  bases.emplace_back("/tmp");
  for (const std::string& base : bases) {
    std::string path = base + "/commtool-XXXXXX";
    // A Unix socket's path must fit in sun_path (108 bytes); a deep $TMPDIR does not.
    if (path.size() + std::strlen(kSocketName) + 1 >= sizeof(sockaddr_un::sun_path)) continue;
    if (::mkdtemp(path.data())) {
      path_ = path;
      return;
    }
  }
  throw Error(ExitCode::kEnvironment,
              fmt::format("cannot create a directory for the worker socket under {}: {}",
                          bases.front(), std::strerror(errno)));
}

PrivateDir::~PrivateDir() {
  ::unlink(socket_path().c_str());
  ::rmdir(path_.c_str());
}

UniqueFd listen_at(const std::string& path, int backlog) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);  // length checked by PrivateDir
  if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd.get(), backlog) != 0) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("cannot listen on {}: {}", path, std::strerror(errno)));
  }
  return fd;
}

}  // namespace commtool::workers
