#include "reports/doctor/baseline.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "reports/doctor/doctor_report.hpp"

namespace commtool::reports::doctor {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw usage_error(fmt::format("{}: {}", excerpt(source), what));
}

double number_at(const json& j, const char* key, const std::string& where,
                 const std::string& source) {
  const json* v = files::find_member(j, key);
  if (!v || !v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0) {
    bad(source, fmt::format("{}.{}: not a non-negative number", where, key));
  }
  return v->get<double>();
}

}  // namespace

Baseline parse_baseline(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = files::parse_json_bounded(text, source);
  } catch (const json::exception& e) {
    bad(source, fmt::format("not JSON ({})", e.what()));
  }
  if (!doc.is_object()) bad(source, "not a doctor --json document (not an object)");
  const json* command = files::find_member(doc, "command");
  if (!command || !command->is_string() || command->get<std::string>() != "doctor") {
    bad(source, fmt::format("not a doctor --json document (command {})",
                            command ? excerpt(command->dump()) : "missing"));
  }
  const json* version = files::find_member(doc, "schema_version");
  if (!version || !version->is_number_integer() ||
      version->get<int64_t>() != kDoctorSchemaVersion) {
    bad(source, fmt::format("schema_version {}: this commtool reads {}",
                            version ? excerpt(version->dump()) : "missing", kDoctorSchemaVersion));
  }
  Baseline b;
  b.source = source;
  if (const json* h = files::find_member(doc, "host"); h && h->is_string())
    b.host = h->get<std::string>();
  if (const json* t = files::find_member(doc, "started_at"); t && t->is_string()) {
    b.started_at = t->get<std::string>();
  }
  if (const json* cluster = files::find_member(doc, "cluster"); cluster && *cluster == true) {
    bad(source,
        "a page of doctor under MPI (cluster: true), not one node's: give the doctor --json of a "
        "good node, run on that node without the launcher");
  }
  const json* checks = files::find_member(doc, "checks");
  if (!checks || !checks->is_array()) bad(source, "checks: not an array");
  for (size_t i = 0; i < checks->size(); ++i) {
    const json& c = (*checks)[i];
    const std::string where = fmt::format("checks[{}]", i);
    if (!c.is_object()) bad(source, where + ": not an object");
    const json* figure = files::find_member(c, "figure");
    if (!figure) continue;
    if (!figure->is_object()) bad(source, where + ".figure: not an object");
    const json* area = files::find_member(c, "area");
    if (!area || !area->is_string()) bad(source, where + ".area: not a string");
    BaselineFigure f;
    f.area = area->get<std::string>();
    if (const json* gpu = files::find_member(c, "gpu")) {
      if (!gpu->is_number_integer()) bad(source, where + ".gpu: not a whole number");
      f.gpu = gpu->get<int>();
    }
    f.figure.value = number_at(*figure, "gbps", where + ".figure", source);
    f.figure.bytes = static_cast<uint64_t>(number_at(*figure, "bytes", where + ".figure", source));
    if (files::find_member(*figure, "ranks")) {
      f.figure.ranks = static_cast<int>(number_at(*figure, "ranks", where + ".figure", source));
    }
    b.figures.push_back(f);
  }
  return b;
}

Baseline load_baseline(const std::string& path) {
  return parse_baseline(files::read_input_file(path, 64ull << 20), path);
}

void compare_with_baseline(Verdict& verdict, const Baseline& baseline) {
  const std::string whose =
      fmt::format("the baseline ({}{})", baseline.host.empty() ? baseline.source : baseline.host,
                  baseline.started_at.empty() ? "" : ", " + baseline.started_at);
  for (Check& c : verdict.checks) {
    if (!c.figure || c.figure->value <= 0) continue;
    const BaselineFigure* match = nullptr;
    for (const BaselineFigure& b : baseline.figures) {
      if (b.gpu == c.gpu && b.area == c.area && b.figure.bytes == c.figure->bytes &&
          b.figure.ranks == c.figure->ranks) {
        match = &b;
      }
    }
    if (!match || match->figure.value <= 0) continue;
    const double share = c.figure->value / match->figure.value;
    if (share < kBaselineLowShare) {
      c.evidence += fmt::format("; LOW against {}: {:.0f}% of its {:.1f} GB/s", whose, 100 * share,
                                match->figure.value);
      if (c.severity == Severity::kPass || c.severity == Severity::kUnavailable) {
        c.severity = Severity::kWarn;
        c.advice =
            "this node is slower than the good one: compare their doctor --json "
            "(counters, topology) and `commtool topo` side by side";
      }
    } else {
      c.evidence +=
          fmt::format("; {:.0f}% of {}'s {:.1f} GB/s", 100 * share, whose, match->figure.value);
    }
  }
  verdict.overall = Severity::kPass;
  for (const Check& c : verdict.checks)
    if (c.severity != Severity::kUnavailable)
      verdict.overall = std::max(verdict.overall, c.severity);
}

}  // namespace commtool::reports::doctor
