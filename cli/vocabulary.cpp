#include "cli/vocabulary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "probes/base/error.hpp"

namespace commtool::cli {

namespace {

constexpr Term kTerms[] = {
    // Global: every subcommand takes them, before or after its name.
    {"--version", "", "commtool's version and the GPU stack's"},
    {"--json", "", "the report as one JSON document"},
    {"--output", "", "the file the report is written to (whole or not at all)"},
    {"--devices", "", "the GPUs, or the GPU of each rank"},
    {"--comm", "", "NCCL communicator mode"},
    {"--timeout", "", "seconds one GPU operation may take"},
    {"--verbose", "-v", "what is done and how long it took"},
    {"--quiet", "-q", "no progress line"},
    {"--mpi", "", "run as one rank of an MPI job"},
    // Inputs.
    {"--nccl-xml", "", "an NCCL topology file to read instead of this machine"},
    {"--sysfs-root", "", "a captured sysfs tree to read instead of /sys"},
    {"--routing", "", "a file of per-expert token counts"},
    {"--placement", "", "a file mapping experts to ranks"},
    {"path", "", "what report reads"},
    {"collective", "", "the NCCL collective to run"},
    {"command", "", "the job record runs"},
    // Outputs besides --output.
    {"--save", "", "the directory a run or a recording is written to, for commtool report"},
    {"--trace", "", "a Chrome/Perfetto trace file"},
    {"--plot", "", "an SVG plot file"},
    {"--heatmap", "", "an SVG heat map file"},
    {"--dot", "", "the topology as Graphviz"},
    {"--csv", "", "one CSV row per measurement"},
    // How much is measured.
    {"--iters", "-n", "timed iterations per batch"},
    {"--warmup", "-w", "untimed iterations before timing"},
    {"--batches", "", "timed batches: the median and the spread are over them"},
    {"--size", "", "bytes per copy"},
    {"--minbytes", "-b", "the smallest size of a sweep"},
    {"--maxbytes", "-e", "the largest size of a sweep"},
    {"--stepfactor", "-f", "the factor between sizes of a sweep"},
    {"--dtype", "-d", "the element type"},
    {"--op", "-o", "the reduction"},
    {"--root", "-r", "the root rank"},
    {"--check", "-c", "check every output (1) or not (0)"},
    {"--inplace", "", "NCCL's in-place form"},
    {"--cupti", "", "also measure under CUPTI: the split into host, stream and kernel time"},
    {"--no-cupti", "", "trace without CUPTI: times only"},
    {"--no-baseline", "", "skip the untraced pass"},
    {"--mode", "", "how the host completes each collective"},
    {"--poll-ms", "", "blocking-wait's poll interval"},
    {"--stream-scope", "", "show what a stream wait orders"},
    {"--scope-samples", "", "samples of --stream-scope"},
    {"--scope-sleep-ms", "", "the GPU sleep of --stream-scope"},
    {"--inject-fault", "", "a fire drill: one rank fails as told"},
    {"--h2d", "", "host<->device bandwidth"},
    {"--p2p", "", "GPU<->GPU bandwidth in one process"},
    {"--ipc", "", "GPU<->GPU bandwidth between processes"},
    {"--latency", "", "latencies"},
    {"--chase-lines", "", "(hidden) pointer-chase length"},
    {"--pingpong-rounds", "", "(hidden) flag round trips per sample"},
    {"--hang-timeout", "", "seconds without a completed operation that make a hang"},
    {"--kill-on-hang", "", "end the job at a hang"},
    {"--tokens", "", "tokens per rank"},
    {"--hidden", "", "elements per token"},
    {"--experts", "", "routed experts"},
    {"--topk", "", "experts per token"},
    {"--skew", "", "how generated routing is skewed"},
    {"--seed", "", "the seed of generated routing"},
    {"--layer", "", "the layer of a routing file"},
    {"--replicate", "", "replicate the hottest experts (what-if)"},
    {"--dry-run", "", "plan only, no GPU"},
    {"--ranks", "", "expert-parallel size for --dry-run"},
    {"--level", "", "how long doctor may take: quick, standard, long"},
    {"--thresholds", "", "a file of limits doctor judges the counters by"},
    {"--kernel-log", "", "a saved kernel log doctor reads Xids from"},
    {"--baseline", "", "a good node's doctor --json to compare with"},
};

const std::vector<ElementType>& types() {
  static const std::vector<ElementType> t = {
      {"int8", {}, 1},
      {"uint8", {}, 1},
      {"int32", {}, 4},
      {"uint32", {}, 4},
      {"int64", {}, 8},
      {"uint64", {}, 8},
      {"half", {"fp16", "f16", "float16"}, 2},
      {"float", {"fp32", "f32", "float32"}, 4},
      {"double", {"fp64", "f64", "float64"}, 8},
      {"bfloat16", {"bf16"}, 2},
      {"f8e4m3", {"fp8", "e4m3"}, 1},
      {"f8e5m2", {"e5m2"}, 1},
  };
  return t;
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool takes(std::span<const std::string_view> accepted, std::string_view name) {
  return std::find(accepted.begin(), accepted.end(), name) != accepted.end();
}

}  // namespace

std::span<const Term> vocabulary() {
  return kTerms;
}

std::span<const ElementType> element_types() {
  return types();
}

std::string element_type_help(std::span<const std::string_view> accepted) {
  std::vector<std::string> names;
  for (const ElementType& t : types()) {
    if (!takes(accepted, t.name)) continue;
    names.push_back(t.aliases.empty() ? std::string(t.name)
                                      : fmt::format("{} ({})", t.name, fmt::join(t.aliases, ", ")));
  }
  return fmt::format("Element type, nccl-tests' names (aliases): {}", fmt::join(names, ", "));
}

std::string element_type(const std::string& text, std::span<const std::string_view> accepted) {
  const std::string key = lowercase(text);
  for (const ElementType& t : types()) {
    if (!takes(accepted, t.name)) continue;
    if (key == t.name || std::find(t.aliases.begin(), t.aliases.end(), key) != t.aliases.end())
      return std::string(t.name);
  }
  throw usage_error(fmt::format("--dtype {}: not an element type this command runs; accepted: {}",
                                excerpt(text), fmt::join(accepted, ", ")));
}

}  // namespace commtool::cli
