// Words and small figures the ep analysis and its renderers both use. Internal to reports/ep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reports/ep/ep_report.hpp"

namespace commtool::reports::ep_words {

inline constexpr double kMiB = 1024.0 * 1024.0;
// A measured ratio within this of 1 is reported as no measurable difference: on the H200,
// identical exchanges measured in turns gave medians 0.91-1.04x apart over 20 operations.
inline constexpr double kNoise = 0.10;
// Rank imbalance (max/mean - 1 of received tokens) from which it is a warning, not a note: the
// busiest rank has a fifth more to receive, and compute, than the mean rank, and every other
// rank waits for it. Uniform routing of DeepSeek-V3's defaults gives about 0.01.
inline constexpr double kImbalanceWarning = 0.20;
// How rarely a generated routing that favours no rank may still cross imbalance_noise().
inline constexpr double kImbalanceNoiseOdds = 1e-6;

// The rank imbalance that a generated routing's own draws explain, below which imbalance is no
// finding. With no rank favoured, each of the ranks x tokens_per_rank tokens lands on a rank
// independently with one probability p (one of its top-k picks is among the rank's experts),
// so a rank's received tokens are Binomial(N, p), mean N p, variance N p (1 - p). Bernstein's
// inequality bounds the chance that any of the R ranks exceeds the mean by t at
// kImbalanceNoiseOdds: t = L/3 + sqrt(L^2/9 + 2 L N p (1 - p)), L = ln(R / kImbalanceNoiseOdds);
// the bound is t / (N p), p estimated from the mean received. It shrinks as 1/sqrt(tokens).
// Measured over 300 seeds of uniform routing (diagnose ep --dry-run, 2026-12-07): at
// DeepSeek-V3's defaults (8 ranks, 4096 tokens, 256 experts, top-8) the bound is 0.023 and the
// imbalance 0.0057 median, 0.014 at most; at 16 tokens per rank 0.42 against 0.21 at most (a
// warning before this bound); at 1 token 2.8 against 0.73; from 2 to 64 ranks and top-1 to
// top-8 no seed passed 0.62 of the bound. 0 for routing read from counts: those are the model's,
// and their imbalance is that batch's.
double imbalance_noise(const EpSetup& s);

// What a generated routing's own draws explain per expert. With no expert favoured, each of the
// N = ranks x tokens_per_rank tokens picks an expert with probability p = topk / experts, so its
// selections are Binomial(N, p), mean N p.
// - `hot_above`: the selections any of the E experts may reach by chance, by Bernstein's bound
//   at kImbalanceNoiseOdds as for ranks: N p + L/3 + sqrt(L^2/9 + 2 L N p (1 - p)),
//   L = ln(E / odds). An expert over 2x the mean but not over this is hot by chance.
// - `dead_up_to`: the most experts chance leaves unpicked: the largest k whose Chernoff bound
//   e^-D (e D / k)^k is still over the odds, D = E (1 - p)^N the expected count (whether each
//   expert is unpicked are negatively associated events, balls in bins, for which Chernoff's
//   bound for independent ones holds).
// At DeepSeek-V3's defaults (32,768 tokens, 256 experts, top-8) the mean expert has 1,024
// selections, hot_above is about 1,227 (under 2x the mean: a hot expert is never chance) and
// dead_up_to 0; at 4 tokens per rank on 8 ranks the mean is 1 selection: chance leaves about
// 93 experts unpicked (up to 147) and puts some over 2x the mean. Neither applies to counts read
// from a file (`generated` false): those are the model's, and what they show is that batch's.
struct ExpertNoise {
  bool generated = false;
  double mean = 0;       // selections of the mean expert
  double hot_above = 0;  // selections
  int dead_up_to = 0;    // experts
};
ExpertNoise expert_noise(const EpSetup& s);

std::string mib(uint64_t bytes);                      // "296.21"
std::string and_list(const std::vector<int>& v);      // "1, 2 and 3"
std::string expert_ranges(std::vector<int> experts);  // contiguous runs: "0-31", "3, 7-9"
std::vector<std::vector<int>> experts_by_rank(const tracing::Placement& p);
const ScenarioFigures* find(const EpDiagnosis& d, tracing::EpScenarioKind kind);  // or null
double ratio(const PhaseFigures& a, const PhaseFigures& b);  // a's median time over b's; 0: none

}  // namespace commtool::reports::ep_words
