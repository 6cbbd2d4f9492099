// The cluster view of `topo` under MPI, as pure logic: which ranks are one node, which
// configuration most nodes share (the common one), and how every other configuration differs
// from it, each difference with its evidence. No MPI and no I/O here; tests feed it facts.
//
// A node is a host and the source its topology was read from: the ranks of one host that read
// the same source (the live /sys) and found the same facts are one node. Ranks of one host that
// read different files (captures replayed with --sysfs-root DIR%r), or found different facts,
// are different nodes, labelled host/rank.
//
// Work and output grow with the number of nodes: nodes are grouped by a fingerprint of their
// facts (one hash lookup each), and differences are worked out once per configuration, not per
// node or per pair of nodes.
#pragma once

#include <string>
#include <vector>

#include "probes/topo/cluster_wire.hpp"
#include "probes/topo/node_facts.hpp"

namespace commtool::topo {

struct ClusterNode {
  std::string label;  // the host, or host/rank when the host holds several nodes
  std::string host;
  std::string source;
  std::vector<int> ranks;    // ascending
  size_t configuration = 0;  // index into ClusterView::configurations
};

// Shaped as a topo finding (classify.hpp: Finding), without a severity: every difference is
// worth a look. The advice names what to run or check on the nodes that differ; never empty
// (tests/test_cluster.cpp).
struct Difference {
  std::string code;      // stable id for scripts: "gpu-missing", "pcie-width-below-common", ...
  std::string message;   // what differs, in one line
  std::string evidence;  // the values on both sides
  std::string advice;    // what to do next on the nodes that differ
};

struct Configuration {
  NodeFacts facts;
  std::vector<size_t> nodes;  // indices into ClusterView::nodes, ascending
  int ranks = 0;
  // How it differs from the common configuration; empty for the common one.
  std::vector<Difference> differences;
};

struct ClusterView {
  int ranks = 0;
  int hosts = 0;
  std::vector<ClusterNode> nodes;  // in the order of their first rank
  // The common configuration first, then the others in the order of their first node.
  std::vector<Configuration> configurations;
  // The common configuration is the one most nodes have; between equals, the one with more
  // ranks, then the one whose first rank is lowest. It is configurations[0].
  size_t differing_nodes() const;
};

// ranks[r] is what rank r sent; every one must be ok (the caller reports failed ranks first).
ClusterView compare_cluster(const std::vector<RankPayload>& ranks);

// How `node` differs from `common`, most telling first: devices missing or added, then links,
// placement, then versions.
std::vector<Difference> differences(const NodeFacts& common, const NodeFacts& node);

// "0-2,5,7-9" for ascending ranks.
std::string rank_ranges(const std::vector<int>& ranks);

}  // namespace commtool::topo
