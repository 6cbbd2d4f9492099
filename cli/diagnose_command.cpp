// `commtool diagnose ep`: MoE expert-parallel dispatch and combine under a routing, measured
// against the same bytes spread evenly and against an EPLB-style replication of the hottest
// experts. Parsing only: the routing is tracing/ep_routing, the measurement tracing/ep_measure,
// the figures and words reports/ep_report.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "probes/error.hpp"
#include "reports/ep_report.hpp"
#include "reports/output_file.hpp"
#include "tracing/ep_measure.hpp"  // kMaxExchangeRanks
#include "tracing/ep_routing.hpp"

namespace commtool::cli {

namespace {

struct EpOptions {
  tracing::EpConfig config;
  std::string dtype = "bf16";
  std::string skew = "uniform";
  std::string routing_file;
  int layer = 0;
  std::string placement_file;
  int replicate = 0;
  bool dry_run = false;
  int ranks = 0;  // --ranks, for --dry-run
  int iters = 20;
  int warmup = 5;
  std::string heatmap_file;
};

int dispatch_bytes_per_element(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "bfloat16") return 2;
  if (dtype == "fp8") return 1;
  throw usage_error(fmt::format(
      "--dtype {}: accepted: bf16 (2 bytes per element) and fp8 (1 byte, a quantised dispatch; "
      "combine stays bf16)",
      dtype));
}

// The routing, placement, traffic, metrics and plan, for `ranks` ranks.
reports::EpSetup build_setup(EpOptions& o, int ranks) {
  reports::EpSetup s;
  s.config = o.config;
  s.config.ranks = ranks;
  s.config.dispatch_bytes_per_element = dispatch_bytes_per_element(o.dtype);
  s.config.skew = tracing::parse_skew(o.skew);
  if (o.routing_file.empty()) {
    s.routing = tracing::generate_routing(s.config);  // checks the config
    s.routing_source = fmt::format("generated, skew {}, seed {}", tracing::to_string(s.config.skew),
                                   s.config.seed);
  } else {
    const tracing::RoutingCounts counts = tracing::load_routing_counts(o.routing_file);
    if (o.layer < 0 || static_cast<size_t>(o.layer) >= counts.layers.size()) {
      throw usage_error(fmt::format("--layer {}: {} has layers 0 to {}", o.layer, o.routing_file,
                                    counts.layers.size() - 1));
    }
    const auto layer = static_cast<size_t>(o.layer);
    s.config.experts = static_cast<int>(counts.layers[layer].size());
    if (counts.tokens_per_rank) {
      s.config.tokens_per_rank = static_cast<int>(*counts.tokens_per_rank);
    }
    if (counts.topk) s.config.topk = *counts.topk;
    tracing::check_config(s.config);
    s.routing = tracing::routing_from_counts(
        counts, layer, ranks, static_cast<uint64_t>(s.config.tokens_per_rank), s.config.topk);
    s.routing_source = fmt::format("file {}, layer {}", o.routing_file, o.layer);
  }
  if (o.placement_file.empty()) {
    s.placement = tracing::contiguous_placement(s.config.experts, ranks);
    s.placement_source = "contiguous";
  } else {
    s.placement = tracing::load_placement(o.placement_file, s.config.experts, ranks);
    s.placement_source = o.placement_file;
  }
  const tracing::TokenBytes bytes = tracing::token_bytes(s.config);
  s.traffic = tracing::ep_traffic(tracing::dispatch_matrix(s.routing, s.placement), bytes);
  s.metrics = tracing::ep_metrics(s.routing, s.placement, s.traffic);
  s.replicate = o.replicate;
  if (o.replicate > 0) {
    s.replication = tracing::plan_replication(s.routing, s.placement, o.replicate, bytes);
  }
  return s;
}

std::vector<tracing::EpScenario> scenarios(const reports::EpSetup& s) {
  const int n = s.config.ranks;
  std::vector<tracing::EpScenario> out;
  out.push_back({reports::kRouted, s.traffic.dispatch_bytes, s.traffic.combine_bytes});
  out.push_back({reports::kUniform,
                 tracing::uniform_matrix(tracing::matrix_total(s.traffic.dispatch_bytes), n),
                 tracing::uniform_matrix(tracing::matrix_total(s.traffic.combine_bytes), n)});
  if (s.replication && !s.replication->replicated.empty()) {
    out.push_back({reports::kReplicated, s.replication->traffic.dispatch_bytes,
                   s.replication->traffic.combine_bytes});
  }
  return out;
}

int run_ep(const GlobalOptions& global, EpOptions& o) {
  if (!o.heatmap_file.empty()) reports::check_writable(o.heatmap_file);
  if (o.ranks != 0 && !o.dry_run) {
    throw usage_error(fmt::format(
        "--ranks {}: a measured run has one rank per GPU (choose them with --devices); --ranks "
        "is for --dry-run",
        o.ranks));
  }
  if (!o.routing_file.empty() && o.skew != "uniform") {
    throw usage_error(fmt::format("--skew {}: --routing {} gives the routing; drop one of them",
                                  o.skew, o.routing_file));
  }
  const int ranks =
      o.dry_run ? (o.ranks != 0 ? o.ranks : 8) : tracing::ep_rank_count(global.device_indices);
  reports::EpSetup setup = build_setup(o, ranks);

  std::unique_ptr<tracing::EpMeasurement> measured;
  if (!o.dry_run) {
    tracing::EpMeasureRequest q;
    q.scenarios = scenarios(setup);
    q.iters = o.iters;
    q.warmup = o.warmup;
    q.devices = global.device_indices;
    q.timeout_s = global.timeout_s;
    measured = std::make_unique<tracing::EpMeasurement>(tracing::run_ep_measurement(q));
  }
  const reports::EpDiagnosis d = reports::diagnose_ep(setup, measured.get());
  if (!o.heatmap_file.empty()) {
    reports::write_atomically(o.heatmap_file, reports::ep_heat_map_svg(setup));
  }
  emit(global, global.json ? reports::ep_json(setup, d, measured.get())
                           : reports::ep_text(setup, d, measured.get()));
  return 0;
}

}  // namespace

Runner register_diagnose(CLI::App& app, const GlobalOptions& global) {
  CLI::App* diagnose = app.add_subcommand(
      "diagnose", "Diagnoses with measured evidence: what skewed MoE routing costs (ep)");
  diagnose->require_subcommand(1);

  auto o = std::make_shared<EpOptions>();
  tracing::EpConfig& c = o->config;
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
  ep->add_option("--dtype", o->dtype, "Dispatch element type: bf16 or fp8 (combine is bf16)")
      ->capture_default_str();
  ep->add_option("--experts", c.experts, "Routed experts")
      ->check(CLI::Range(1, tracing::kMaxExperts))
      ->capture_default_str();
  ep->add_option("--topk", c.topk, "Experts per token")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  ep->add_option("--skew", o->skew, "uniform, zipf:S or hot:K:F (K experts get F of selections)")
      ->capture_default_str();
  ep->add_option("--seed", c.seed, "Seed of the generated routing")->capture_default_str();
  ep->add_option("--routing", o->routing_file,
                 "Per-expert token counts from a real model (JSON or CSV; see man commtool)")
      ->type_name("FILE");
  ep->add_option("--layer", o->layer, "Which layer of a --routing file")->capture_default_str();
  ep->add_option("--placement", o->placement_file, "Expert-to-rank map (JSON or CSV)")
      ->type_name("FILE");
  ep->add_option("--replicate", o->replicate,
                 "What-if: give the H hottest experts one replica each (EPLB-style), measured")
      ->type_name("H")
      ->check(CLI::Range(0, tracing::kMaxExperts));
  ep->add_flag("--dry-run", o->dry_run, "Routing, matrices and imbalance only; no GPU needed");
  ep->add_option("--ranks", o->ranks, "Expert-parallel size for --dry-run (default 8)")
      ->check(CLI::Range(1, tracing::kMaxExchangeRanks));
  ep->add_option("-n,--iters", o->iters, "Measured exchanges per scenario and phase")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  ep->add_option("-w,--warmup", o->warmup, "Unmeasured exchanges before them")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  ep->add_option("--heatmap", o->heatmap_file, "Write the dispatch matrix as an SVG heat map")
      ->type_name("FILE.svg");
  return [&global, o] { return run_ep(global, *o); };
}

}  // namespace commtool::cli
