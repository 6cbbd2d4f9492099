#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/probe_cluster.hpp"
#include "probes/bandwidth/probe_cluster.hpp"
#include "probes/bandwidth/probe_plan.hpp"
#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"
#include "reports/probe/probe_report.hpp"

namespace commtool::cli {

namespace {

struct ProbeOptions {
  probe::ProbeRequest request;
  std::string size = "512MiB";
  bool csv = false;
};

uint64_t checked_size(const std::string& text) {
  uint64_t bytes = measure::parse_byte_size("--size", text);
  if (bytes < 4) {
    throw usage_error(fmt::format("--size {}: must be at least 4 bytes", text));
  }
  if (bytes % 4 != 0) {
    throw usage_error(
        fmt::format("--size {}: must be a multiple of 4 bytes (every transfer is "
                    "checked word by word)",
                    text));
  }
  return bytes;
}

int run_probe(const GlobalOptions& global, ProbeOptions& options) {
  if (options.csv && global.json)
    throw usage_error("--csv and --json both choose the format; give one");
  probe::ProbeRequest& q = options.request;
  // Pairs need two GPUs (--p2p) or two ranks (--ipc); a list of one rules them out here.
  if (q.p2p && global.device_indices.size() == 1) {
    throw usage_error(
        fmt::format("--p2p measures between two GPUs; --devices {} lists one", global.devices));
  }
  if (q.ipc && global.rank_devices.size() == 1) {
    throw usage_error(fmt::format(
        "--ipc measures between two worker ranks; --devices {} lists one (0,0 puts two on GPU 0)",
        global.devices));
  }
  q.bytes = checked_size(options.size);
  q.timeout_s = global.timeout_s;
  q.devices = global.device_indices;
  q.ipc_placement = global.rank_devices;
  if (under_mpi(global)) {
    return run_probe_cluster(global, q,
                             global.json   ? ProbeFormat::kJson
                             : options.csv ? ProbeFormat::kCsv
                                           : ProbeFormat::kText);
  }
  probe::ProbeReport report = probe::run_probes(q);
  std::string doc = global.json   ? reports::probe_to_json(report).dump(2) + "\n"
                    : options.csv ? reports::render_probe_csv(report)
                                  : reports::render_probe_text(report);
  emit(global, doc);
  if (const std::optional<std::string> why = probe::asked_but_not_run(report)) {
    std::cerr << "commtool: " << printable_message(*why) << "\n";
    return static_cast<int>(ExitCode::kEnvironment);
  }
  return 0;
}

}  // namespace

Runner register_probe(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ProbeOptions>();
  probe::ProbeRequest& q = options->request;
  CLI::App* cmd = app.add_subcommand(
      "probe",
      "How fast each link really is: host<->device, P2P and CUDA-IPC bandwidth and "
      "latency, against what each link should give");
  cmd->add_flag("--h2d", q.h2d, "Host<->device bandwidth per GPU (copy engine and SM copy)");
  cmd->add_flag("--p2p", q.p2p, "GPU<->GPU bandwidth matrices in one process (peer access)");
  cmd->add_flag("--ipc", q.ipc,
                "GPU<->GPU bandwidth between worker processes through CUDA IPC, and the flag "
                "round-trip latency");
  cmd->add_flag("--latency", q.latency,
                "Host round-trip and small-copy latency per GPU, and the peer load latency "
                "matrix");
  cmd->add_option("--size", options->size, "Bytes per copy for bandwidth (512MiB, 64K, 1G, ...)")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("-n,--iters", q.iters, "Copies per timed batch")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--batches", q.batches, "Timed batches; the median and the spread are over them")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("-w,--warmup", q.warmup, "Untimed copies before the first batch")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  cmd->add_flag("--csv", options->csv, "One CSV row per measurement");
  cmd->add_option("--chase-lines", q.chase_lines)->group("")->check(CLI::Range(2, 1 << 24));
  cmd->add_option("--pingpong-rounds", q.pingpong_rounds)->group("")->check(CLI::Range(1, 1000000));
  return [&global, options] { return run_probe(global, *options); };
}

}  // namespace commtool::cli
