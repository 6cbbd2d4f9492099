// `probe` under MPI, the pure half: which rank measures each node, what a node sends rank 0, and
// how rank 0 sets the nodes' figures side by side. The MPI steps are in cli/probe_cluster.cpp, on
// probes/base/cluster/per_host.hpp.
//
// One rank per node measures, and it measures that node's GPUs in turn, exactly as `commtool
// probe` does on one machine: ranks measuring side by side on one node would share its PCIe
// switches, root ports and host memory, and each would report less than its link gives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probes/bandwidth/measurement.hpp"
#include "probes/bandwidth/probe_plan.hpp"

namespace commtool::probe {

// One node's probe as its measuring rank sends it to rank 0.
struct NodeProbe {
  std::string host;
  int rank = 0;        // the MPI rank that measured
  int node_ranks = 1;  // MPI ranks on this host (filled in by rank 0)
  bool ok = true;
  int exit_code = 0;  // when !ok: the exit code of the failure
  std::string error;  // when !ok: the message, as the rank would have printed it
  int gpus = 0;       // GPUs the probe measured on this node
  std::vector<Measurement> measurements;
  std::vector<Skipped> skipped;
};

NodeProbe node_probe(const std::string& host, int rank, const ProbeReport& report);

inline constexpr const char* kNodePayloadFormat = "commtool-probe-node";
inline constexpr int kNodePayloadVersion = 1;
// An 8-GPU node with every probe sends about 0.3 MB (its samples included).
inline constexpr uint64_t kMaxNodePayloadBytes = 64ull << 20;

std::string encode_node_probe(const NodeProbe& node);
// Throws Error(kUsage) "rank R sent a probe commtool cannot read: <field>: <why>".
NodeProbe decode_node_probe(std::string_view bytes, int rank);

// One figure across the nodes that have it: the same probe, direction, engine and ends.
struct FigureAcross {
  Measurement first;  // the figure as the first node that has it measured it (for its labels)
  int nodes = 0;
  double median = 0;  // of the nodes' medians
  double lowest = 0;
  std::string lowest_host;
  double highest = 0;
  std::string highest_host;
};

// A node's figure that stands apart from the other nodes' figures of the same thing.
struct NodeOutlier {
  std::string host;
  int rank = 0;
  Measurement measurement;
  double nodes_median = 0;
  double ratio = 0;  // the node's median over the nodes' median
};

// A node without figures that most nodes have (a GPU missing, a probe not run).
struct MissingFigures {
  std::string host;
  int rank = 0;
  int count = 0;
  Measurement example;  // one of them, as another node measured it
};

// Three nodes are the fewest where one can differ from a majority.
inline constexpr int kMinNodesToCompare = 3;
// Nodes of one kind give the same figures within a few percent (H2D medians 54.3-55.4 GB/s over
// five H200 machines of one cloud): under 90% of the nodes' median is a node worth a look, and a
// link at half width or one generation down falls far below it.
inline constexpr double kNodeBandwidthShare = 0.90;
// Latencies scatter more between healthy nodes (translation misses, timer slack): 1.25x.
inline constexpr double kNodeLatencyFactor = 1.25;

struct ProbeClusterView {
  int ranks = 0;
  std::vector<NodeProbe> nodes;  // in rank order, failed ones included
  std::vector<FigureAcross> figures;
  bool compared = false;  // at least kMinNodesToCompare nodes measured
  std::vector<NodeOutlier> outliers;
  std::vector<MissingFigures> missing;
};

ProbeClusterView compare_nodes(std::vector<NodeProbe> nodes, int ranks);

// probe's exit policy, on one machine or many: a probe the user named (--p2p, --ipc) that
// measured nothing, anywhere, is exit 3. Its message ("--p2p was asked for but only one GPU: no
// pair to measure"; "... but ran on no node: ..." across nodes), or nullopt when every probe
// asked for measured somewhere.
std::optional<std::string> asked_but_not_run(const ProbeReport& report);
std::optional<std::string> asked_but_not_run(const ProbeClusterView& view);

}  // namespace commtool::probe
