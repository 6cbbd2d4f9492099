#include "cli/probe_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/option_names.hpp"
#include "probes/bandwidth/probe_cluster.hpp"
#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/cluster/per_host.hpp"
#include "probes/base/error.hpp"
#include "reports/probe/probe_report.hpp"

namespace commtool::cli {

namespace {

constexpr const char* kStartAdvice =
    "waiting for every MPI rank to start `commtool probe` and name its host: a rank did not "
    "start, or is stuck before it; mpirun or srun names the ranks that exited";
constexpr const char* kMeasureAdvice =
    "waiting for every node's probe to end: a node's measuring rank is stuck outside its GPU "
    "waits (each of those is bounded by --timeout); mpirun or srun names the ranks that exited";

probe::NodeProbe measure_node(const probe::ProbeRequest& request, const std::string& host,
                              int rank) {
  probe::NodeProbe node;
  const std::optional<RankFailure> failure =
      rank_failure([&] { node = probe::node_probe(host, rank, probe::run_probes(request)); });
  if (failure) {
    node.ok = false;
    node.exit_code = failure->exit_code;
    node.error = failure->message;
  }
  node.host = host;
  node.rank = rank;
  return node;
}

// Rank 0: the measuring ranks' nodes, each with its count of ranks on the host.
std::vector<probe::NodeProbe> read_nodes(const cluster::PerHostResult& gathered) {
  const std::vector<int> ranks_on = cluster::ranks_on_worker_hosts(gathered);
  std::vector<probe::NodeProbe> nodes;
  for (size_t i = 0; i < gathered.workers.size(); ++i) {
    const int r = gathered.workers[i];
    nodes.push_back(probe::decode_node_probe(gathered.payloads[static_cast<size_t>(r)], r));
    nodes.back().node_ranks = ranks_on[i];
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
  if (const std::optional<std::string> why = probe::asked_but_not_run(view)) {
    std::cerr << "commtool: " << printable_message(*why) << "\n";
    return static_cast<int>(ExitCode::kEnvironment);
  }
  return 0;
}

}  // namespace

int run_probe_cluster(const GlobalOptions& global, const probe::ProbeRequest& request,
                      ProbeFormat format) {
  cluster::MpiSession session =
      cluster::MpiSession::start_within("probe", global.timeout_s, kStartAdvice);
  cluster::PerHostSpec spec;
  spec.command = "probe";
  spec.timeout_s = global.timeout_s;
  // A node's probe runs as long as it runs (every GPU wait in it is bounded by --timeout);
  // the ranks that wait for it allow ten minutes, or twenty timeouts, before giving up.
  spec.work_limit_s = std::max(600.0, 20 * global.timeout_s);
  spec.start_advice = kStartAdvice;
  spec.work_advice = kMeasureAdvice;
  spec.max_payload_bytes = probe::kMaxNodePayloadBytes;
  spec.on_role = [&](bool measures) {
    if (!global.verbose) return;
    std::cerr << fmt::format("probe: rank {} of {} on {}{}, {}\n", session.rank(), session.size(),
                             session.hostname(), measures ? ", measuring this node" : ", waiting",
                             session.library_version());
  };
  const cluster::PerHostResult gathered = cluster::run_once_per_host(session, spec, [&] {
    return probe::encode_node_probe(measure_node(request, session.hostname(), session.rank()));
  });
  if (!session.is_root()) {
    session.finalize();
    return 0;
  }

  probe::ProbeClusterView view = probe::compare_nodes(read_nodes(gathered), session.size());
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
