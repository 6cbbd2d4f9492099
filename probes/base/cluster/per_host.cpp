#include "probes/base/cluster/per_host.hpp"

#include <map>
#include <memory>
#include <set>

#include "probes/base/watchdog.hpp"

namespace commtool::cluster {

namespace {

// A host name of up to 255 bytes (POSIX HOST_NAME_MAX) and room to spare.
constexpr uint64_t kMaxHostBytes = 4096;

// The working ranks as rank 0 tells them: one character per rank, 'W' where it works.
std::string worker_marks(const std::vector<int>& workers, size_t ranks) {
  std::string marks(ranks, '-');
  for (int rank : workers)
    marks.at(static_cast<size_t>(rank)) = 'W';
  return marks;
}

}  // namespace

std::vector<int> lowest_rank_per_host(const std::vector<std::string>& hosts) {
  std::set<std::string> seen;
  std::vector<int> out;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (seen.insert(hosts[r]).second) out.push_back(static_cast<int>(r));
  }
  return out;
}

PerHostResult run_once_per_host(MpiSession& session, const PerHostSpec& spec,
                                const std::function<std::string()>& work) {
  const std::string who = std::string(spec.command) + " (rank " + std::to_string(session.rank()) +
                          " on " + session.hostname() + ")";
  PerHostResult result;
  {
    Watchdog watchdog(who, std::chrono::duration<double>(spec.timeout_s));
    watchdog.stage("hosts", false, spec.start_advice);
    result.hosts = session.gather_to_root(session.hostname(), kMaxHostBytes);
    std::string marks;
    if (session.is_root()) {
      result.workers = lowest_rank_per_host(result.hosts);
      marks = worker_marks(result.workers, result.hosts.size());
    }
    marks = session.broadcast_from_root(marks);
    const auto me = static_cast<size_t>(session.rank());
    result.worked = marks.size() > me && marks[me] == 'W';
  }
  if (spec.on_role) spec.on_role(result.worked);

  std::string payload;
  if (result.worked) payload = work();
  {
    Watchdog watchdog(who, std::chrono::duration<double>(spec.work_limit_s));
    watchdog.stage("wait", false, spec.work_advice);
    session.barrier_sleeping(std::chrono::milliseconds(2));
    watchdog.stage("gather", false, spec.work_advice);
    result.payloads = session.gather_to_root(payload, spec.max_payload_bytes);
  }
  return result;
}

std::vector<int> ranks_on_worker_hosts(const PerHostResult& r) {
  std::map<std::string, int> ranks_on;
  for (const std::string& h : r.hosts)
    ++ranks_on[h];
  std::vector<int> out;
  for (int w : r.workers)
    out.push_back(ranks_on[r.hosts[static_cast<size_t>(w)]]);
  return out;
}

}  // namespace commtool::cluster
