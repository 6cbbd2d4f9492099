#include "reports/allreduce/allreduce_diagnosis.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "probes/base/error.hpp"
#include "probes/base/measure/byte_size.hpp"

namespace commtool::reports {

namespace {

using Status = AllReducePointStatus;

const AllReducePoint* valid_point(const AllReducePath& path, uint64_t bytes) {
  const AllReducePoint* p = point_at(path, bytes);
  return p != nullptr && p->status == Status::kOk ? p : nullptr;
}

// The tie-break order: what a user has to do to get the path (lower asks less).
int effort(const AllReducePath& p) {
  switch (p.kind) {
    case AllReducePathKind::kNccl:
      if (p.nccl_default) return 0;
      return p.nccl_algo.empty() || p.nccl_proto.empty() ? 1 : 2;
    case AllReducePathKind::kIpcOneShot:
      return 3;
    case AllReducePathKind::kIpcTwoShot:
      return 4;
  }
  return 5;
}

std::string size_name(uint64_t bytes) {
  return measure::format_byte_size(bytes);
}

// "1 MiB", "1 MiB and 2 MiB", "1 MiB, 2 MiB and 4 MiB"; "9 sizes from 4 KiB to 1 GiB" past 4.
std::string size_list(const std::vector<uint64_t>& sizes) {
  if (sizes.size() > 4) {
    return fmt::format("{} sizes from {} to {}", sizes.size(), size_name(sizes.front()),
                       size_name(sizes.back()));
  }
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += i + 1 == sizes.size() ? " and " : ", ";
    out += size_name(sizes[i]);
  }
  return out;
}

std::string speedup_text(double lo, double hi) {
  const std::string a = fmt::format("{:.2f}x", lo), b = fmt::format("{:.2f}x", hi);
  return a == b ? a : fmt::format("{}-{}", a, b);
}

std::string percent(double fraction) {
  return fmt::format("{:g}%", 100.0 * fraction);
}

void validate(const AllReduceSweep& sweep, const AllReduceDiagnosisOptions& options) {
  if (!(options.tie_tolerance >= 0 && options.tie_tolerance < 1)) {
    throw usage_error(fmt::format("tie tolerance {}: takes a fraction in [0, 1), e.g. 0.03",
                                  options.tie_tolerance));
  }
  int defaults = 0;
  for (const AllReducePath& path : sweep.paths) {
    defaults += path.nccl_default ? 1 : 0;
    std::set<uint64_t> seen;
    for (const AllReducePoint& p : path.points) {
      if (!seen.insert(p.bytes).second) {
        throw usage_error(
            fmt::format("all-reduce path {}: two results at {}", path.name, size_name(p.bytes)));
      }
      if (p.status == Status::kOk && (p.time_us.n <= 0 || !(p.time_us.median > 0))) {
        throw usage_error(fmt::format("all-reduce path {} at {}: ok but no time measured",
                                      path.name, size_name(p.bytes)));
      }
    }
  }
  if (defaults > 1) {
    throw usage_error(
        fmt::format("{} all-reduce paths marked as NCCL's default: at most one", defaults));
  }
}

SizeVerdict verdict_at(const AllReduceSweep& sweep, uint64_t bytes, double tolerance) {
  SizeVerdict v;
  v.bytes = bytes;
  const auto median = [&](int i) {
    return valid_point(sweep.paths[static_cast<size_t>(i)], bytes)->time_us.median;
  };
  std::vector<int> valid;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < sweep.paths.size(); ++i) {
    if (valid_point(sweep.paths[i], bytes) == nullptr) continue;
    valid.push_back(static_cast<int>(i));
    best = std::min(best, median(static_cast<int>(i)));
  }
  if (valid.empty()) return v;  // kNoValidPath

  std::vector<int> tied;
  for (int i : valid) {
    if (median(i) <= best * (1 + tolerance)) tied.push_back(i);
  }
  // Stable: equal effort keeps the input order.
  std::stable_sort(tied.begin(), tied.end(), [&](int a, int b) {
    return effort(sweep.paths[static_cast<size_t>(a)]) <
           effort(sweep.paths[static_cast<size_t>(b)]);
  });
  v.fastest = tied.front();
  v.tied.assign(tied.begin() + 1, tied.end());
  std::sort(v.tied.begin(), v.tied.end());

  const int d = nccl_default_path(sweep);
  if (d >= 0 && valid_point(sweep.paths[static_cast<size_t>(d)], bytes) != nullptr) {
    v.nccl_default = d;
  }
  if (v.nccl_default < 0) {
    v.outcome = SizeOutcome::kNoDefault;
    v.use = v.fastest;
    return v;
  }
  const measure::Summary& f =
      valid_point(sweep.paths[static_cast<size_t>(v.fastest)], bytes)->time_us;
  const measure::Summary& def = valid_point(sweep.paths[static_cast<size_t>(d)], bytes)->time_us;
  v.speedup = def.median / f.median;
  if (v.fastest == d) {
    v.outcome = SizeOutcome::kDefaultFastest;
    v.use = d;
  } else if (f.max < def.median && def.min > f.median) {
    v.outcome = SizeOutcome::kWin;
    v.use = v.fastest;
  } else {
    v.outcome = SizeOutcome::kWithinNoise;
    v.use = d;
  }
  return v;
}

// The blip rule of the header, from the smallest size up, over sizes with a valid result.
void smooth(std::vector<SizeVerdict>& sizes) {
  std::vector<SizeVerdict*> seq;
  for (SizeVerdict& v : sizes) {
    v.use_smoothed = v.use;
    if (v.use >= 0) seq.push_back(&v);
  }
  for (size_t i = 1; i + 1 < seq.size(); ++i) {
    const int before = seq[i - 1]->use_smoothed;
    if (seq[i]->use != before && seq[i + 1]->use == before) {
      seq[i]->use_smoothed = before;
      seq[i]->blip = true;
    }
  }
}

void ranges_and_crossovers(AllReduceDiagnosis& d) {
  for (const SizeVerdict& v : d.sizes) {
    if (v.use_smoothed < 0) continue;
    if (d.ranges.empty() || d.ranges.back().path != v.use_smoothed) {
      if (!d.ranges.empty()) {
        d.crossovers.push_back(
            {d.ranges.back().last_bytes, v.bytes, d.ranges.back().path, v.use_smoothed});
      }
      d.ranges.push_back({v.bytes, v.bytes, v.use_smoothed, 0, 0});
    }
    UseRange& r = d.ranges.back();
    r.last_bytes = v.bytes;
    if (v.outcome == SizeOutcome::kWin && v.fastest == r.path) {
      r.min_speedup = r.min_speedup == 0 ? v.speedup : std::min(r.min_speedup, v.speedup);
      r.max_speedup = std::max(r.max_speedup, v.speedup);
    }
  }
}

// "up to 128 KiB", "from 256 KiB to 2 MiB", "at 4 MiB", "from 8 MiB".
std::string span(const AllReduceDiagnosis& d, size_t i) {
  const UseRange& r = d.ranges[i];
  if (d.ranges.size() == 1) {
    return fmt::format("at every size measured ({} to {})", size_name(r.first_bytes),
                       size_name(r.last_bytes));
  }
  if (i == 0) return fmt::format("up to {}", size_name(r.last_bytes));
  if (i + 1 == d.ranges.size()) return fmt::format("from {}", size_name(r.first_bytes));
  if (r.first_bytes == r.last_bytes) return fmt::format("at {}", size_name(r.first_bytes));
  return fmt::format("from {} to {}", size_name(r.first_bytes), size_name(r.last_bytes));
}

// What NCCL's default ran over a range: " (Ring/LL)", " (Ring/LL, Ring/Simple)", or "".
std::string default_ran(const AllReduceSweep& sweep, const AllReduceDiagnosis& d,
                        const UseRange& r) {
  std::vector<std::string> ran;
  for (const SizeVerdict& v : d.sizes) {
    if (v.bytes < r.first_bytes || v.bytes > r.last_bytes || v.nccl_default < 0) continue;
    const tracing::NcclChoice& choice =
        valid_point(sweep.paths[static_cast<size_t>(v.nccl_default)], v.bytes)->nccl_ran;
    const std::string what = choice.known() ? to_string(choice) : "";
    if (!what.empty() && std::find(ran.begin(), ran.end(), what) == ran.end()) {
      ran.push_back(what);
    }
  }
  return ran.empty() ? "" : fmt::format(" ({})", fmt::join(ran, ", "));
}

// What to do to get a range's path; empty for NCCL's default.
std::string setting(const AllReducePath& p, const AllReduceDiagnosis& d, size_t i) {
  const UseRange& r = d.ranges[i];
  if (p.kind == AllReducePathKind::kNccl) {
    std::vector<std::string> vars;
    if (!p.nccl_algo.empty()) vars.push_back("NCCL_ALGO=" + p.nccl_algo);
    if (!p.nccl_proto.empty()) vars.push_back("NCCL_PROTO=" + p.nccl_proto);
    if (vars.empty()) return "";
    return fmt::format(
        "set {} (process-wide: it applies to every all-reduce of every size in the process, "
        "not only these)",
        fmt::join(vars, " "));
  }
  std::string which;
  if (d.ranges.size() == 1) {
    which = "every all-reduce";
  } else if (i == 0) {
    which = fmt::format("all-reduces of at most {} bytes", r.last_bytes);
  } else if (i + 1 == d.ranges.size()) {
    which = fmt::format("all-reduces of at least {} bytes", r.first_bytes);
  } else if (r.first_bytes == r.last_bytes) {
    which = fmt::format("all-reduces of {} bytes", r.first_bytes);
  } else {
    which = fmt::format("all-reduces from {} to {} bytes", r.first_bytes, r.last_bytes);
  }
  return fmt::format(
      "route {} to a custom {} path (a size threshold in your own code; NCCL has no setting "
      "for it)",
      which, p.name);
}

std::string range_sentence(const AllReduceSweep& sweep, const AllReduceDiagnosis& d, size_t i) {
  const UseRange& r = d.ranges[i];
  const AllReducePath& p = sweep.paths[static_cast<size_t>(r.path)];
  if (p.nccl_default) {
    return fmt::format("{} NCCL's default{} is fastest", span(d, i), default_ran(sweep, d, r));
  }
  std::string out;
  if (r.max_speedup > 0) {
    // The evidence: the size of the largest clear win, with both medians.
    const SizeVerdict* peak = nullptr;
    for (const SizeVerdict& v : d.sizes) {
      if (v.bytes >= r.first_bytes && v.bytes <= r.last_bytes && v.outcome == SizeOutcome::kWin &&
          v.fastest == r.path && (peak == nullptr || v.speedup > peak->speedup)) {
        peak = &v;
      }
    }
    out = fmt::format(
        "{} use {}: {} faster than NCCL's default{} here (at {}: {:.1f} vs {:.1f} us median)",
        span(d, i), p.name, speedup_text(r.min_speedup, r.max_speedup), default_ran(sweep, d, r),
        size_name(peak->bytes), valid_point(p, peak->bytes)->time_us.median,
        valid_point(sweep.paths[static_cast<size_t>(peak->nccl_default)], peak->bytes)
            ->time_us.median);
  } else {
    out = fmt::format(
        "{} use {}: the fastest, with no valid result from NCCL's default to "
        "compare",
        span(d, i), p.name);
  }
  const std::string how = setting(p, d, i);
  if (!how.empty()) out += "; to get it, " + how;
  // A wrong result anywhere is a bug in the path, not a property of one size.
  std::vector<uint64_t> failed;
  for (const AllReducePoint& point : p.points) {
    if (point.status == Status::kFailedVerification) failed.push_back(point.bytes);
  }
  std::sort(failed.begin(), failed.end());
  if (!failed.empty()) {
    out += fmt::format("; caution: it failed verification at {}", size_list(failed));
  }
  return out;
}

// Grouped per path: where a path's lower median was within noise, where it tied with the
// default and the default was kept, where a single size was taken as a blip.
std::vector<std::string> notes(const AllReduceSweep& sweep, const AllReduceDiagnosis& d) {
  std::map<int, std::vector<uint64_t>> noise, tie;
  std::vector<std::string> out;
  for (const SizeVerdict& v : d.sizes) {
    if (v.outcome == SizeOutcome::kWithinNoise) noise[v.fastest].push_back(v.bytes);
    if (v.outcome == SizeOutcome::kDefaultFastest) {
      for (int t : v.tied)
        tie[t].push_back(v.bytes);
    }
  }
  for (const auto& [path, sizes] : tie) {
    out.push_back(fmt::format(
        "{} ties with NCCL's default (medians within {}) at {}: the default "
        "is kept",
        sweep.paths[static_cast<size_t>(path)].name, percent(d.tie_tolerance), size_list(sizes)));
  }
  for (const auto& [path, sizes] : noise) {
    out.push_back(
        fmt::format("{} has a lower median than NCCL's default at {}, but within noise "
                    "(one's median lies inside the other's [min, max]): no win claimed",
                    sweep.paths[static_cast<size_t>(path)].name, size_list(sizes)));
  }
  for (const SizeVerdict& v : d.sizes) {
    if (!v.blip) continue;
    out.push_back(fmt::format(
        "at {} the path to use is {} ({}), a single size between sizes where {} is: a blip, "
        "not a crossover",
        size_name(v.bytes), sweep.paths[static_cast<size_t>(v.use)].name, to_string(v.outcome),
        sweep.paths[static_cast<size_t>(v.use_smoothed)].name));
  }
  return out;
}

std::vector<std::string> recommend(const AllReduceSweep& sweep, const AllReduceDiagnosis& d) {
  if (d.ranges.empty()) return {"no path has a valid result at any size: nothing to recommend"};
  std::vector<int> valid_paths;
  for (size_t i = 0; i < sweep.paths.size(); ++i) {
    const std::vector<AllReducePoint>& points = sweep.paths[i].points;
    if (std::any_of(points.begin(), points.end(),
                    [](const AllReducePoint& p) { return p.status == Status::kOk; })) {
      valid_paths.push_back(static_cast<int>(i));
    }
  }
  if (valid_paths.size() == 1) {
    return {fmt::format("only {} has valid results ({} to {}): nothing to compare it with",
                        sweep.paths[static_cast<size_t>(valid_paths.front())].name,
                        size_name(d.ranges.front().first_bytes),
                        size_name(d.ranges.back().last_bytes))};
  }
  std::vector<std::string> out;
  const int def = nccl_default_path(sweep);
  if (std::none_of(d.sizes.begin(), d.sizes.end(),
                   [](const SizeVerdict& v) { return v.nccl_default >= 0; })) {
    out.push_back(
        "NCCL's default has no valid result: the fastest path per size, with no speedup over it");
  }
  if (d.ranges.size() == 1 && d.ranges.front().path == def) {
    out.push_back(fmt::format(
        "NCCL's default is fastest at every size measured ({} to {}): "
        "nothing to change",
        size_name(d.ranges.front().first_bytes), size_name(d.ranges.front().last_bytes)));
  } else {
    for (size_t i = 0; i < d.ranges.size(); ++i)
      out.push_back(range_sentence(sweep, d, i));
  }
  for (std::string& n : notes(sweep, d))
    out.push_back(std::move(n));
  return out;
}

std::string exclusion_sentence(const AllReducePath& p, Status status, const std::string& reason,
                               const std::vector<uint64_t>& sizes) {
  const std::string where =
      sizes.size() == p.points.size() ? "every size measured" : size_list(sizes);
  switch (status) {
    case Status::kFailedVerification:
      return fmt::format("{} failed verification at {}{}: excluded", p.name, where,
                         reason.empty() ? "" : fmt::format(" ({})", reason));
    case Status::kRefused:
      return fmt::format("{} refused by NCCL at {}{}", p.name, where,
                         reason.empty() ? "" : ": " + reason);
    default:
      return fmt::format("{} not applicable at {}{}", p.name, where,
                         reason.empty() ? "" : ": " + reason);
  }
}

// One line per path, status and reason, sizes ascending.
std::vector<std::string> exclusions(const AllReduceSweep& sweep) {
  std::vector<std::string> out;
  for (const AllReducePath& path : sweep.paths) {
    std::vector<const AllReducePoint*> points;
    for (const AllReducePoint& p : path.points)
      points.push_back(&p);
    std::sort(points.begin(), points.end(),
              [](const auto* a, const auto* b) { return a->bytes < b->bytes; });
    std::vector<std::pair<std::pair<Status, std::string>, std::vector<uint64_t>>> groups;
    for (const AllReducePoint* p : points) {
      if (p->status == Status::kOk) continue;
      const auto key = std::pair{p->status, p->reason};
      auto g =
          std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == key; });
      if (g == groups.end()) g = groups.insert(groups.end(), {key, {}});
      g->second.push_back(p->bytes);
    }
    for (const auto& [key, sizes] : groups)
      out.push_back(exclusion_sentence(path, key.first, key.second, sizes));
  }
  return out;
}

// The next step: after a withheld recommendation, the run that can give one; with failed paths,
// where their reasons are; with a path to switch to, how to try it in the job.
std::string advice(const AllReduceSweep& sweep, const AllReduceDiagnosis& d) {
  if (sweep.placement.ranks == 1) {
    return "run it again on 2 or more GPUs of one machine (one rank per GPU) to compare the paths";
  }
  if (!d.withheld.empty()) {
    return fmt::format(
        "run it again with one rank per GPU (--devices naming {} different GPUs) "
        "to compare the paths",
        sweep.placement.ranks);
  }
  std::vector<std::string> failed;
  for (const AllReducePath& p : sweep.paths) {
    if (std::any_of(p.points.begin(), p.points.end(), [](const AllReducePoint& point) {
          return point.status == Status::kFailedVerification;
        })) {
      failed.push_back(p.name);
    }
  }
  const std::string failures =
      failed.empty() ? ""
                     : fmt::format(
                           "; {} returned wrong data: a bug in that path, to report with "
                           "this run's --json output",
                           fmt::join(failed, " and "));
  const size_t valid = std::count_if(sweep.paths.begin(), sweep.paths.end(), [](const auto& p) {
    return std::any_of(p.points.begin(), p.points.end(),
                       [](const AllReducePoint& point) { return point.status == Status::kOk; });
  });
  if (valid < 2) {
    return "read why the paths failed under Excluded or not run; NCCL_DEBUG=WARN makes NCCL say "
           "why it refused one" +
           failures;
  }
  // The largest clear win of an NCCL setting, and of a path of the job's own.
  const UseRange* nccl = nullptr;
  const UseRange* own = nullptr;
  for (const UseRange& r : d.ranges) {
    const AllReducePath& p = sweep.paths[static_cast<size_t>(r.path)];
    if (p.nccl_default) continue;
    const UseRange*& best = p.kind == AllReducePathKind::kNccl ? nccl : own;
    if (best == nullptr || r.max_speedup > best->max_speedup) best = &r;
  }
  std::vector<std::string> steps;
  if (nccl != nullptr) {
    const AllReducePath& p = sweep.paths[static_cast<size_t>(nccl->path)];
    std::vector<std::string> vars;
    if (!p.nccl_algo.empty()) vars.push_back("NCCL_ALGO=" + p.nccl_algo);
    if (!p.nccl_proto.empty()) vars.push_back("NCCL_PROTO=" + p.nccl_proto);
    steps.push_back(fmt::format(
        "try {} in the job's environment (before it starts: NCCL reads it once per process) and "
        "compare the job's step time with and without: it changes every all-reduce, not only "
        "{} to {}",
        fmt::join(vars, " "), size_name(nccl->first_bytes), size_name(nccl->last_bytes)));
  }
  if (own != nullptr) {
    steps.push_back(fmt::format(
        "the gain from {} to {} needs an all-reduce of the job's own ({}, behind a size "
        "threshold): weigh it against NCCL's default, which needs nothing",
        size_name(own->first_bytes), size_name(own->last_bytes),
        sweep.paths[static_cast<size_t>(own->path)].name));
  }
  if (steps.empty()) {
    steps.push_back(
        "nothing to change: leave NCCL_ALGO and NCCL_PROTO unset (unset them where the job sets "
        "them)");
  }
  return fmt::format("{}", fmt::join(steps, "; ")) + failures;
}

}  // namespace

const AllReducePoint* point_at(const AllReducePath& path, uint64_t bytes) {
  for (const AllReducePoint& p : path.points) {
    if (p.bytes == bytes) return &p;
  }
  return nullptr;
}

int nccl_default_path(const AllReduceSweep& sweep) {
  for (size_t i = 0; i < sweep.paths.size(); ++i) {
    if (sweep.paths[i].nccl_default) return static_cast<int>(i);
  }
  return -1;
}

const char* to_string(SizeOutcome o) {
  switch (o) {
    case SizeOutcome::kDefaultFastest:
      return "default-fastest";
    case SizeOutcome::kWin:
      return "win";
    case SizeOutcome::kWithinNoise:
      return "within-noise";
    case SizeOutcome::kNoDefault:
      return "no-default";
    case SizeOutcome::kNoValidPath:
      return "no-valid-path";
  }
  return "?";
}

double run_to_run_drift(const AllReducePath& a, const AllReducePath& b) {
  double drift = 0;
  for (const AllReducePoint& p : a.points) {
    const AllReducePoint* q = valid_point(b, p.bytes);
    if (p.status != AllReducePointStatus::kOk || q == nullptr) continue;
    const double lo = std::min(p.time_us.median, q->time_us.median);
    if (lo > 0) drift = std::max(drift, std::abs(p.time_us.median - q->time_us.median) / lo);
  }
  return drift;
}

AllReduceDiagnosis diagnose_allreduce(const AllReduceSweep& sweep,
                                      const AllReduceDiagnosisOptions& options) {
  validate(sweep, options);
  AllReduceDiagnosis d;
  d.tie_tolerance = options.tie_tolerance;
  std::set<uint64_t> sizes;
  for (const AllReducePath& path : sweep.paths) {
    for (const AllReducePoint& p : path.points)
      sizes.insert(p.bytes);
  }
  for (uint64_t bytes : sizes)
    d.sizes.push_back(verdict_at(sweep, bytes, options.tie_tolerance));
  smooth(d.sizes);
  ranges_and_crossovers(d);
  d.exclusions = exclusions(sweep);
  d.withheld = recommendation_withheld(sweep.placement);
  if (!d.withheld.empty()) {
    d.recommendation = {d.withheld};
    d.crossovers.clear();
    d.ranges.clear();
    d.advice = advice(sweep, d);
    return d;
  }
  d.recommendation = recommend(sweep, d);
  d.advice = advice(sweep, d);
  return d;
}

std::string recommendation_withheld(const workers::PlacementSummary& placement) {
  if (placement.ranks == 1) {
    return "withheld: at one rank NCCL copies instead of running an algorithm, so NCCL_ALGO and "
           "NCCL_PROTO change nothing and the IPC paths copy too; the differences above are "
           "between copies and run-to-run drift, not paths: run on 2 or more GPUs";
  }
  return workers::shared_gpu_withheld(placement);
}

namespace {

// NCCL's reason for an unknown choice is the same on every row: said once, in the notes.
void note_unknown_choice(const AllReducePath& path, std::vector<std::string>& notes) {
  for (const AllReducePoint& p : path.points) {
    if (p.nccl_ran.known() || p.nccl_ran.unknown_why.empty()) continue;
    const std::string note = "what NCCL ran is " + to_string(p.nccl_ran);
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
}

}  // namespace

AllReduceDiagnosis diagnose_measured_sweep(const AllReduceSweep& sweep) {
  std::vector<std::string> notes;
  for (const AllReducePath& path : sweep.paths)
    note_unknown_choice(path, notes);
  note_unknown_choice(sweep.default_again, notes);
  AllReduceDiagnosisOptions options;
  const int nccl_default = nccl_default_path(sweep);
  const double drift =
      nccl_default < 0
          ? 0
          : run_to_run_drift(sweep.paths[static_cast<size_t>(nccl_default)], sweep.default_again);
  // Not capped low: on the H200 at one rank the two runs of the default differed by up to 72%
  // at small sizes, and a 1.3x "win" inside such drift would be a false claim.
  options.tie_tolerance = std::clamp(drift, options.tie_tolerance, 0.95);
  notes.push_back(fmt::format(
      "NCCL's default, run first and again last, differed by up to {:.1f}% at one size: "
      "medians within {:.1f}% are ties",
      100 * drift, 100 * options.tie_tolerance));
  AllReduceDiagnosis d = diagnose_allreduce(sweep, options);
  d.notes = std::move(notes);
  return d;
}

}  // namespace commtool::reports
