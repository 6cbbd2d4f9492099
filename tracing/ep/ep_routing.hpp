// The routing half of `commtool diagnose ep`: which experts each token picks, which ranks hold
// those experts, and so how many tokens and bytes each rank sends each rank in an MoE dispatch
// (tokens to their experts) and combine (expert outputs back to their tokens). Pure and
// CPU-only: tracing/ep/ep_measure.hpp runs the byte matrices made here, reports/ep/ep_report.hpp
// judges the numbers.
//
// Defined in three files by concern: ep_routing.cpp (skews, the config checks, generated
// routing and routing from counts), routing_files.cpp (reading counts and placement files) and
// ep_traffic.cpp (placement, matrices, metrics and the replication what-if).
//
// Dispatch is counted as DeepEP counts it: a token goes ONCE to each distinct rank among its
// top-k experts (the receiving rank applies all its local experts to that one copy), so two of
// a token's experts on one rank cost one token, not two. That needs each token's choices,
// which generated routing keeps. Routing read from a file of per-expert counts has none, so
// there every selection is counted as a token of its own: an upper bound on the traffic, and
// Routing::per_token() / EpMetrics::dispatch_per_selection say so for the report.
//
// Sharp edges: a skew is the distribution of each of a token's k draws, not of the resulting
// expert loads (see Skew); the matrices include the diagonal (a rank's tokens for its own
// experts), which the exchange copies locally but still counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace commtool::tracing {

// [source rank][destination rank]: tokens or bytes. The same type as ep_measure.hpp's
// ByteMatrix, so a byte matrix made here goes straight into an EpScenario.
using RankMatrix = std::vector<std::vector<uint64_t>>;

// The most experts commtool accepts: far above any MoE (DeepSeek-V3 routes over 256), low
// enough that a typo in a file cannot make it allocate gigabytes.
inline constexpr int kMaxExperts = 1 << 16;

// What a routing or placement file may hold: at most this many (layer, expert) entries, in a
// file of at most kMaxRoutingFileBytes. A real model's dump is far smaller (DeepSeek-V3: 58 MoE
// layers x 256 experts, 15k entries in ~200 kB); the bounds keep what reading a file costs
// below a few hundred MB whatever it holds (a 1 GB sparse file once took 7 GB).
inline constexpr size_t kMaxRoutingEntries = size_t{1} << 20;
inline constexpr uint64_t kMaxRoutingFileBytes = 32ull << 20;

// How a token's top-k draws favour experts (--skew). Each of a token's k draws picks among the
// experts it has not picked yet in proportion to these weights (the Plackett-Luce model: the
// top-k of a router's logits log(weight) plus Gumbel noise). Because a token picks an expert
// at most once, with k > 1 the observed loads are flatter than the weights: no expert can get
// more than 1/k of the selections, so hot:2:0.9 at top-8 gives the hot pair about 2/8, not 0.9.
// At k = 1 the loads follow the weights exactly.
struct Skew {
  enum class Kind { kUniform, kZipf, kHot };
  Kind kind = Kind::kUniform;
  double zipf_s = 0;        // zipf:S, S > 0: expert i weighs 1/(i+1)^S, expert 0 the hottest
  int hot_experts = 0;      // hot:K:F, K in 1..experts-1: experts 0..K-1 share F equally,
  double hot_fraction = 0;  // the others 1-F equally; 0 < F < 1
};

// "uniform", "zipf:S" or "hot:K:F". Throws usage_error naming the value and what is accepted.
// K's upper bound needs the expert count: check_config checks it.
Skew parse_skew(const std::string& text);
std::string to_string(const Skew& skew);  // "zipf:1.2", as parse_skew reads it

// Each draw's probability per expert (sums to 1). Throws usage_error for hot:K:F with K not
// below `experts`.
std::vector<double> draw_probabilities(const Skew& skew, int experts);

// What one diagnose-ep run is. The defaults are DeepSeek-V3's MoE layer (hidden 7168, 256
// routed experts, top-8) at DeepEP's normal-mode benchmark batch of 4096 tokens per rank.
struct EpConfig {
  int ranks = 8;  // expert-parallel size: one rank per GPU
  int tokens_per_rank = 4096;
  int hidden = 7168;
  int dispatch_bytes_per_element = 2;  // bf16; 1 for an fp8 dispatch
  int combine_bytes_per_element = 2;   // combine returns activations: bf16
  int experts = 256;
  int topk = 8;
  Skew skew;
  uint64_t seed = 1;
};

// Throws usage_error naming the flag (--tokens, --hidden, --experts, --topk, --skew) and what
// is accepted when the config cannot describe a routing.
void check_config(const EpConfig& config);

// Bytes one token occupies on the wire: hidden x bytes per element, per phase.
struct TokenBytes {
  uint64_t dispatch = 0;
  uint64_t combine = 0;
};
TokenBytes token_bytes(const EpConfig& config);

// ---- routing ----------------------------------------------------------------------------------

struct Routing {
  int ranks = 0;
  int experts = 0;
  int topk = 0;
  uint64_t tokens_per_rank = 0;
  // [source rank][expert]: how many of the rank's tokens picked the expert.
  std::vector<std::vector<uint64_t>> selections;
  // [source rank][token * topk + j]: the token's j-th pick (distinct within a token). Empty
  // for routing read from counts.
  std::vector<std::vector<int32_t>> token_experts;

  bool per_token() const { return !token_experts.empty(); }
};

// Every rank's tokens_per_rank tokens, each with topk distinct experts drawn by the skew.
// Deterministic for a seed on any machine: each source rank has its own std::mt19937_64 (whose
// output the standard fixes), seeded from (seed, rank), and uniform doubles are made here, not
// by <random>'s distributions (their output is implementation-defined). Rank r's tokens do not
// depend on the rank count. Calls check_config. Fast: one binary search per draw.
Routing generate_routing(const EpConfig& config);

// Per-expert selection counts over all ranks from a real model, per layer, as read from a
// file (JSON or CSV, below). tokens_per_rank and topk are set where the file gives them.
struct RoutingCounts {
  std::string source;  // the file, for messages
  std::optional<uint64_t> tokens_per_rank;
  std::optional<int> topk;
  std::vector<std::vector<uint64_t>> layers;  // [layer][expert]; every layer the same length
};

// JSON (the text starts with '{'):
//   {"tokens_per_rank": 4096, "topk": 8, "counts": [c0, c1, ...]}    one layer, or
//   {"tokens_per_rank": 4096, "topk": 8, "layers": [[...], [...]]}  one array per layer;
// tokens_per_rank and topk optional, other keys ignored (a dump may carry the model's name).
// CSV: lines `expert,count` or `layer,expert,count`, an optional header naming those columns,
// blank lines and '#' comments skipped; every expert 0..E-1 once per layer, layers 0..L-1.
// Throws usage_error naming the source with the line and field (CSV) or the JSON path.
RoutingCounts parse_routing_counts(const std::string& text, const std::string& source);
RoutingCounts load_routing_counts(const std::string& path);

// One layer of `counts` as routing at `ranks` ranks: each source rank gets counts/ranks of
// every expert, the remainders dealt round-robin over the ranks (carrying on from expert to
// expert), so every rank has exactly tokens_per_rank x topk selections. The caller picks
// tokens_per_rank and topk (the file's where it gives them). Throws usage_error naming the
// source and layer when the counts do not add up to tokens_per_rank x topk x ranks, when an
// expert has more selections than there are tokens, or when there are fewer experts than topk.
Routing routing_from_counts(const RoutingCounts& counts, size_t layer, int ranks,
                            uint64_t tokens_per_rank, int topk);

// ---- placement --------------------------------------------------------------------------------

struct Placement {
  int ranks = 0;
  // [expert]: the ranks holding a copy, distinct, the expert's home first, replicas after.
  std::vector<std::vector<int>> holders;
};

// Experts in contiguous blocks, as DeepEP and Megatron place them: rank r holds experts
// [r*E/R, (r+1)*E/R). When R does not divide E the first E mod R ranks hold one more, and with
// fewer experts than ranks some ranks hold none (they still send tokens); neither is refused,
// the report shows the loads that follow.
Placement contiguous_placement(int experts, int ranks);

// A map file, one home rank per expert, no replicas:
//   JSON {"placement": [r0, r1, ...]}, one entry per expert; or
//   CSV  `expert,rank` lines (optional header `expert,rank`, blank lines and '#' skipped).
// Every expert exactly once, every rank in 0..ranks-1. Throws usage_error naming the source
// with the line and field (CSV) or the JSON path.
Placement parse_placement(const std::string& text, const std::string& source, int experts,
                          int ranks);
Placement load_placement(const std::string& path, int experts, int ranks);

// ---- matrices ---------------------------------------------------------------------------------

// Dispatch tokens [source][destination] under `placement`. An expert with several holders
// takes turns: the j-th selection of it from source rank s goes to holders[(j + s) mod n], so
// each source splits its tokens for the expert equally (the first holders after s take the
// remainder). With per-token routing a token counts once per distinct destination; without,
// once per selection.
RankMatrix dispatch_matrix(const Routing& routing, const Placement& placement);

RankMatrix transpose(const RankMatrix& m);
RankMatrix scaled(const RankMatrix& m, uint64_t factor);  // tokens x bytes per token
uint64_t matrix_total(const RankMatrix& m);

// `total_bytes` spread evenly over all ranks x ranks pairs, self included; the remainder adds
// one byte to the first pairs in row-major order. The same traffic without the skew, to
// measure what the skew costs.
RankMatrix uniform_matrix(uint64_t total_bytes, int ranks);

struct EpTraffic {
  RankMatrix dispatch_tokens;  // [source][destination]
  RankMatrix dispatch_bytes;   // tokens x hidden x dispatch bytes per element
  RankMatrix combine_bytes;    // the transpose (outputs return to their tokens' ranks), in
                               // the combine dtype
};
EpTraffic ep_traffic(const RankMatrix& dispatch_tokens, const TokenBytes& bytes);

// ---- metrics ----------------------------------------------------------------------------------

// An expert is hot when its selections exceed this many times the mean expert's.
inline constexpr double kHotLoadFactor = 2.0;

struct RankLoad {
  uint64_t tokens_sent = 0;      // dispatch row sum, self included
  uint64_t tokens_received = 0;  // dispatch column sum, self included: the rank's expert work
  uint64_t dispatch_bytes_sent = 0, dispatch_bytes_received = 0;
  uint64_t combine_bytes_sent = 0, combine_bytes_received = 0;
};

struct ExpertLoad {
  int expert = 0;
  uint64_t selections = 0;  // over all source ranks
  double share = 0;         // of all selections
  std::vector<int> ranks;   // its holders
};

struct EpMetrics {
  std::vector<RankLoad> ranks;
  double imbalance = 0;  // over ranks' received tokens: max / mean - 1 (TensorRT-LLM's)
  double cv = 0;         // over ranks' received tokens: population stddev / mean
  int busiest_rank = 0;  // receives the most tokens (lowest on ties): the expected straggler
  std::vector<ExpertLoad> experts;      // in expert order
  std::vector<ExpertLoad> hot;          // above kHotLoadFactor x mean, busiest first
  std::vector<int> dead;                // experts no token picked
  bool dispatch_per_selection = false;  // the routing had no per-token choices (a counts file)
};

// max / mean - 1 and stddev / mean of `values`; 0 for an empty or all-zero list.
double imbalance(const std::vector<uint64_t>& values);
double coefficient_of_variation(const std::vector<uint64_t>& values);

EpMetrics ep_metrics(const Routing& routing, const Placement& placement, const EpTraffic& traffic);

// ---- replication (EPLB-style what-if) -------------------------------------------------------

struct ReplicationPlan {
  std::vector<int> replicated;  // experts given a replica, hottest first
  Placement placement;
  EpTraffic traffic;
  EpMetrics metrics;
};

// Gives each of the `hottest` most-selected experts (ties: lowest index) one more replica, on
// the rank with the least planned load that does not hold it yet (ties: lowest rank). Planned
// load is expert selections, an expert's split equally over its holders (the remainder to the
// first); it is what a rank computes and what it receives but for DeepEP's deduplication. With
// one rank there is nowhere to put a replica and the plan is the input. The traffic and
// metrics are then recounted under the new placement (dispatch_matrix's turns, per token where
// the routing has tokens). Throws usage_error naming --replicate unless 0 <= hottest <= experts.
ReplicationPlan plan_replication(const Routing& routing, const Placement& placement, int hottest,
                                 const TokenBytes& bytes);

}  // namespace commtool::tracing
