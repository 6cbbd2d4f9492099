#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/topo_command.hpp"
#include "probes/base/error.hpp"
#include "probes/base/output_file.hpp"
#include "probes/base/watchdog.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/discover.hpp"
#include "reports/topo/topo_report.hpp"

namespace commtool::cli {

topo::Topology discover_topology(const GlobalOptions& global, const TopoOptions& options,
                                 Watchdog& watchdog) {
  topo::DiscoverOptions discover;
  discover.nccl_xml = options.nccl_xml;
  discover.sysfs_root = options.sysfs_root;
  return topo::discover_watched(discover, watchdog, global.device_indices,
                                global.verbose ? &std::cerr : nullptr);
}

namespace {

int run_topo(const GlobalOptions& global, const TopoOptions& options) {
  using Clock = std::chrono::steady_clock;
  // Driver queries can hang on a sick GPU; --timeout bounds the whole discovery.
  Watchdog watchdog("topo", std::chrono::duration<double>(global.timeout_s));
  auto started = Clock::now();
  topo::Topology topology = discover_topology(global, options, watchdog);
  watchdog.stage("analysis");
  topo::Analysis analysis = topo::analyze(topology);
  watchdog.stage("render");

  std::string document;
  if (global.json) {
    document = reports::topo_to_json(topology, analysis).dump(2) + "\n";
  } else if (options.dot) {
    document = reports::render_topo_dot(topology);
  } else {
    document = reports::render_topo_text(topology, analysis);
  }
  emit(global, document);
  if (global.verbose) {
    std::cerr << fmt::format(
        "topo: done in {:.1f} ms\n",
        std::chrono::duration<double, std::milli>(Clock::now() - started).count());
  }
  return 0;
}

}  // namespace

Runner register_topo(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<TopoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "topo",
      "What is connected to what: GPUs, PCIe tree, NVLink, NICs, P2P, and what is wrong; under "
      "mpirun or srun, rank 0 prints the nodes that differ from the common configuration first");
  cmd->add_option("--nccl-xml", options->nccl_xml,
                  "Report on the machine described by this NCCL topology file "
                  "(NCCL_TOPO_DUMP_FILE output or a vendor's NCCL_TOPO_FILE); under MPI, %r "
                  "is the rank")
      ->check(non_empty_path())
      ->type_name("FILE");
  cmd->add_option("--sysfs-root", options->sysfs_root,
                  "Read this captured sysfs tree instead of /sys (NVML and CUDA are not asked); "
                  "under MPI, %r is the rank")
      ->check(non_empty_path())
      ->type_name("DIR");
  cmd->add_flag("--dot", options->dot,
                "Print the PCIe tree and NVLinks as Graphviz (draw it with dot -Tsvg, from the "
                "graphviz package)");
  return [&global, options] {
    if (options->dot && global.json) {
      throw usage_error("--dot and --json both choose the output format; give one");
    }
    if (!options->nccl_xml.empty() && !options->sysfs_root.empty()) {
      throw usage_error("--nccl-xml and --sysfs-root both name a machine to read; give one");
    }
    files::check_distinct({{"--output", global.output}}, {{"--nccl-xml", options->nccl_xml},
                                                          {"--sysfs-root", options->sysfs_root}});
    if (global.mpi || global.launch.several_ranks()) {
      if (options->dot) {
        throw usage_error(
            "--dot under MPI: the cluster view is text or --json; run topo --dot on one node");
      }
      return run_topo_cluster(global, *options);
    }
    return run_topo(global, *options);
  };
}

}  // namespace commtool::cli
