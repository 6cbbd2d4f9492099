#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/doctor_cluster.hpp"
#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"
#include "probes/health/thresholds.hpp"
#include "reports/doctor/baseline.hpp"
#include "reports/doctor/doctor_report.hpp"
#include "tracing/doctor/doctor_run.hpp"

namespace commtool::cli {

namespace {

struct DoctorOptions {
  std::string level = "quick";
  std::string thresholds;
  std::string kernel_log;
  std::string baseline;
};

int run_doctor(const GlobalOptions& global, const DoctorOptions& o) {
  doctor::Request q;
  const std::optional<doctor::Level> level = doctor::parse_level(o.level);
  if (!level) {
    throw usage_error(fmt::format("--level {}: not a level; accepted: {}", excerpt(o.level),
                                  doctor::kLevelNames));
  }
  q.level = *level;
  files::check_distinct(
      {{"--output", global.output}},
      {{"--thresholds", o.thresholds}, {"--kernel-log", o.kernel_log}, {"--baseline", o.baseline}});
  q.kernel_log = o.kernel_log;
  q.timeout_s = global.timeout_s;
  q.devices = global.device_indices;
  // Under MPI each node reads the files itself: one missing on a node is that node's failure,
  // named on the job's page, not a rank that never joins the others.
  if (under_mpi(global)) return run_doctor_cluster(global, q, {o.thresholds, o.baseline});
  if (!o.thresholds.empty()) q.thresholds = health::load_thresholds(o.thresholds);
  std::optional<reports::doctor::Baseline> baseline;
  if (!o.baseline.empty()) baseline = reports::doctor::load_baseline(o.baseline);
  if (global.verbose) {
    q.on_step = [](const char* step) { std::cerr << "doctor: " << step << "\n"; };
  }
  const doctor::Evidence evidence = doctor::gather(q);
  reports::doctor::Verdict verdict = reports::doctor::judge(evidence);
  if (baseline) reports::doctor::compare_with_baseline(verdict, *baseline);
  // A kernel log's line may be any bytes; JSON text must be UTF-8.
  emit(global, global.json
                   ? reports::doctor::doctor_to_json(evidence, verdict)
                             .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                         "\n"
                   : reports::doctor::render_doctor_text(evidence, verdict));
  return reports::doctor::exit_code(evidence, verdict);
}

}  // namespace

Runner register_doctor(CLI::App& app, const GlobalOptions& global) {
  auto o = std::make_shared<DoctorOptions>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Is this node's GPU communication healthy? The GPUs' own error reports (Xids in the kernel "
      "log, ECC, memory repair, PCIe replays, NVLink errors, clocks), topo's findings, a probe "
      "of each GPU's copies and a checked NCCL all-reduce, on one page: PASS, WARN or FAIL "
      "with the evidence and what to do. Under mpirun or srun, one page for the job: the nodes "
      "that differ from the rest first. Exit 0 all passed, 6 a WARN, 7 a FAIL, 3 no GPU");
  cmd->add_option("--level", o->level,
                  "quick: counters, kernel log, topology, 64 MiB copies to and from each GPU, an "
                  "all-reduce of 8 B-64 MiB (seconds); standard: 256 MiB copies, every GPU pair's "
                  "P2P copies, an all-reduce up to 256 MiB; long: probe's full 512 MiB copies and "
                  "latency, an all-reduce up to 1 GiB")
      ->type_name("LEVEL")
      ->capture_default_str();
  cmd->add_option("--thresholds", o->thresholds,
                  "Judge the counters by this file's limits: 'name = value' lines, '#' comments "
                  "(the names and DCGM-derived defaults are in --json's thresholds and the man "
                  "page)")
      ->check(non_empty_path())
      ->type_name("FILE");
  cmd->add_option("--kernel-log", o->kernel_log,
                  "Read Xids from this saved kernel log (dmesg, dmesg -T, journalctl -k, "
                  "/dev/kmsg records) instead of the live /dev/kmsg")
      ->check(non_empty_path())
      ->type_name("FILE");
  cmd->add_option("--baseline", o->baseline,
                  "Set each figure beside the same one in this doctor --json of a good node (same "
                  "GPU, size and ranks): under 90% of it is a WARN")
      ->check(non_empty_path())
      ->type_name("FILE");
  return [&global, o] { return run_doctor(global, *o); };
}

}  // namespace commtool::cli
