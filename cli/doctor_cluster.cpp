#include "cli/doctor_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/option_names.hpp"
#include "probes/base/cluster/mpi_session.hpp"
#include "probes/base/cluster/per_host.hpp"
#include "probes/base/error.hpp"
#include "probes/health/thresholds.hpp"
#include "reports/doctor/baseline.hpp"
#include "reports/doctor/doctor_cluster.hpp"

namespace commtool::cli {

namespace {

constexpr const char* kStartAdvice =
    "waiting for every MPI rank to start `commtool doctor` and name its host: a rank did not "
    "start, or is stuck before it; mpirun or srun names the ranks that exited";
constexpr const char* kExamineAdvice =
    "waiting for every node's doctor to end: a node's examining rank is stuck outside its own "
    "bounded steps (each is bounded by --timeout); mpirun or srun names the ranks that exited";

reports::doctor::NodeDoctor examine(doctor::Request request, const DoctorFiles& files,
                                    const std::string& host, int rank) {
  reports::doctor::NodeDoctor node;
  const std::optional<RankFailure> failure = rank_failure([&] {
    if (!files.thresholds.empty()) request.thresholds = health::load_thresholds(files.thresholds);
    std::optional<reports::doctor::Baseline> baseline;
    if (!files.baseline.empty()) baseline = reports::doctor::load_baseline(files.baseline);
    const doctor::Evidence evidence = doctor::gather(request);
    reports::doctor::Verdict verdict = reports::doctor::judge(evidence);
    if (baseline) reports::doctor::compare_with_baseline(verdict, *baseline);
    node = reports::doctor::node_doctor(evidence, verdict, rank);
  });
  if (failure) {
    node.ok = false;
    node.exit_code = failure->exit_code;
    node.error = failure->message;
  }
  node.host = host;
  node.rank = rank;
  return node;
}

}  // namespace

int run_doctor_cluster(const GlobalOptions& global, const doctor::Request& request,
                       const DoctorFiles& files) {
  cluster::MpiSession session =
      cluster::MpiSession::start_within("doctor", global.timeout_s, kStartAdvice);

  cluster::PerHostSpec spec;
  spec.command = "doctor";
  spec.timeout_s = global.timeout_s;
  // A node's doctor is a chain of steps, each bounded by --timeout: the ranks that wait for it
  // allow the whole chain (topology, counters, probe, all-reduce, the search by halves).
  spec.work_limit_s = std::max(900.0, 30 * global.timeout_s);
  spec.start_advice = kStartAdvice;
  spec.work_advice = kExamineAdvice;
  spec.max_payload_bytes = reports::doctor::kMaxNodeDoctorBytes;
  spec.on_role = [&](bool examines) {
    if (!global.verbose) return;
    std::cerr << fmt::format("doctor: rank {} of {} on {}{}, {}\n", session.rank(), session.size(),
                             session.hostname(), examines ? ", examining this node" : ", waiting",
                             session.library_version());
  };
  doctor::Request mine = request;
  if (global.verbose) {
    mine.on_step = [host = session.hostname()](const char* step) {
      std::cerr << "doctor (" << host << "): " << step << "\n";
    };
  }
  const cluster::PerHostResult gathered = cluster::run_once_per_host(session, spec, [&] {
    return reports::doctor::encode_node_doctor(
        examine(mine, files, session.hostname(), session.rank()));
  });
  if (!session.is_root()) {
    session.finalize();
    return 0;
  }

  const std::vector<int> ranks_on = cluster::ranks_on_worker_hosts(gathered);
  std::vector<reports::doctor::NodeDoctor> nodes;
  for (size_t i = 0; i < gathered.workers.size(); ++i) {
    const int r = gathered.workers[i];
    nodes.push_back(
        reports::doctor::decode_node_doctor(gathered.payloads[static_cast<size_t>(r)], r));
    nodes.back().node_ranks = ranks_on[i];
  }
  session.finalize();
  const reports::doctor::DoctorClusterView view =
      reports::doctor::compare_doctor_nodes(std::move(nodes), session.size());
  const std::string level = doctor::to_string(request.level);
  emit(global, global.json
                   ? reports::doctor::doctor_cluster_to_json(view, level)
                             .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                         "\n"
                   : reports::doctor::render_doctor_cluster_text(view, level));
  return reports::doctor::cluster_exit_code(view);
}

}  // namespace commtool::cli
