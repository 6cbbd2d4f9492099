// The renderers of allreduce_diagnosis.hpp: they format a diagnosis and decide nothing.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "probes/base/measure/byte_size.hpp"
#include "reports/allreduce/allreduce_diagnosis.hpp"
#include "reports/format/summary_format.hpp"
#include "reports/format/svg_plot.hpp"
#include "reports/format/text_table.hpp"

namespace commtool::reports {

namespace {

using nlohmann::json;

std::string size_name(uint64_t bytes) {
  return measure::format_byte_size(bytes);
}

std::string times(const measure::Summary& s) {
  return fmt::format("{:.1f} [{:.1f}-{:.1f}]", s.median, s.min, s.max);
}

std::string percent(double fraction) {
  return fmt::format("{:g}%", 100.0 * fraction);
}

std::string path_name(const AllReduceSweep& sweep, int i) {
  return i < 0 ? "-" : sweep.paths[static_cast<size_t>(i)].name;
}

std::string size_note(const AllReduceSweep& sweep, const AllReduceDiagnosis& d,
                      const SizeVerdict& v) {
  std::vector<std::string> parts;
  switch (v.outcome) {
    case SizeOutcome::kWithinNoise:
      parts.push_back("within noise: no win claimed");
      break;
    case SizeOutcome::kNoDefault:
      parts.push_back("no valid default");
      break;
    case SizeOutcome::kNoValidPath:
      parts.push_back("no valid result");
      break;
    default:
      break;
  }
  if (!v.tied.empty()) {
    std::vector<std::string> names;
    for (int t : v.tied)
      names.push_back(path_name(sweep, t));
    parts.push_back(
        fmt::format("tie within {}: {}", percent(d.tie_tolerance), fmt::join(names, ", ")));
  }
  if (v.blip) parts.push_back("blip");
  return fmt::format("{}", fmt::join(parts, "; "));
}

// What NCCL ran as the JSON says it: its ways, "unknown" (the reason is in "notes"), or "" for
// a point NCCL never ran (an IPC path, a setting that failed).
std::string ran_json(const tracing::NcclChoice& c) {
  if (c.known()) return to_string(c);
  return c.unknown_why.empty() ? "" : "unknown";
}

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

// commtool's IPC kernels per size: time and the rate of the bytes they read and write (empty
// when no IPC path has a valid point).
std::string ipc_kernel_table(const AllReduceSweep& sweep) {
  std::vector<const AllReducePath*> ipc;
  for (const AllReducePath& path : sweep.paths) {
    if (path.kind != AllReducePathKind::kNccl) ipc.push_back(&path);
  }
  std::vector<uint64_t> sizes;
  for (const AllReducePath* path : ipc) {
    for (const AllReducePoint& p : path->points) {
      if (p.status == AllReducePointStatus::kOk && p.kernel_gbps) sizes.push_back(p.bytes);
    }
  }
  if (sizes.empty()) return "";
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<std::string> head{"size"};
  for (const AllReducePath* path : ipc) {
    head.push_back(path->name + " us");
    head.push_back("GB/s");
  }
  TextTable t(head);
  for (uint64_t b : sizes) {
    std::vector<std::string> row{size_name(b)};
    for (const AllReducePath* path : ipc) {
      const AllReducePoint* p = point_at(*path, b);
      if (p == nullptr || p->status != AllReducePointStatus::kOk || !p->kernel_gbps) {
        row.insert(row.end(), {"-", "-"});
        continue;
      }
      row.push_back(times(p->time_us));
      row.push_back(fmt::format("{:.1f}", *p->kernel_gbps));
    }
    t.add_row(std::move(row));
  }
  return "\ncommtool's IPC kernels (GB/s: bytes one rank's kernel reads plus writes per call, "
         "over the median)\n" +
         t.render();
}

json path_index_json(const AllReduceSweep& sweep, int i) {
  return i < 0 ? json(nullptr) : json(sweep.paths[static_cast<size_t>(i)].name);
}

}  // namespace

std::string allreduce_text(const AllReduceSweep& sweep, const AllReduceDiagnosis& d) {
  std::string out;
  if (std::string label = workers::shared_gpu_label(sweep.placement); !label.empty()) {
    out += label + "\n\n";
  }
  out += fmt::format(
      "commtool diagnose allreduce: {} rank(s), {}; time per operation in us, median [min-max]; "
      "ties within {}\n",
      sweep.placement.ranks, sweep.dtype, percent(d.tie_tolerance));
  const int def = nccl_default_path(sweep);
  TextTable t({"size", "fastest", "time us", "busbw GB/s", "NCCL default ran", "time us", "speedup",
               "note"});
  for (const SizeVerdict& v : d.sizes) {
    std::vector<std::string> row{size_name(v.bytes), path_name(sweep, v.fastest)};
    if (v.fastest >= 0) {
      const AllReducePoint* f = point_at(sweep.paths[static_cast<size_t>(v.fastest)], v.bytes);
      row.push_back(times(f->time_us));
      row.push_back(fmt::format("{:.1f}", f->busbw_gbps));
    } else {
      row.insert(row.end(), {"-", "-"});
    }
    const AllReducePoint* p =
        def >= 0 ? point_at(sweep.paths[static_cast<size_t>(def)], v.bytes) : nullptr;
    if (p == nullptr) {
      row.insert(row.end(), {"-", "-"});
    } else if (p->status != AllReducePointStatus::kOk) {
      row.insert(row.end(), {to_string(p->status), "-"});
    } else {
      row.push_back(p->nccl_ran.known() ? to_string(p->nccl_ran) : "unknown");
      row.push_back(times(p->time_us));
    }
    // Withheld: the medians stay (they are what was measured), the claims go.
    const bool claims = d.withheld.empty();
    row.push_back(claims && v.speedup > 0 ? fmt::format("{:.2f}x", v.speedup) : "-");
    row.push_back(claims ? size_note(sweep, d, v) : "");
    t.add_row(std::move(row));
  }
  out += "\nFastest path per size (speedup: NCCL default's median / fastest median)\n" + t.render();
  out += ipc_kernel_table(sweep);

  out += "\nCrossovers\n";
  if (!d.withheld.empty()) {
    out += "  withheld (see the recommendation)\n";
  } else if (d.crossovers.empty()) {
    out += "  none\n";
  }
  for (const Crossover& c : d.crossovers) {
    out += fmt::format("  between {} and {}: {} -> {}\n", size_name(c.last_bytes_before),
                       size_name(c.first_bytes_after), path_name(sweep, c.from),
                       path_name(sweep, c.to));
  }
  out += "\nRecommendation\n";
  for (const std::string& s : d.recommendation)
    out += fmt::format("  - {}\n", s);
  out += fmt::format("  what to do: {}\n", d.advice);
  if (!d.exclusions.empty()) {
    out += "\nExcluded or not run\n";
    for (const std::string& s : d.exclusions)
      out += fmt::format("  - {}\n", s);
  }
  if (!d.notes.empty()) {
    out += "\nNotes\n";
    for (const std::string& n : d.notes)
      out += "  - " + n + "\n";
  }
  return out;
}

std::string allreduce_json(const AllReduceSweep& sweep, const AllReduceDiagnosis& d) {
  json paths = json::array();
  for (const AllReducePath& path : sweep.paths) {
    json points = json::array();
    for (const AllReducePoint& p : path.points) {
      points.push_back({{"bytes", p.bytes},
                        {"status", to_string(p.status)},
                        {"time_us", summary_json(p.time_us)},
                        {"busbw_gbps", p.busbw_gbps},
                        {"nccl_ran", ran_json(p.nccl_ran)},
                        {"kernel_bytes_read_written", optional_json(p.kernel_bytes)},
                        {"kernel_gbps", optional_json(p.kernel_gbps)},
                        {"reason", p.reason}});
    }
    paths.push_back({{"name", path.name},
                     {"kind", to_string(path.kind)},
                     {"nccl_default", path.nccl_default},
                     {"nccl_algo", path.nccl_algo},
                     {"nccl_proto", path.nccl_proto},
                     {"points", points}});
  }
  json sizes = json::array();
  for (const SizeVerdict& v : d.sizes) {
    json tied = json::array();
    for (int i : v.tied)
      tied.push_back(path_index_json(sweep, i));
    sizes.push_back({{"bytes", v.bytes},
                     {"fastest", path_index_json(sweep, v.fastest)},
                     {"nccl_default", path_index_json(sweep, v.nccl_default)},
                     {"tied", tied},
                     {"outcome", to_string(v.outcome)},
                     {"speedup", v.speedup},
                     {"use", path_index_json(sweep, v.use)},
                     {"use_smoothed", path_index_json(sweep, v.use_smoothed)},
                     {"blip", v.blip}});
  }
  json crossovers = json::array();
  for (const Crossover& c : d.crossovers) {
    crossovers.push_back({{"last_bytes_before", c.last_bytes_before},
                          {"first_bytes_after", c.first_bytes_after},
                          {"from", path_index_json(sweep, c.from)},
                          {"to", path_index_json(sweep, c.to)}});
  }
  json ranges = json::array();
  for (const UseRange& r : d.ranges) {
    ranges.push_back({{"first_bytes", r.first_bytes},
                      {"last_bytes", r.last_bytes},
                      {"path", path_index_json(sweep, r.path)},
                      {"min_speedup", r.min_speedup},
                      {"max_speedup", r.max_speedup}});
  }
  json out = {{"ranks", sweep.placement.ranks},
              {"rank_placement", workers::to_json(sweep.placement)},
              {"withheld", d.withheld.empty() ? json(nullptr) : json(d.withheld)},
              {"dtype", sweep.dtype},
              {"tie_tolerance", d.tie_tolerance},
              {"paths", paths},
              {"sizes", sizes},
              {"crossovers", crossovers},
              {"ranges", ranges},
              {"recommendation", d.recommendation},
              {"advice", d.advice},
              {"exclusions", d.exclusions}};
  if (!d.notes.empty()) out["notes"] = d.notes;
  return out.dump(2) + "\n";
}

std::string allreduce_plot_svg(const AllReduceSweep& sweep) {
  LinePlot plot;
  plot.title = fmt::format("all-reduce of {} at {} rank(s): time per call (median)", sweep.dtype,
                           sweep.placement.ranks);
  plot.x_label = "message size per rank";
  plot.y_label = "time";
  plot.x_unit = AxisUnit::Bytes;
  plot.y_unit = AxisUnit::Microseconds;
  for (const AllReducePath& path : sweep.paths) {
    PlotSeries s;
    s.name = path.name;
    for (const AllReducePoint& p : path.points) {
      if (p.status == AllReducePointStatus::kOk) {
        s.points.push_back({static_cast<double>(p.bytes), p.time_us.median});
      }
    }
    std::sort(s.points.begin(), s.points.end(),
              [](const auto& a, const auto& b) { return a.x < b.x; });
    plot.series.push_back(std::move(s));
  }
  return render_line_plot_svg(plot);
}

}  // namespace commtool::reports
