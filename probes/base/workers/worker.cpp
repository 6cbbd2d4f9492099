#include "probes/base/workers/worker.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>

#include "probes/base/error.hpp"
#include "probes/base/workers/socket_communicator.hpp"
#include "probes/base/workers/unique_fd.hpp"
#include "probes/base/workers/wire.hpp"

namespace commtool::workers {

namespace {

struct WorkerArgs {
  std::string socket;
  int rank = -1;
  int size = 0;
  int device = -1;
  double timeout_s = 0;
  std::string progress;  // the launcher's progress board; empty: none
};

std::map<std::string, TaskHandler>& registry() {
  static std::map<std::string, TaskHandler> handlers;
  return handlers;
}

int parse_int(const std::string& option, const std::string& value) {
  try {
    std::size_t used = 0;
    int parsed = std::stoi(value, &used);
    if (used == value.size()) return parsed;
  } catch (const std::exception&) {
  }
  throw usage_error(fmt::format("{} {}: expected an integer", option, value));
}

WorkerArgs parse_args(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != kWorkerCommand) {
    throw usage_error(fmt::format("expected '{}' as the first argument", kWorkerCommand));
  }
  WorkerArgs args;
  for (int i = 2; i < argc; i += 2) {
    std::string option = argv[i];
    if (i + 1 >= argc) throw usage_error(fmt::format("{} needs a value", option));
    std::string value = argv[i + 1];
    if (option == "--socket") {
      args.socket = value;
    } else if (option == "--rank") {
      args.rank = parse_int(option, value);
    } else if (option == "--size") {
      args.size = parse_int(option, value);
    } else if (option == "--device") {
      args.device = parse_int(option, value);
    } else if (option == "--progress") {
      args.progress = value;
    } else if (option == "--timeout") {
      char* end = nullptr;
      args.timeout_s = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(args.timeout_s > 0)) {
        throw usage_error(fmt::format("--timeout {}: expected seconds > 0", value));
      }
    } else {
      throw usage_error(fmt::format("unknown worker option {}", option));
    }
  }
  if (args.socket.empty()) throw usage_error("--socket is required");
  if (args.size < 1 || args.rank < 0 || args.rank >= args.size) {
    throw usage_error(
        fmt::format("--rank {} --size {}: need 0 <= rank < size", args.rank, args.size));
  }
  if (args.device < 0) throw usage_error("--device is required");
  if (args.timeout_s <= 0) throw usage_error("--timeout is required");
  return args;
}

UniqueFd connect_to_launcher(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    throw usage_error(fmt::format("socket path {} is too long", path));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw Error(ExitCode::kEnvironment, fmt::format("socket: {}", std::strerror(errno)));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    // Most likely the launcher is gone (killed before we started): nobody to work for.
    throw Error(ExitCode::kTimeout,
                fmt::format("cannot reach the launcher at {}: {}", path, std::strerror(errno)));
  }
  return fd;
}

// The launcher referees every collective with the user's --timeout and, having seen every rank,
// names the one that stuck. The worker's own bound only has to catch a launcher that stopped
// answering, so it is set well beyond the launcher's: a worker never pre-empts the launcher's
// more useful report. (The launcher's clock restarts whenever any rank makes progress, so a
// collective may legitimately wait up to about size × timeout.)
std::chrono::duration<double> backstop(const WorkerArgs& args) {
  return std::chrono::duration<double>(args.timeout_s * (args.size + 1) + 5.0);
}

wire::Deadline deadline_after(std::chrono::duration<double> wait) {
  return wire::Clock::now() + std::chrono::duration_cast<wire::Clock::duration>(wait);
}

// Sends the failure to the launcher, which prints it; says it here only if nobody else will.
int report_failure(SocketCommunicator& comm, ExitCode code, const std::string& message) {
  try {
    comm.send_error(code, message);
  } catch (const Error&) {
    std::cerr << "commtool worker: " << printable_message(message) << "\n";
  }
  return static_cast<int>(code);
}

int run_task(SocketCommunicator& comm, const WorkerArgs& args, const nlohmann::json& task) {
  nlohmann::json result;
  try {
    std::string name = task.value("name", "");
    auto found = registry().find(name);
    if (found == registry().end()) {
      throw usage_error(fmt::format("rank {}: unknown worker task '{}'", args.rank, name));
    }
    Progress progress(args.progress, args.rank, args.size);
    WorkerContext context{
        args.rank, args.size, args.device, comm, std::chrono::duration<double>(args.timeout_s),
        progress};
    result = found->second(context, task);
  } catch (const BadValue& e) {
    try {
      comm.send_error(e);
    } catch (const Error&) {
      std::cerr << "commtool worker: " << printable_message(e.what()) << "\n";
    }
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    return report_failure(comm, e.code(), e.what());
  } catch (const std::exception& e) {
    return report_failure(comm, kInternalErrorCode,
                          fmt::format("rank {}: internal error: {}", args.rank, e.what()));
  }
  comm.send_result(result);
  comm.wait_for_shutdown();
  return 0;
}

}  // namespace

void register_task(const std::string& name, TaskHandler handler) {
  registry()[name] = std::move(handler);
}

int worker_main(int argc, char** argv) {
  // The launcher set this before exec too; repeating it covers a worker started by other means.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  WorkerArgs args;
  try {
    args = parse_args(argc, argv);
    UniqueFd fd = connect_to_launcher(args.socket);
    nlohmann::json hello = {{"pid", static_cast<long>(::getpid())}};
    wire::write_message(fd.get(),
                        wire::Message{wire::MessageType::kHello, args.rank, 0, hello.dump()},
                        deadline_after(backstop(args)));
    wire::Message task = wire::read_message(fd.get(), deadline_after(backstop(args)));
    if (task.type != wire::MessageType::kTask) {
      throw Error(ExitCode::kTimeout, fmt::format("expected TASK from the launcher, got {}",
                                                  wire::type_name(task.type)));
    }
    SocketCommunicator comm(fd.get(), args.rank, args.size, backstop(args));
    return run_task(comm, args, nlohmann::json::parse(task.payload));
  } catch (const Error& e) {
    std::cerr << "commtool worker (rank " << args.rank << "): " << printable_message(e.what())
              << "\n";
    return static_cast<int>(e.code());
  } catch (const wire::WireError& e) {
    std::cerr << "commtool worker (rank " << args.rank
              << "): lost the launcher: " << printable_message(e.what()) << "\n";
    return static_cast<int>(ExitCode::kTimeout);
  } catch (const std::exception& e) {
    std::cerr << "commtool worker (rank " << args.rank
              << "): internal error: " << printable_message(e.what()) << "\n";
    return static_cast<int>(kInternalErrorCode);
  }
}

}  // namespace commtool::workers
