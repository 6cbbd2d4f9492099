#include "cli/probe_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "cli/option_names.hpp"
#include "probes/bandwidth/probe_cluster.hpp"
#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/error.hpp"
#include "probes/base/watchdog.hpp"
#include "reports/probe/probe_report.hpp"

namespace commtool::cli {

namespace {

constexpr const char* kStartAdvice =
    "waiting for every MPI rank to start `commtool probe` and name its host: a rank did not "
    "start, or is stuck before it; mpirun or srun names the ranks that exited";
constexpr const char* kMeasureAdvice =
    "waiting for every node's probe to end: a node's measuring rank is stuck outside its GPU "
    "waits (each of those is bounded by --timeout); mpirun or srun names the ranks that exited";

// A host name of up to 255 bytes (POSIX HOST_NAME_MAX) and room to spare.
constexpr uint64_t kMaxHostBytes = 4096;

// The ranks that measure, as rank 0 tells them: one character per rank, 'M' where it measures.
std::string measuring_marks(const std::vector<int>& measurers, size_t ranks) {
  std::string marks(ranks, '-');
  for (int rank : measurers)
    marks.at(static_cast<size_t>(rank)) = 'M';
  return marks;
}

probe::NodeProbe measure_node(const probe::ProbeRequest& request, const std::string& host,
                              int rank) {
  probe::NodeProbe node;
  try {
    node = probe::node_probe(host, rank, probe::run_probes(request));
  } catch (const BadValue& e) {
    node.ok = false;
    node.exit_code = static_cast<int>(e.code());
    node.error = user_message(e);
  } catch (const Error& e) {
    node.ok = false;
    node.exit_code = static_cast<int>(e.code());
    node.error = e.what();
  }
  node.host = host;
  node.rank = rank;
  return node;
}

// Rank 0: the measuring ranks' nodes, each with its count of ranks on the host.
std::vector<probe::NodeProbe> read_nodes(const std::vector<std::string>& payloads,
                                         const std::vector<std::string>& hosts,
                                         const std::vector<int>& measurers) {
  std::map<std::string, int> ranks_on;
  for (const std::string& h : hosts)
    ++ranks_on[h];
  std::vector<probe::NodeProbe> nodes;
  for (int r : measurers) {
    nodes.push_back(probe::decode_node_probe(payloads[static_cast<size_t>(r)], r));
    nodes.back().node_ranks = ranks_on[hosts[static_cast<size_t>(r)]];
  }
  return nodes;
}

// The exit code the report ends with, and its one line on standard error.
int verdict_code(const probe::ProbeClusterView& view) {
  std::vector<const probe::NodeProbe*> failed;
  for (const probe::NodeProbe& n : view.nodes) {
    if (!n.ok) failed.push_back(&n);
  }
  if (!failed.empty()) {
    const probe::NodeProbe& first = *failed.front();
    std::cerr << printable_message(
        fmt::format("commtool: rank {} on {}: {}", first.rank, first.host, first.error));
    if (failed.size() > 1) std::cerr << fmt::format(" (and {} more node(s))", failed.size() - 1);
    std::cerr << "\n";
    return first.exit_code;
  }
  // A probe the user named that ran on no node at all: as on one machine, exit 3.
  std::map<std::string, std::string> asked;
  for (const probe::NodeProbe& n : view.nodes) {
    for (const probe::Skipped& s : n.skipped) {
      if (s.asked) asked.emplace(s.probe, s.reason);
    }
  }
  for (const auto& [name, reason] : asked) {
    const bool ran_somewhere =
        std::any_of(view.figures.begin(), view.figures.end(),
                    [&](const probe::FigureAcross& f) { return f.first.probe == name; });
    if (ran_somewhere) continue;
    std::cerr << fmt::format("commtool: --{} was asked for but ran on no node: {}\n", name, reason);
    return static_cast<int>(ExitCode::kEnvironment);
  }
  return 0;
}

}  // namespace

int run_probe_cluster(const GlobalOptions& global, const probe::ProbeRequest& request,
                      ProbeFormat format) {
  const std::chrono::duration<double> limit(global.timeout_s);
  auto waiting = std::make_unique<Watchdog>("probe", limit);
  waiting->stage("mpi-init", false, kStartAdvice);
  cluster::MpiSession session = cluster::MpiSession::start();
  waiting.reset();
  const std::string who = fmt::format("rank {} on {}", session.rank(), session.hostname());

  // Who measures where: every rank's host to rank 0, the measuring ranks back to all.
  std::vector<std::string> hosts;
  std::vector<int> measurers;
  bool measures = false;
  {
    Watchdog watchdog("probe (" + who + ")", limit);
    watchdog.stage("hosts", false, kStartAdvice);
    hosts = session.gather_to_root(session.hostname(), kMaxHostBytes);
    std::string marks;
    if (session.is_root()) {
      measurers = probe::measuring_ranks(hosts);
      marks = measuring_marks(measurers, hosts.size());
    }
    marks = session.broadcast_from_root(marks);
    measures = marks.size() > static_cast<size_t>(session.rank()) && marks[session.rank()] == 'M';
  }
  if (global.verbose) {
    std::cerr << fmt::format("probe: rank {} of {} on {}{}, {}\n", session.rank(), session.size(),
                             session.hostname(), measures ? ", measuring this node" : ", waiting",
                             session.library_version());
  }

  std::string payload;
  if (measures) {
    payload = probe::encode_node_probe(measure_node(request, session.hostname(), session.rank()));
  }

  std::vector<std::string> payloads;
  {
    // A node's probe runs as long as it runs (every GPU wait in it is bounded by --timeout);
    // the ranks that wait for it allow ten minutes, or twenty timeouts, before giving up.
    const std::chrono::duration<double> measuring(std::max(600.0, 20 * global.timeout_s));
    Watchdog watchdog("probe (" + who + ")", measuring);
    watchdog.stage("wait", false, kMeasureAdvice);
    session.barrier_sleeping(std::chrono::milliseconds(2));
    watchdog.stage("gather", false, kMeasureAdvice);
    payloads = session.gather_to_root(payload, probe::kMaxNodePayloadBytes);
  }
  if (!session.is_root()) {
    session.finalize();
    return 0;
  }

  probe::ProbeClusterView view =
      probe::compare_nodes(read_nodes(payloads, hosts, measurers), session.size());
  session.finalize();
  const bool any_measured = std::any_of(view.nodes.begin(), view.nodes.end(),
                                        [](const probe::NodeProbe& n) { return n.ok; });
  if (any_measured) {
    const std::string document =
        format == ProbeFormat::kJson  ? reports::probe_cluster_to_json(view, request).dump(2) + "\n"
        : format == ProbeFormat::kCsv ? reports::render_probe_cluster_csv(view)
                                      : reports::render_probe_cluster_text(view, request);
    emit(global, document);
  }
  return verdict_code(view);
}

}  // namespace commtool::cli
