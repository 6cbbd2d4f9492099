#include "reports/doctor/doctor_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/measure/statistics.hpp"
#include "reports/doctor/doctor_report.hpp"

namespace commtool::reports::doctor {

namespace {

using nlohmann::json;

template <class T>
constexpr const char* type_word() {
  if constexpr (std::is_same_v<T, std::string>)
    return "string";
  else if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else if constexpr (std::is_integral_v<T>)
    return "whole number in range";
  else if constexpr (std::is_floating_point_v<T>)
    return "finite number";
  else
    return "list of strings";
}

// Rank 0 reads each node's page as input from another process (a node running another build is
// the likely author of a bad one): every member checked for presence, type and range.
struct PayloadReader {
  int rank;

  Error fail(const std::string& field, const std::string& why) const {
    return usage_error(
        fmt::format("rank {} sent a doctor page commtool cannot read: {}: {}", rank, field, why));
  }

  template <class T>
  T take(const json& object, const char* key, const std::string& where) const {
    const std::string field = where.empty() ? key : where + "." + key;
    const auto it = object.find(key);
    if (it == object.end()) throw fail(field, "missing");
    if (!files::json_fits<T>(*it)) throw fail(field, std::string("not a ") + type_word<T>());
    try {
      return it->template get<T>();
    } catch (const json::exception&) {
      throw fail(field, std::string("not a ") + type_word<T>());
    }
  }
};

std::optional<Severity> parse_severity(const std::string& s) {
  for (Severity v : {Severity::kPass, Severity::kUnavailable, Severity::kWarn, Severity::kFail})
    if (s == to_string(v)) return v;
  return std::nullopt;
}

json check_json(const Check& c) {
  json j{{"subject", c.subject},   {"gpu", c.gpu},
         {"area", c.area},         {"severity", to_string(c.severity)},
         {"evidence", c.evidence}, {"advice", c.advice}};
  if (c.figure) {
    j["figure"] = {
        {"gbps", c.figure->value}, {"bytes", c.figure->bytes}, {"ranks", c.figure->ranks}};
  }
  return j;
}

bool is_problem(const Check& c) {
  return c.severity == Severity::kWarn || c.severity == Severity::kFail;
}

// What makes two nodes' problems the same problem: its severity, area and GPU index (bus ids
// differ between nodes of one kind), or its subject when it is not a GPU's (a NIC, the node).
std::string problem_key(const Check& c) {
  return fmt::format("{}|{}|{}", to_string(c.severity), c.area,
                     c.gpu >= 0 ? "GPU" + std::to_string(c.gpu) : c.subject);
}

std::string group_key(const NodeDoctor& n) {
  if (!n.ok) return "not examined";
  std::vector<std::string> keys;
  for (const Check& c : n.checks)
    if (is_problem(c)) keys.push_back(problem_key(c));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return fmt::format("{}", fmt::join(keys, "\n"));
}

using FigureKey = std::tuple<std::string, int, uint64_t, int>;  // area, GPU, bytes, ranks

// Each node's figure beside the nodes' median of the same figure: under kNodeFigureShare it is
// raised to WARN. Returns whether any figure had kMinNodesToCompare nodes.
bool compare_figures(std::vector<NodeDoctor>& nodes) {
  std::map<FigureKey, std::vector<Check*>> by_key;
  for (NodeDoctor& n : nodes) {
    if (!n.ok) continue;
    for (Check& c : n.checks)
      if (c.figure && c.figure->value > 0)
        by_key[{c.area, c.gpu, c.figure->bytes, c.figure->ranks}].push_back(&c);
  }
  bool compared = false;
  for (auto& [key, checks] : by_key) {
    if (checks.size() < static_cast<size_t>(kMinNodesToCompare)) continue;
    compared = true;
    std::vector<double> values;
    for (const Check* c : checks)
      values.push_back(c->figure->value);
    const size_t n = values.size();
    const double median = measure::summarize(std::move(values)).median;
    for (Check* c : checks) {
      const double share = c->figure->value / median;
      if (share >= kNodeFigureShare) continue;
      c->evidence +=
          fmt::format("; {:.0f}% of the median {:.1f} GB/s of {} nodes", share * 100, median, n);
      if (c->severity == Severity::kPass) {
        c->severity = Severity::kWarn;
        c->advice = fmt::format(
            "this node is slower than the others at the same figure: compare its topo and doctor "
            "pages with a good node's (commtool doctor --baseline GOOD.json on this node)");
      }
    }
  }
  return compared;
}

std::string node_label(const NodeDoctor& n) {
  return fmt::format("{} (rank {})", n.host, n.rank);
}

std::string node_list(const DoctorClusterView& view, const NodeGroup& g, size_t shown) {
  std::vector<std::string> names;
  for (size_t i = 0; i < g.nodes.size() && i < shown; ++i)
    names.push_back(node_label(view.nodes[g.nodes[i]]));
  std::string out = fmt::format("{}", fmt::join(names, ", "));
  if (g.nodes.size() > shown) out += fmt::format(" and {} more", g.nodes.size() - shown);
  return out;
}

}  // namespace

NodeDoctor node_doctor(const commtool::doctor::Evidence& e, const Verdict& v, int rank) {
  NodeDoctor n;
  n.host = e.hostname;
  n.rank = rank;
  n.exit_code = exit_code(e, v);
  n.overall = v.overall;
  n.gpus = static_cast<int>(e.topology.gpus.size());
  n.seconds = e.seconds;
  n.checks = v.checks;
  n.skipped = v.skipped;
  return n;
}

std::string encode_node_doctor(const NodeDoctor& node) {
  json checks = json::array();
  for (const Check& c : node.checks)
    checks.push_back(check_json(c));
  return json{{"format", kNodeDoctorFormat},
              {"version", kNodeDoctorVersion},
              {"host", node.host},
              {"rank", node.rank},
              {"ok", node.ok},
              {"exit_code", node.exit_code},
              {"error", node.error},
              {"verdict", to_string(node.overall)},
              {"gpus", node.gpus},
              {"seconds", node.seconds},
              {"checks", checks},
              {"skipped", node.skipped}}
      // A kernel log's line may be any bytes; the page travels as valid UTF-8 all the same.
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

NodeDoctor decode_node_doctor(std::string_view bytes, int rank) {
  const PayloadReader in{rank};
  json j;
  try {
    j = files::parse_json_bounded(std::string(bytes), fmt::format("rank {}'s doctor page", rank));
  } catch (const json::exception&) {
    throw in.fail("payload", "not JSON");
  }
  if (!j.is_object()) throw in.fail("payload", "not a JSON object");
  if (j.value("format", "") != kNodeDoctorFormat || j.value("version", 0) != kNodeDoctorVersion) {
    throw in.fail("format", fmt::format("{} version {}, expected {} version {} (is every rank "
                                        "running the same commtool?)",
                                        excerpt(j.value("format", "none")), j.value("version", 0),
                                        kNodeDoctorFormat, kNodeDoctorVersion));
  }
  NodeDoctor n;
  n.host = in.take<std::string>(j, "host", "");
  n.rank = in.take<int>(j, "rank", "");
  if (n.rank != rank) throw in.fail("rank", fmt::format("{} is not the sender's", n.rank));
  n.ok = in.take<bool>(j, "ok", "");
  n.exit_code = in.take<int>(j, "exit_code", "");
  // A node that was examined has no error to send (the job's --json leaves it out).
  if (j.contains("error") || !n.ok) n.error = in.take<std::string>(j, "error", "");
  const std::string verdict = in.take<std::string>(j, "verdict", "");
  const std::optional<Severity> overall = parse_severity(verdict);
  if (!overall) throw in.fail("verdict", excerpt(verdict));
  n.overall = *overall;
  n.gpus = in.take<int>(j, "gpus", "");
  n.seconds = in.take<double>(j, "seconds", "");
  n.skipped = in.take<std::vector<std::string>>(j, "skipped", "");
  const auto checks = j.find("checks");
  if (checks == j.end() || !checks->is_array()) throw in.fail("checks", "not an array");
  for (size_t i = 0; i < checks->size(); ++i) {
    const std::string where = fmt::format("checks[{}]", i);
    const json& c = (*checks)[i];
    if (!c.is_object()) throw in.fail(where, "not an object");
    Check k;
    k.subject = in.take<std::string>(c, "subject", where);
    k.gpu = in.take<int>(c, "gpu", where);
    k.area = in.take<std::string>(c, "area", where);
    const std::string severity = in.take<std::string>(c, "severity", where);
    const std::optional<Severity> s = parse_severity(severity);
    if (!s) throw in.fail(where + ".severity", excerpt(severity));
    k.severity = *s;
    k.evidence = in.take<std::string>(c, "evidence", where);
    k.advice = in.take<std::string>(c, "advice", where);
    if (const auto f = c.find("figure"); f != c.end()) {
      if (!f->is_object()) throw in.fail(where + ".figure", "not an object");
      Figure figure{in.take<double>(*f, "gbps", where + ".figure"),
                    in.take<uint64_t>(*f, "bytes", where + ".figure"),
                    in.take<int>(*f, "ranks", where + ".figure")};
      if (figure.value < 0) throw in.fail(where + ".figure.gbps", "not a non-negative number");
      k.figure = figure;
    }
    n.checks.push_back(std::move(k));
  }
  if (n.host.empty()) throw in.fail("host", "empty");
  if (!n.ok && n.exit_code == 0)
    throw in.fail("exit_code", "0 for a node doctor could not examine");
  return n;
}

int DoctorClusterView::count(Severity s) const {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [s](const NodeDoctor& n) {
    return (n.ok ? n.overall : Severity::kFail) == s;
  }));
}

DoctorClusterView compare_doctor_nodes(std::vector<NodeDoctor> nodes, int ranks) {
  DoctorClusterView view;
  view.ranks = ranks;
  view.nodes = std::move(nodes);
  view.figures_compared = compare_figures(view.nodes);
  for (NodeDoctor& n : view.nodes) {
    if (!n.ok) continue;
    n.overall = Severity::kPass;
    for (const Check& c : n.checks)
      if (c.severity != Severity::kUnavailable) n.overall = std::max(n.overall, c.severity);
  }

  std::map<std::string, size_t> index;  // group key -> group
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const NodeDoctor& n = view.nodes[i];
    auto [it, fresh] = index.emplace(group_key(n), view.groups.size());
    if (fresh) {
      NodeGroup g;
      g.examined = n.ok;
      g.worst = n.ok ? n.overall : Severity::kFail;
      for (const Check& c : n.checks)
        if (is_problem(c)) g.problems.push_back(c);
      view.groups.push_back(std::move(g));
    }
    view.groups[it->second].nodes.push_back(i);
    view.overall = std::max(view.overall, n.ok ? n.overall : Severity::kFail);
  }
  std::stable_sort(view.groups.begin(), view.groups.end(),
                   [](const NodeGroup& a, const NodeGroup& b) {
                     if (a.worst != b.worst) return a.worst > b.worst;
                     if (a.nodes.size() != b.nodes.size()) return a.nodes.size() < b.nodes.size();
                     return a.nodes.front() < b.nodes.front();
                   });
  for (size_t g = 0; g < view.groups.size(); ++g) {
    const size_t most = view.groups[view.common].nodes.size();
    if (view.groups[g].nodes.size() > most ||
        (view.groups[g].nodes.size() == most &&
         view.groups[g].nodes.front() < view.groups[view.common].nodes.front())) {
      view.common = g;
    }
  }
  return view;
}

int cluster_exit_code(const DoctorClusterView& view) {
  const bool any_examined = std::any_of(view.nodes.begin(), view.nodes.end(), [](const auto& n) {
    return n.ok && n.exit_code != static_cast<int>(ExitCode::kEnvironment);
  });
  if (!any_examined && !view.nodes.empty()) return view.nodes.front().exit_code;
  return exit_code_of(view.overall);
}

std::string render_doctor_cluster_text(const DoctorClusterView& view, const std::string& level) {
  std::string out = fmt::format(
      "commtool doctor across {} node(s), {} MPI rank(s), level {}: {}\n  {} FAIL, {} WARN, {} "
      "PASS\n",
      view.nodes.size(), view.ranks, level, to_string(view.overall), view.count(Severity::kFail),
      view.count(Severity::kWarn), view.count(Severity::kPass));
  if (view.groups.size() > 1) {
    const size_t odd = view.nodes.size() - view.groups[view.common].nodes.size();
    out += fmt::format("  {} node(s) differ from the state {} of them share\n", odd,
                       view.groups[view.common].nodes.size());
  }
  for (size_t g = 0; g < view.groups.size(); ++g) {
    const NodeGroup& group = view.groups[g];
    const NodeDoctor& first = view.nodes[group.nodes.front()];
    out += fmt::format("\n{}  {} node(s){}: {}\n", group.examined ? to_string(group.worst) : "FAIL",
                       group.nodes.size(),
                       g == view.common && view.groups.size() > 1 ? ", common" : "",
                       node_list(view, group, 8));
    if (!group.examined) {
      out += fmt::format("  doctor could not examine it: {}\n", first.error);
      continue;
    }
    for (Severity s : {Severity::kFail, Severity::kWarn}) {
      for (const Check& c : group.problems) {
        if (c.severity != s) continue;
        out += fmt::format("  {}  {}  {}: {}\n", to_string(s), c.subject, c.area, c.evidence);
        if (!c.advice.empty()) out += "        what to do: " + c.advice + "\n";
      }
    }
    if (group.nodes.size() > 1 && !group.problems.empty()) {
      out += fmt::format("  (values as on {}; every node's own in --json)\n", first.host);
    }
  }
  if (view.nodes.size() >= static_cast<size_t>(kMinNodesToCompare) && !view.figures_compared) {
    out += "\nNo figure was measured on enough nodes to compare them\n";
  } else if (view.nodes.size() < static_cast<size_t>(kMinNodesToCompare)) {
    out += fmt::format(
        "\nFigures are compared across {} or more nodes; each node's own checks above\n",
        kMinNodesToCompare);
  }
  return out;
}

nlohmann::json doctor_cluster_to_json(const DoctorClusterView& view, const std::string& level) {
  json nodes = json::array();
  for (const NodeDoctor& n : view.nodes) {
    json checks = json::array();
    for (const Check& c : n.checks)
      checks.push_back(check_json(c));
    json j{{"host", n.host},
           {"rank", n.rank},
           {"node_ranks", n.node_ranks},
           {"ok", n.ok},
           {"exit_code", n.exit_code},
           {"verdict", n.ok ? to_string(n.overall) : "FAIL"},
           {"gpus", n.gpus},
           {"seconds", n.seconds},
           {"checks", checks},
           {"skipped", n.skipped}};
    if (!n.ok) j["error"] = n.error;
    nodes.push_back(j);
  }
  json groups = json::array();
  for (size_t g = 0; g < view.groups.size(); ++g) {
    const NodeGroup& group = view.groups[g];
    json hosts = json::array();
    for (size_t i : group.nodes)
      hosts.push_back(view.nodes[i].host);
    json problems = json::array();
    for (const Check& c : group.problems)
      problems.push_back(check_json(c));
    groups.push_back({{"verdict", group.examined ? to_string(group.worst) : "FAIL"},
                      {"common", g == view.common},
                      {"examined", group.examined},
                      {"hosts", hosts},
                      {"problems", problems}});
  }
  return json{{"schema_version", kDoctorSchemaVersion},
              {"command", "doctor"},
              {"cluster", true},
              {"verdict", to_string(view.overall)},
              {"exit_code", cluster_exit_code(view)},
              {"level", level},
              {"ranks", view.ranks},
              {"counts",
               {{"fail", view.count(Severity::kFail)},
                {"warn", view.count(Severity::kWarn)},
                {"pass", view.count(Severity::kPass)}}},
              {"figures_compared", view.figures_compared},
              {"groups", groups},
              {"nodes", nodes}};
}

}  // namespace commtool::reports::doctor
