#include <fmt/format.h>

#include <map>
#include <set>

#include "probes/base/tool_packages.hpp"
#include "reports/topo/topo_report.hpp"

namespace commtool::reports {

using namespace commtool::topo;

namespace {

// Text inside a DOT double-quoted string: names come from files and drivers, so a quote or a
// backslash in one must not end the string (or inject attributes), and control characters,
// which dot would print raw, are dropped.
std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out += c;
    }
  }
  return out;
}

std::string id(const std::string& s) {
  return "\"" + escaped(s) + "\"";
}

}  // namespace

// PCIe as a tree of solid edges from each root complex down; NVLinks as bold undirected edges
// labelled with their link count. `dot -Tsvg` draws it.
std::string render_topo_dot(const Topology& topo) {
  // A DOT comment, so that whoever holds the file knows what draws it.
  std::string out = fmt::format(
      "// commtool topo --dot: draw it with `dot -Tsvg -o topo.svg` (dot is in {})\n"
      "graph commtool_topo {{\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n",
      tools::kGraphviz);
  for (const RootComplex& rc : topo.root_complexes) {
    out += fmt::format("  {} [shape=box3d, label=\"{}\\nNUMA {}\"];\n", id(rc.id), escaped(rc.id),
                       rc.numa_node == kUnknownNuma ? "unknown" : std::to_string(rc.numa_node));
  }
  std::set<std::string> named;
  for (const Gpu& g : topo.gpus) {
    out += fmt::format(
        "  {} [shape=box, style=filled, fillcolor=\"#b7e1a1\", "
        "label=\"GPU{}\\n{}\\n{}\"];\n",
        id(g.bdf), g.index, escaped(g.name), escaped(g.bdf));
    named.insert(g.bdf);
  }
  for (const Nic& n : topo.nics) {
    std::string node = n.bdf.empty() ? "nic:" + n.name : n.bdf;
    if (named.insert(node).second) {
      out += fmt::format(
          "  {} [shape=box, style=filled, fillcolor=\"#a9c8ef\", "
          "label=\"NIC{} {}\\n{}\"];\n",
          id(node), n.index, escaped(n.name), escaped(n.bdf));
    }
    if (n.bdf.empty()) out += fmt::format("  {} -- {};\n", id(n.root_complex), id(node));
  }
  for (const NvSwitch& s : topo.nvswitches) {
    if (named.insert(s.bdf).second) {
      out += fmt::format("  {} [shape=octagon, label=\"NVSwitch\\n{}\"];\n", id(s.bdf),
                         escaped(s.bdf));
    }
  }
  for (const PciNode& n : topo.pci) {
    if (!named.count(n.bdf)) {
      out += fmt::format("  {} [shape=ellipse, label=\"{}\"];\n", id(n.bdf), escaped(n.bdf));
    }
    std::string parent = n.parent_bdf.empty() ? n.root_complex : n.parent_bdf;
    std::string link =
        n.link.max_gen > 0 ? fmt::format("Gen{} x{}", n.link.max_gen, n.link.max_width) : "";
    out += fmt::format("  {} -- {} [label=\"{}\"];\n", id(parent), id(n.bdf), link);
  }
  for (const Gpu& g : topo.gpus) {
    std::map<std::string, int> per_peer;
    for (const NvLink& l : g.nvlinks) {
      if (l.active && !l.peer_bdf.empty()) ++per_peer[l.peer_bdf];
    }
    for (const auto& [peer, count] : per_peer) {
      // A GPU-GPU bundle appears in both GPUs' lists: draw it once.
      if (topo.find_gpu_by_bdf(peer) && peer < g.bdf) continue;
      out += fmt::format("  {} -- {} [color=\"#76b900\", penwidth=3, label=\"NV{}\"];\n", id(g.bdf),
                         id(peer), count);
    }
  }
  return out + "}\n";
}

}  // namespace commtool::reports
