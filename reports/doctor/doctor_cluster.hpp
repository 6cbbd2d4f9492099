// `doctor` under MPI, the pure half: what each node's examining rank sends rank 0, and one page
// for the whole job. The MPI steps are in cli/doctor_cluster.cpp, on
// probes/base/cluster/per_host.hpp (one rank per host examines it, as doctor does on one
// machine: two examinations at once on one node would slow each other's copies).
//
// The page grows with the number of distinct states, not of nodes: nodes whose problems are the
// same (the same severity, area and GPU index or subject, whatever the values) are one group, and
// the group most nodes are in is the common state. A node's figure (a copy, the all-reduce)
// under kNodeFigureShare of the same figure's median over the nodes is raised to WARN, so a node
// that is merely slower than the others stands apart even when it passes its own checks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "reports/doctor/doctor_checks.hpp"

namespace commtool::reports::doctor {

// One node's examination, as its rank sends it.
struct NodeDoctor {
  std::string host;
  int rank = 0;        // the MPI rank that examined it
  int node_ranks = 1;  // MPI ranks on this host (filled in by rank 0)
  bool ok = true;      // doctor ran to its verdict, whatever the verdict
  int exit_code = 0;   // doctor's on this node (0, 6, 7, 3), or the failure's when !ok
  std::string error;   // when !ok: why doctor could not examine the node
  Severity overall = Severity::kPass;
  int gpus = 0;
  double seconds = 0;
  std::vector<Check> checks;
  std::vector<std::string> skipped;
};

NodeDoctor node_doctor(const commtool::doctor::Evidence& e, const Verdict& v, int rank);

inline constexpr const char* kNodeDoctorFormat = "commtool-doctor-node";
inline constexpr int kNodeDoctorVersion = 1;
// An 8-GPU node with 8 NICs sends about 40 kB of checks.
inline constexpr uint64_t kMaxNodeDoctorBytes = 16ull << 20;

std::string encode_node_doctor(const NodeDoctor& node);
// Throws Error(kUsage) "rank R sent a doctor page commtool cannot read: <field>: <why>".
NodeDoctor decode_node_doctor(std::string_view bytes, int rank);

// Nodes that measured a figure give it within a few percent of each other when healthy (probe's
// copies: 54.3-55.4 GB/s over five H200 machines); under 90% of the nodes' median is worth a look.
inline constexpr double kNodeFigureShare = 0.90;
// Three nodes are the fewest where one can differ from a majority.
inline constexpr int kMinNodesToCompare = 3;

// Nodes with the same problems. `problems` are the first node's WARN and FAIL checks (its
// values); the others' own values are in their NodeDoctor.
struct NodeGroup {
  std::vector<size_t> nodes;  // indices into DoctorClusterView::nodes, ascending
  Severity worst = Severity::kPass;
  std::vector<Check> problems;
  bool examined = true;  // false: doctor could not run on these nodes (NodeDoctor::ok false)
};

struct DoctorClusterView {
  int ranks = 0;
  std::vector<NodeDoctor> nodes;  // in rank order
  // Worst first; within a severity the smaller groups (the odd nodes out) first, then by first
  // rank. `common` is the index of the group most nodes are in.
  std::vector<NodeGroup> groups;
  size_t common = 0;
  bool figures_compared = false;  // kMinNodesToCompare nodes had figures
  Severity overall = Severity::kPass;
  int count(Severity s) const;  // nodes whose verdict is s (a node not examined counts as FAIL)
};

DoctorClusterView compare_doctor_nodes(std::vector<NodeDoctor> nodes, int ranks);

// The job's exit code: every node without a GPU (or not examined, with one failure) gives that
// node's own code; otherwise the worst verdict's (7 a FAIL, 6 a WARN, 0 all passed).
int cluster_exit_code(const DoctorClusterView& view);

std::string render_doctor_cluster_text(const DoctorClusterView& view, const std::string& level);
nlohmann::json doctor_cluster_to_json(const DoctorClusterView& view, const std::string& level);

}  // namespace commtool::reports::doctor
