#include "probes/base/cluster/mpi_session.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "probes/base/cluster/mpi_abi.hpp"
#include "probes/base/error.hpp"
#include "probes/base/watchdog.hpp"

namespace commtool::cluster {

namespace fs = std::filesystem;

namespace {

constexpr size_t kErrorSize = 512;

// Where the plugin may be: named by the user, else beside this commtool as the build tree lays
// it out (build/cli/commtool, build/probes/) or as `cmake --install` does (bin/, lib/commtool/).
std::vector<std::string> plugin_candidates() {
  if (const char* chosen = std::getenv("COMMTOOL_MPI_PLUGIN"); chosen != nullptr && *chosen) {
    return {chosen};
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {kCommtoolMpiPluginName};
  const fs::path above = exe.parent_path().parent_path();
  return {(above / "probes" / kCommtoolMpiPluginName).string(),
          (above / "lib" / "commtool" / kCommtoolMpiPluginName).string()};
}

}  // namespace

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

bool MpiSession::built_with_mpi() {
#ifdef COMMTOOL_HAVE_MPI
  return true;
#else
  return false;
#endif
}

MpiSession MpiSession::start() {
  if (!built_with_mpi()) {
    throw Error(ExitCode::kUsage,
                "this commtool was built without MPI (CMake found no MPI library); build it "
                "where Open MPI is installed (scripts/setup.sh installs libopenmpi-dev), or with "
                "-DCOMMTOOL_MPI=ON to make a missing MPI an error");
  }
  MpiSession session;
  // RTLD_GLOBAL: Open MPI loads its own components with dlopen, and they expect libmpi's
  // symbols to be visible to them. RTLD_NODELETE: MPI's progress threads may outlive a dlclose.
  const std::vector<std::string> candidates = plugin_candidates();
  session.plugin_ = DynamicLibrary(candidates, RTLD_GLOBAL | RTLD_NODELETE);
  if (!session.plugin_) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("cannot load commtool's MPI plugin (tried {}): {}; set "
                            "COMMTOOL_MPI_PLUGIN to its path, or install Open MPI's library",
                            fmt::join(candidates, ", "), session.plugin_.error()));
  }
  auto entry = session.plugin_.symbol<CommtoolMpiApiEntry>(kCommtoolMpiEntrySymbol);
  session.api_ = entry != nullptr ? entry() : nullptr;
  if (session.api_ == nullptr || session.api_->abi_version != kCommtoolMpiAbiVersion) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("{} is not the MPI plugin of this commtool (interface version {}, "
                            "expected {}); use the one built with it",
                            session.plugin_.name(),
                            session.api_ != nullptr ? session.api_->abi_version : -1,
                            kCommtoolMpiAbiVersion));
  }
  char error[kErrorSize] = {};
  session.check(session.api_->init(&session.rank_, &session.size_, error, sizeof error), error);
  session.hostname_ = this_hostname();
  return session;
}

MpiSession MpiSession::start_within(const std::string& command, double timeout_s,
                                    const char* advice) {
  Watchdog waiting(command, std::chrono::duration<double>(timeout_s));
  waiting.stage("mpi-init", false, advice);
  return start();
}

MpiSession::MpiSession(MpiSession&& other) noexcept {
  *this = std::move(other);
}

MpiSession& MpiSession::operator=(MpiSession&& other) noexcept {
  std::swap(plugin_, other.plugin_);
  std::swap(api_, other.api_);
  std::swap(rank_, other.rank_);
  std::swap(size_, other.size_);
  std::swap(hostname_, other.hostname_);
  return *this;
}

MpiSession::~MpiSession() {
  if (api_ == nullptr) return;
  char error[kErrorSize] = {};
  api_->finalize(error, sizeof error);
}

void MpiSession::check(int rc, const char* error_text) const {
  if (rc != 0) throw Error(ExitCode::kEnvironment, error_text);
}

std::string MpiSession::library_version() const {
  char text[256] = {};
  return api_ != nullptr && api_->library_version(text, sizeof text) == 0 ? text : "";
}

std::vector<std::string> MpiSession::gather_to_root(std::string_view mine,
                                                    uint64_t max_bytes_per_rank) {
  char error[kErrorSize] = {};
  std::vector<uint64_t> sizes(is_root() ? static_cast<size_t>(size_) : 0);
  check(api_->gather_u64(mine.size(), sizes.data(), error, sizeof error), error);

  // Rank 0 decides whether it can take them all and tells every rank, so that nobody enters
  // the second gather alone.
  std::string refusal;
  if (is_root()) {
    uint64_t total = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      if (sizes[r] > max_bytes_per_rank) {
        refusal = fmt::format("rank {} has {} bytes to send; a rank may send at most {}", r,
                              sizes[r], max_bytes_per_rank);
        break;
      }
      total += sizes[r];
    }
    if (refusal.empty() && total > static_cast<uint64_t>(INT_MAX)) {
      refusal = fmt::format("the {} ranks have {} bytes to send in all; rank 0 takes at most {}",
                            size_, total, INT_MAX);
    }
  }
  if (broadcast_from_root(refusal.empty() ? 0 : 1) != 0) {
    if (is_root()) throw Error(ExitCode::kUsage, refusal);
    return {};
  }

  std::vector<int> counts, offsets;
  std::string all;
  if (is_root()) {
    int offset = 0;
    for (uint64_t s : sizes) {
      counts.push_back(static_cast<int>(s));
      offsets.push_back(offset);
      offset += static_cast<int>(s);
    }
    all.resize(static_cast<size_t>(offset));
  }
  check(api_->gather_bytes(mine.data(), static_cast<int>(mine.size()), all.data(), counts.data(),
                           offsets.data(), error, sizeof error),
        error);
  std::vector<std::string> out;
  for (size_t r = 0; r < counts.size(); ++r) {
    out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(counts[r])));
  }
  return out;
}

int32_t MpiSession::broadcast_from_root(int32_t value) {
  char error[kErrorSize] = {};
  check(api_->broadcast_bytes(&value, sizeof value, error, sizeof error), error);
  return value;
}

std::string MpiSession::broadcast_from_root(std::string_view at_root) {
  char error[kErrorSize] = {};
  uint64_t size = is_root() ? at_root.size() : 0;
  if (is_root() && size > static_cast<uint64_t>(INT_MAX)) {
    // Every rank must still take part in the size's broadcast: they get 0 bytes.
    size = 0;
    check(api_->broadcast_bytes(&size, sizeof size, error, sizeof error), error);
    throw Error(ExitCode::kUsage, fmt::format("rank 0 has {} bytes to broadcast; at most {}",
                                              at_root.size(), INT_MAX));
  }
  check(api_->broadcast_bytes(&size, sizeof size, error, sizeof error), error);
  std::string data = is_root() ? std::string(at_root) : std::string(size, '\0');
  if (size > 0) {
    check(api_->broadcast_bytes(data.data(), static_cast<int>(size), error, sizeof error), error);
  }
  return data;
}

void MpiSession::barrier_sleeping(std::chrono::microseconds pause) {
  char error[kErrorSize] = {};
  check(api_->barrier_sleeping(static_cast<int>(pause.count()), error, sizeof error), error);
}

void MpiSession::finalize() {
  if (api_ == nullptr) return;
  const CommtoolMpiApi* api = std::exchange(api_, nullptr);
  char error[kErrorSize] = {};
  check(api->finalize(error, sizeof error), error);
}

}  // namespace commtool::cluster
