// What `commtool diagnose allreduce` concludes from its sweep: per message size the fastest
// all-reduce path beside NCCL's default choice, the sizes where the winner changes, and a
// recommendation in plain words with the measured speedup and what to set to get it.
// diagnose_allreduce() is the pure part (plain structs in, plain structs out, unit-tested); the
// renderers (allreduce_report.cpp) only format it.
//
// The rules, in the order they apply at each size:
//  - Only results with status ok count. Failed verification, refused by NCCL and not applicable
//    are left out of the comparison and listed in `exclusions`, one line per path and reason.
//    A path recommended for some sizes that failed verification at others is recommended with a
//    caution naming those sizes: a wrong result is a bug in the path, not a property of a size.
//  - Ties: every valid path whose median is within `tie_tolerance` (relative) of the lowest
//    median ties with it. Among tied paths the winner is NCCL's default, then the path that asks
//    least of the user: an NCCL path forcing one variable, then one forcing two (NCCL_ALGO and
//    NCCL_PROTO), then IPC one-shot, then IPC two-shot; then the order of the input.
//  - Noise: a non-default winner's lead is only claimed when neither median lies inside the
//    other's [min, max]: the winner's slowest sample beats the default's median and the default's
//    fastest sample is slower than the winner's median. Otherwise the size is "within noise" and
//    the default stays the path to use there.
//  - Blips: a single size whose path to use differs from both neighbours' while they agree is a
//    blip: it is named in the recommendation but moves no crossover. Scanned from the smallest
//    size up, so an alternating pattern resolves to the path of the smallest size.
//  - Crossovers lie between two measured sizes; thresholds are quoted as measured sizes, never
//    interpolated (the true crossover is somewhere between; a finer sweep places it).
//  - Withheld: where no difference between the paths can be real, there is no recommendation
//    and no crossover, one sentence says why, and the table keeps only the measured facts. At
//    one rank NCCL copies whatever NCCL_ALGO/NCCL_PROTO say and the IPC paths copy too; with
//    ranks sharing a GPU every time is of processes time-slicing it over a socket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probes/base/measure/statistics.hpp"
#include "probes/base/workers/placement.hpp"
#include "tracing/allreduce/sweep.hpp"

namespace commtool::reports {

// The sweep's results are tracing's (tracing/allreduce/sweep.hpp); the diagnosis reads them.
using tracing::AllReducePath;
using tracing::AllReducePathKind;
using tracing::AllReducePoint;
using tracing::AllReducePointStatus;
using tracing::AllReduceSweep;
using tracing::forced_setting_mismatch;
using tracing::to_string;

struct AllReduceDiagnosisOptions {
  double tie_tolerance = 0.03;  // medians within 3% are a tie (usual run-to-run spread)
};

enum class SizeOutcome {
  kDefaultFastest,  // NCCL's default is fastest, or ties with the fastest
  kWin,             // another path is faster beyond ties and noise
  kWithinNoise,     // another path has the lower median, but the spreads overlap: no claim
  kNoDefault,       // NCCL's default has no valid result here: fastest without a comparison
  kNoValidPath,     // nothing valid at this size
};
const char* to_string(SizeOutcome o);  // "default-fastest", "win", ...

// Path indexes are into AllReduceSweep::paths; -1 is none.
struct SizeVerdict {
  uint64_t bytes = 0;
  int fastest = -1;       // lowest median after the tie rule
  int nccl_default = -1;  // the default, when valid here
  std::vector<int> tied;  // other valid paths within tie_tolerance of the fastest
  SizeOutcome outcome = SizeOutcome::kNoValidPath;
  double speedup = 0;     // default median / fastest median; 0 without both
  int use = -1;           // the path to use: fastest on kWin and kNoDefault, else the default
  bool blip = false;      // `use` differs from both neighbours, which agree; `use_smoothed` is
  int use_smoothed = -1;  // the neighbours' path then, else `use`
};

// The smoothed path to use changes between two consecutive sizes with valid results.
struct Crossover {
  uint64_t last_bytes_before = 0;  // the last size where `from` is the path to use
  uint64_t first_bytes_after = 0;  // the first where `to` is
  int from = -1, to = -1;
};

// Consecutive sizes with the same smoothed path to use.
struct UseRange {
  uint64_t first_bytes = 0, last_bytes = 0;
  int path = -1;
  double min_speedup = 0, max_speedup = 0;  // over the range's clear wins; 0 when none
};

struct AllReduceDiagnosis {
  double tie_tolerance = 0;
  std::vector<SizeVerdict> sizes;  // every size any path measured, ascending
  std::vector<Crossover> crossovers;
  std::vector<UseRange> ranges;
  std::vector<std::string> recommendation;  // plain sentences with their evidence
  // What to do next, as one sentence: the setting to try in the job, what to run instead when
  // the recommendation is withheld, what to look at when paths failed. Never empty.
  std::string advice;
  std::vector<std::string> exclusions;  // failed verification, refused, not applicable
  std::string withheld;  // why there is no recommendation (see above); empty when there is one
  std::vector<std::string> notes;  // how to read the figures: drift, what NCCL could not say
};

// Why no difference measured by `sweep` can support a recommendation, or "" when one can.
std::string recommendation_withheld(const workers::PlacementSummary& placement);

// The largest relative difference, |a - b| / min(a, b), of two runs' medians of one path at any
// size both measured validly: the drift between runs in separate processes, which NCCL's
// forced settings need (NCCL reads NCCL_ALGO/NCCL_PROTO once per process). 0 with no common
// size.
double run_to_run_drift(const AllReducePath& a, const AllReducePath& b);

// The diagnosis of a measured sweep (tracing::run_allreduce_sweep): the drift between NCCL's
// default run first and again last sets the tie tolerance (never below the default's 3%, at most
// 95%), and NCCL's reason for an unknown choice, the same on every row, becomes one note (the
// rows say "unknown"). Both are in `notes`.
AllReduceDiagnosis diagnose_measured_sweep(const AllReduceSweep& sweep);

// Throws usage_error for a tie_tolerance outside [0, 1), two paths marked NCCL's default, two
// points of one path at the same size, or an ok point without samples.
AllReduceDiagnosis diagnose_allreduce(const AllReduceSweep& sweep,
                                      const AllReduceDiagnosisOptions& options = {});

// The point of `path` at `bytes`, whatever its status; null when the path has none there.
const AllReducePoint* point_at(const AllReducePath& path, uint64_t bytes);

// The index of the path marked nccl_default; -1 when none is.
int nccl_default_path(const AllReduceSweep& sweep);

// Renderers (allreduce_report.cpp). A table (size, fastest path, its time, NCCL's default and its
// time, speedup, note), then the crossovers, the recommendation, the exclusions and the notes.
std::string allreduce_text(const AllReduceSweep& sweep, const AllReduceDiagnosis& diagnosis);
std::string allreduce_json(const AllReduceSweep& sweep, const AllReduceDiagnosis& diagnosis);
// `--plot`: time against size per path, log-log, valid points only.
std::string allreduce_plot_svg(const AllReduceSweep& sweep);

}  // namespace commtool::reports
