// `commtool diagnose`: options bound into requests, one call each. diagnose ep plans the routing
// (tracing/ep/ep_plan), measures it unless --dry-run (tracing/ep/ep_measure) and judges it
// (reports/ep/ep_report); diagnose allreduce runs the sweep (tracing/allreduce/sweep) and
// judges it (reports/allreduce/allreduce_diagnosis).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/size_sweep.hpp"
#include "cli/vocabulary.hpp"
#include "probes/base/error.hpp"
#include "probes/base/measure/memory_limit.hpp"
#include "probes/base/output_file.hpp"
#include "probes/base/workers/cluster_group.hpp"
#include "reports/allreduce/allreduce_diagnosis.hpp"
#include "reports/ep/ep_report.hpp"
#include "tracing/allreduce/sweep.hpp"
#include "tracing/ep/ep_measure.hpp"
#include "tracing/ep/ep_plan.hpp"

namespace commtool::cli {

namespace {

// diagnose allreduce runs NCCL and commtool's IPC kernels, which reduce these; diagnose ep's
// dispatch moves 2- or 1-byte elements (its combine is bfloat16).
constexpr std::string_view kAllReduceTypes[] = {"half", "float", "bfloat16"};
constexpr std::string_view kEpTypes[] = {"bfloat16", "f8e4m3", "f8e5m2"};

struct EpOptions {
  tracing::EpPlanRequest plan;
  std::string dtype = "bfloat16";
  std::string skew = "uniform";
  bool dry_run = false;
  int ranks = 0;  // --ranks, for --dry-run
  int iters = 20;
  int warmup = 5;
  std::string heatmap_file;
  bool cupti = false;      // --cupti: the turns again under CUPTI, each phase split
  std::string trace_file;  // --trace: the Perfetto trace of that run
};

int dispatch_bytes_per_element(const std::string& dtype) {
  return element_type(dtype, kEpTypes) == "bfloat16" ? 2 : 1;
}

// Every check of the options among themselves, before anything is read or measured.
void check_ep_options(const EpOptions& o) {
  if (!o.heatmap_file.empty()) files::check_writable(o.heatmap_file, "--heatmap");
  if (o.cupti && o.dry_run) {
    throw usage_error(
        "--cupti: --dry-run measures nothing, so there is nothing to trace; drop one of them");
  }
  if (!o.trace_file.empty()) {
    if (!o.cupti) {
      throw usage_error(fmt::format("--trace {}: the trace is of the run under CUPTI; add --cupti",
                                    o.trace_file));
    }
    files::check_writable(o.trace_file, "--trace");
  }
  if (o.ranks != 0 && !o.dry_run) {
    throw usage_error(fmt::format(
        "--ranks {}: a measured run has one rank per entry of --devices (a GPU listed N times "
        "carries N ranks); --ranks is for --dry-run",
        o.ranks));
  }
  if (o.plan.layer != 0 && o.plan.routing_file.empty()) {
    throw usage_error(fmt::format(
        "--layer {}: picks a layer of a --routing file, and none is given", o.plan.layer));
  }
  // Every measured exchange's times (and with --cupti its records) stay in memory until the
  // rank reports: routed, uniform and replicated traffic, dispatch and combine each.
  const uint64_t ops = static_cast<uint64_t>(o.plan.replicate > 0 ? 3 : 2) * 2 *
                       static_cast<uint64_t>(o.iters + o.warmup) * (o.cupti ? 2 : 1);
  if (!o.dry_run && ops > measure::kMaxOperationsPerRank) {
    throw usage_error(fmt::format(
        "--iters {}: {} operations per rank (warm-up included{}), each kept in memory until the "
        "rank reports; the limit is {}",
        o.iters, ops, o.cupti ? ", twice with --cupti" : "", measure::kMaxOperationsPerRank));
  }
  if (!o.plan.routing_file.empty() && o.skew != "uniform") {
    throw usage_error(fmt::format("--skew {}: --routing {} gives the routing; drop one of them",
                                  o.skew, o.plan.routing_file));
  }
}

// The plan's request. The rank count is --ranks for a dry run (else the MPI job's ranks under a
// launcher, else 8) and the length of --devices when it lists the ranks; over every GPU only the
// machine knows it, so a measured run checks all that holds at any rank count first and counts the
// GPUs last.
tracing::EpPlanRequest plan_request(const GlobalOptions& global, const EpOptions& o) {
  tracing::EpPlanRequest q = o.plan;
  q.config.dispatch_bytes_per_element = dispatch_bytes_per_element(o.dtype);
  q.config.skew = tracing::parse_skew(o.skew);
  if (o.dry_run) {
    const workers::ClusterGroups* cluster = workers::active_cluster();
    q.config.ranks = o.ranks != 0 ? o.ranks : cluster != nullptr ? cluster->self().size : 8;
  } else {
    tracing::check_ep_request(q);
    q.config.ranks = tracing::ep_rank_count(global.rank_devices);
  }
  return q;
}

int run_ep(const GlobalOptions& global, const EpOptions& o) {
  check_ep_options(o);
  files::check_distinct(
      {{"--output", global.output}, {"--heatmap", o.heatmap_file}, {"--trace", o.trace_file}},
      {{"--routing", o.plan.routing_file}, {"--placement", o.plan.placement_file}});
  const tracing::EpSetup setup = tracing::plan_ep(plan_request(global, o));
  std::unique_ptr<tracing::EpMeasurement> measured;
  if (!o.dry_run) {
    tracing::check_ep_memory(setup, global.rank_devices);
    tracing::EpMeasureRequest q;
    q.scenarios = tracing::ep_scenarios(setup);
    q.iters = o.iters;
    q.warmup = o.warmup;
    q.devices = global.rank_devices;
    q.timeout_s = global.timeout_s;
    q.comm = global.comm_mode;
    q.trace = o.cupti;
    measured = std::make_unique<tracing::EpMeasurement>(tracing::run_ep_measurement(q));
  }
  const reports::EpDiagnosis d = reports::diagnose_ep(setup, measured.get());
  if (!o.heatmap_file.empty()) {
    files::write_atomically(o.heatmap_file, reports::ep_heat_map_svg(setup), "--heatmap");
  }
  if (!o.trace_file.empty()) {
    files::write_atomically(o.trace_file, reports::ep_chrome_trace(*measured).dump() + "\n",
                            "--trace");
  }
  emit(global, global.json ? reports::ep_json(setup, d, measured.get())
                           : reports::ep_text(setup, d, measured.get()));
  return 0;
}

// ---- diagnose allreduce ---------------------------------------------------------------------

struct AllReduceOptions {
  std::string minbytes = "8", maxbytes = "256M";
  int stepfactor = 2;
  int iters = 20;
  int warmup = 5;
  std::string dtype = "float";
  std::string plot_file;
};

int run_allreduce(const GlobalOptions& global, const AllReduceOptions& o) {
  if (!o.plot_file.empty()) files::check_writable(o.plot_file, "--plot");
  files::check_distinct({{"--output", global.output}, {"--plot", o.plot_file}});
  tracing::AllReduceSweepRequest q;
  q.sizes = size_sweep(o.minbytes, o.maxbytes, o.stepfactor);
  q.dtype = *tracing::parse_data_type(element_type(o.dtype, kAllReduceTypes));
  q.iters = o.iters;
  q.warmup = o.warmup;
  q.devices = global.rank_devices;
  q.timeout_s = global.timeout_s;
  q.comm = global.comm_mode;
  tracing::AllReduceSweep sweep = tracing::run_allreduce_sweep(q);
  const reports::AllReduceDiagnosis d = reports::diagnose_measured_sweep(sweep);
  if (!o.plot_file.empty()) {
    files::write_atomically(o.plot_file, reports::allreduce_plot_svg(sweep), "--plot");
  }
  emit(global, global.json ? reports::allreduce_json(sweep, d) : reports::allreduce_text(sweep, d));
  return 0;
}

CLI::App* add_allreduce(CLI::App* diagnose, AllReduceOptions* a) {
  CLI::App* ar = diagnose->add_subcommand(
      "allreduce",
      "Which all-reduce path wins at which size here: NCCL's default, each NCCL "
      "algorithm and protocol, and commtool's CUDA-IPC one-shot and two-shot");
  ar->add_option("-b,--minbytes", a->minbytes, "Smallest size per rank")
      ->type_name("SIZE")
      ->capture_default_str();
  ar->add_option("-e,--maxbytes", a->maxbytes, "Largest size per rank")
      ->type_name("SIZE")
      ->capture_default_str();
  ar->add_option("-f,--stepfactor", a->stepfactor, "Multiply the size by this each step")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  ar->add_option("-n,--iters", a->iters, "Measured calls per size and path")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  ar->add_option("-w,--warmup", a->warmup, "Unmeasured calls before them")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  ar->add_option("-d,--dtype", a->dtype, element_type_help(kAllReduceTypes))
      ->type_name("TYPE")
      ->capture_default_str();
  ar->add_option("--plot", a->plot_file, "Draw time against size per path (SVG, log-log)")
      ->check(non_empty_path())
      ->type_name("FILE.svg");
  return ar;
}

void add_ep(CLI::App* diagnose, EpOptions* o) {
  tracing::EpConfig& c = o->plan.config;
  CLI::App* ep = diagnose->add_subcommand(
      "ep",
      "What skewed MoE routing costs an expert-parallel all-to-all, measured, with a "
      "measured what-if for replicating the hottest experts");
  ep->add_option("--tokens", c.tokens_per_rank, "Tokens per rank")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  ep->add_option("--hidden", c.hidden, "Hidden size: elements per token")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  ep->add_option("-d,--dtype", o->dtype,
                 element_type_help(kEpTypes) + "; the dispatch's, the combine is bfloat16")
      ->type_name("TYPE")
      ->capture_default_str();
  ep->add_option("--experts", c.experts, "Routed experts")
      ->check(CLI::Range(1, tracing::kMaxExperts))
      ->capture_default_str();
  ep->add_option("--topk", c.topk, "Experts per token")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  ep->add_option("--skew", o->skew, "uniform, zipf:S or hot:K:F (K experts get F of selections)")
      ->capture_default_str();
  ep->add_option("--seed", c.seed, "Seed of the generated routing")
      ->check(CLI::Validator(  // a uint64 would take -1 as 2^64 - 1
          [](std::string& text) -> std::string {
            return text.starts_with('-') ? text + " is negative; a seed is 0 to 2^64-1" : "";
          },
          ""))
      ->capture_default_str();
  ep->add_option("--routing", o->plan.routing_file,
                 "Per-expert token counts from a real model (JSON or CSV; see man commtool)")
      ->check(non_empty_path())
      ->type_name("FILE");
  ep->add_option("--layer", o->plan.layer, "Which layer of a --routing file")
      ->capture_default_str();
  ep->add_option("--placement", o->plan.placement_file, "Expert-to-rank map (JSON or CSV)")
      ->check(non_empty_path())
      ->type_name("FILE");
  ep->add_option("--replicate", o->plan.replicate,
                 "What-if: give the H hottest experts one replica each (EPLB-style), measured")
      ->type_name("H")
      ->check(CLI::Range(0, tracing::kMaxExperts));
  ep->add_flag("--dry-run", o->dry_run, "Routing, matrices and imbalance only; no GPU needed");
  ep->add_option("--ranks", o->ranks,
                 "Expert-parallel size for --dry-run (default: the MPI job's ranks under a "
                 "launcher, else 8)")
      ->check(CLI::Range(1, tracing::kMaxExchangeRanks));
  ep->add_option("-n,--iters", o->iters, "Measured exchanges per scenario and phase")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  ep->add_option("-w,--warmup", o->warmup, "Unmeasured exchanges before them")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  ep->add_option("--heatmap", o->heatmap_file, "Write the dispatch matrix as an SVG heat map")
      ->check(non_empty_path())
      ->type_name("FILE.svg");
  ep->add_flag("--cupti", o->cupti,
               "Run the turns again under CUPTI: split each phase into host enqueue, input "
               "wait, kernel and exposed wait per rank");
  ep->add_option("--trace", o->trace_file,
                 "Write a Chrome/Perfetto trace (JSON) of the --cupti run to FILE")
      ->check(non_empty_path())
      ->type_name("FILE");
}

}  // namespace

Runner register_diagnose(CLI::App& app, const GlobalOptions& global) {
  CLI::App* diagnose =
      app.add_subcommand("diagnose",
                         "Diagnoses with measured evidence: the fastest all-reduce path per size "
                         "(allreduce), what skewed MoE routing costs (ep)");
  diagnose->require_subcommand(1);
  auto a = std::make_shared<AllReduceOptions>();
  auto o = std::make_shared<EpOptions>();
  CLI::App* ar = add_allreduce(diagnose, a.get());
  add_ep(diagnose, o.get());
  return [&global, o, a, ar] {
    if (ar->parsed()) return run_allreduce(global, *a);
    return run_ep(global, *o);
  };
}

}  // namespace commtool::cli
