// topo under MPI: each rank reads its node, rank 0 gathers, compares and prints.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/option_names.hpp"
#include "cli/topo_command.hpp"
#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/error.hpp"
#include "probes/base/runtime_versions.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/cluster.hpp"
#include "probes/topo/cluster_wire.hpp"
#include "probes/topo/node_facts.hpp"
#include "reports/topo/cluster_report.hpp"
#include "reports/topo/topo_report.hpp"

namespace commtool::cli {

namespace {

// What the timeout says when a rank waits for the others longer than --timeout.
constexpr const char* kWaitAdvice =
    "waiting for every MPI rank to start and send its topology: a rank did not start "
    "`commtool topo`, or is stuck before it sends; mpirun or srun names the ranks that exited";

// This rank's payload: its node read and rendered, or why it could not be.
topo::RankPayload read_this_node(const GlobalOptions& global, const TopoOptions& options,
                                 const std::string& host, Watchdog& watchdog) {
  topo::RankPayload p;
  p.host = host;
  const std::optional<RankFailure> failure = rank_failure([&] {
    topo::Topology topology = discover_topology(global, options, watchdog);
    watchdog.stage("analysis");
    const topo::Analysis analysis = topo::analyze(topology);
    // A file describes another machine: this machine's CUDA and NCCL are not its versions.
    topo::StackVersions versions;
    if (options.sysfs_root.empty() && options.nccl_xml.empty()) {
      watchdog.stage("versions", /*driver_call=*/true);
      versions = {cuda_driver_api_version(), nccl_library_version()};
    }
    watchdog.stage("render");
    p.source = topology.source;
    p.facts = topo::node_facts(topology, analysis, versions);
    p.document = global.json ? reports::topo_to_json(topology, analysis).dump()
                             : reports::render_topo_text(topology, analysis);
  });
  if (failure) {
    p.ok = false;
    p.exit_code = failure->exit_code;
    p.error = failure->message;
  }
  return p;
}

}  // namespace

std::string expand_rank_pattern(const std::string& value, int rank, const char* option) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out += value[i];
      continue;
    }
    const char next = i + 1 < value.size() ? value[i + 1] : '\0';
    if (next == 'r') {
      out += std::to_string(rank);
    } else if (next == '%') {
      out += '%';
    } else {
      throw usage_error(fmt::format(
          "{} {}: under MPI a '%' starts %r (the MPI rank) or %% (a "
          "'%'); this one is followed by {}",
          option, excerpt(value), next == '\0' ? "nothing" : excerpt(std::string(1, next))));
    }
    ++i;
  }
  return out;
}

int run_topo_cluster(const GlobalOptions& global, TopoOptions options) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  // MPI_Init waits for every rank, and so does the gather: --timeout bounds both, and each
  // rank's own discovery as on one machine.
  const std::chrono::duration<double> limit(global.timeout_s);
  cluster::MpiSession session =
      cluster::MpiSession::start_within("topo", global.timeout_s, kWaitAdvice);
  const std::string who = fmt::format("rank {} on {}", session.rank(), session.hostname());
  if (global.verbose) {
    std::cerr << fmt::format("topo: {} of {} ranks, {}\n", who, session.size(),
                             session.library_version());
  }

  topo::RankPayload mine;
  try {
    options.sysfs_root = expand_rank_pattern(options.sysfs_root, session.rank(), "--sysfs-root");
    options.nccl_xml = expand_rank_pattern(options.nccl_xml, session.rank(), "--nccl-xml");
    Watchdog watchdog("topo (" + who + ")", limit);
    mine = read_this_node(global, options, session.hostname(), watchdog);
  } catch (const Error& e) {  // a bad pattern: rank 0 says it, like any rank's failure
    mine.ok = false;
    mine.exit_code = static_cast<int>(e.code());
    mine.error = e.what();
    mine.host = session.hostname();
  }

  std::vector<std::string> gathered;
  {
    Watchdog watchdog("topo (" + who + ")", limit);
    watchdog.stage("gather", false, kWaitAdvice);
    try {
      gathered =
          session.gather_to_root(topo::encode_rank_payload(mine), topo::kMaxRankPayloadBytes);
    } catch (const Error& e) {
      throw Error(e.code(), who + ": " + e.what());
    }
  }
  if (!session.is_root()) {
    session.finalize();
    return 0;
  }

  Watchdog watchdog("topo (rank 0)", limit);
  watchdog.stage("compare");
  const std::vector<topo::RankPayload> ranks = topo::decode_rank_payloads(gathered);
  const topo::ClusterView view = topo::compare_cluster(ranks);
  watchdog.stage("render");
  const std::string document = global.json ? reports::cluster_to_json(view, ranks).dump(2) + "\n"
                                           : reports::render_cluster_text(view, ranks);
  emit(global, document);
  session.finalize();
  if (global.verbose) {
    std::cerr << fmt::format(
        "topo: cluster view of {} rank(s) done in {:.1f} ms\n", view.ranks,
        std::chrono::duration<double, std::milli>(Clock::now() - started).count());
  }
  return 0;
}

}  // namespace commtool::cli
