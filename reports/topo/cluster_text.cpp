#include <fmt/format.h>

#include <map>

#include "reports/topo/cluster_report.hpp"

namespace commtool::reports {

using namespace commtool::topo;

namespace {

constexpr size_t kLineWidth = 100;

std::string or_unknown(const std::string& s) {
  return s.empty() ? "unknown" : s;
}

std::string plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string node_item(const ClusterNode& n) {
  const std::string ranks = (n.ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(n.ranks);
  // The live machine needs no mention; a file replayed for the node does.
  if (n.source == "sysfs:/sys") return fmt::format("{} ({})", n.label, ranks);
  return fmt::format("{} ({}, {})", n.label, ranks, n.source);
}

// The nodes of a configuration, as many to a line as fit: one line per node at worst.
std::string node_list(const ClusterView& view, const Configuration& c, const std::string& indent) {
  std::string out, line;
  for (size_t i : c.nodes) {
    std::string item = node_item(view.nodes[i]);
    if (!line.empty() && line.size() + 2 + item.size() > kLineWidth) {
      out += indent + line + ",\n";
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + item;
  }
  return out + indent + line + "\n";
}

}  // namespace

std::string summarise(const NodeFacts& f) {
  std::map<std::string, int> models;
  for (const GpuFacts& g : f.gpus)
    ++models[g.model];
  std::string gpus;
  for (const auto& [model, count] : models)
    gpus += fmt::format("{}{}x {}", gpus.empty() ? "" : ", ", count, model);
  return fmt::format("{} GPU(s){}, {} NIC(s), {} NVSwitch(es); NVIDIA driver {}, CUDA {}, NCCL {}",
                     f.gpus.size(), gpus.empty() ? "" : " (" + gpus + ")", f.nics.size(),
                     f.nvswitches, or_unknown(f.driver_version), or_unknown(f.cuda_version),
                     or_unknown(f.nccl_version));
}

std::string render_cluster_text(const ClusterView& view, const std::vector<RankPayload>& ranks) {
  const size_t nodes = view.nodes.size();
  std::string out =
      fmt::format("commtool topo: cluster of {}, {} on {}\n", plural(nodes, "node", "nodes"),
                  plural(static_cast<size_t>(view.ranks), "MPI rank", "MPI ranks"),
                  plural(static_cast<size_t>(view.hosts), "host", "hosts"));
  if (view.configurations.empty()) return out;
  const Configuration& common = view.configurations[0];
  const size_t differing = view.differing_nodes();
  if (nodes == 1) {
    out += "Verdict: one node, so nothing to compare it with\n";
  } else if (differing == 0) {
    out += fmt::format("Verdict: all {} nodes have the same configuration\n", nodes);
  } else {
    out += fmt::format("Verdict: {} of {} differ{} from the common configuration\n", differing,
                       plural(nodes, "node", "nodes"), differing == 1 ? "s" : "");
  }
  out += fmt::format("\nCommon configuration: {} of {} ({} of {})\n  {}\n", common.nodes.size(),
                     plural(nodes, "node", "nodes"), common.ranks,
                     plural(static_cast<size_t>(view.ranks), "rank", "ranks"),
                     summarise(common.facts));

  if (differing > 0) out += "\nNodes that differ\n";
  for (size_t c = 1; c < view.configurations.size(); ++c) {
    const Configuration& other = view.configurations[c];
    out += node_list(view, other, "  ");
    out += fmt::format("    {}\n    {}:\n", summarise(other.facts),
                       plural(other.differences.size(), "difference", "differences"));
    for (const Difference& d : other.differences) {
      out += fmt::format("    [{}] {}\n", d.code, d.message);
      out += fmt::format("        evidence: {}\n", d.evidence);
      if (!d.advice.empty()) out += fmt::format("        what to do: {}\n", d.advice);
    }
  }

  const ClusterNode& first = view.nodes[common.nodes.front()];
  const auto rank = static_cast<size_t>(first.ranks.front());
  out += fmt::format("\nCommon topology, as rank {} read it on {} (the same on {}):\n\n", rank,
                     first.label, plural(common.nodes.size(), "node", "nodes"));
  out += ranks[rank].document;
  return out;
}

}  // namespace commtool::reports
