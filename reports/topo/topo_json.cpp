#include "reports/topo/topo_report.hpp"

namespace commtool::reports {

using namespace commtool::topo;
using nlohmann::json;

namespace {

json numa_json(int numa) {
  return numa == kUnknownNuma ? json(nullptr) : json(numa);
}
json positive_or_null(int v) {
  return v > 0 ? json(v) : json(nullptr);
}
json positive_or_null(double v) {
  return v > 0 ? json(v) : json(nullptr);
}
json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json link_json(const PcieLink& l) {
  return {{"current_gen", positive_or_null(l.current_gen)},
          {"current_width", positive_or_null(l.current_width)},
          {"max_gen", positive_or_null(l.max_gen)},
          {"max_width", positive_or_null(l.max_width)},
          {"port_max_gen", positive_or_null(l.port_max_gen)},
          {"port_max_width", positive_or_null(l.port_max_width)}};
}

json gpus_json(const Topology& topo, const Analysis& a) {
  json out = json::array();
  for (size_t i = 0; i < topo.gpus.size(); ++i) {
    const Gpu& g = topo.gpus[i];
    const GpuLinkRates& r = a.rates[i];
    // 0 GB/s is a fact only when the links are known and none is up; with active links of an
    // unknown generation the rate is unknown.
    json nvlink_gbps = !g.nvlinks_known                                  ? json(nullptr)
                       : r.nvlink_active > 0 && r.nvlink_generation == 0 ? json(nullptr)
                                                                         : json(r.nvlink_gbps);
    json links = json::array();
    for (const NvLink& l : g.nvlinks) {
      links.push_back({{"link", l.link},
                       {"active", l.active},
                       {"generation", positive_or_null(l.generation)},
                       {"nvml_version", positive_or_null(l.nvml_version)},
                       {"peer", to_string(l.peer)},
                       {"peer_bus_id", l.peer_bdf.empty() ? json(nullptr) : json(l.peer_bdf)}});
    }
    out.push_back({{"index", g.index},
                   {"cuda_ordinal", g.cuda_ordinal >= 0 ? json(g.cuda_ordinal) : json(nullptr)},
                   {"bus_id", g.bdf},
                   {"name", text_or_null(g.name)},
                   {"kernel_driver", g.kernel_driver ? json(*g.kernel_driver) : json(nullptr)},
                   {"sm", positive_or_null(g.sm)},
                   {"numa_node", numa_json(g.numa_node)},
                   {"cpu_affinity", g.cpu_affinity},
                   {"pcie", link_json(g.pcie)},
                   {"expected",
                    {{"pcie_raw_gbps", positive_or_null(r.pcie_raw_gbps)},
                     {"pcie_payload_gbps", positive_or_null(r.pcie_payload_gbps)},
                     {"pcie_current_raw_gbps", positive_or_null(r.pcie_current_raw_gbps)},
                     {"nvlink_active", g.nvlinks_known ? json(r.nvlink_active) : json(nullptr)},
                     {"nvlink_generation", positive_or_null(r.nvlink_generation)},
                     {"nvlink_gbps", nvlink_gbps}}},
                   {"nvlinks", g.nvlinks_known ? links : json(nullptr)}});
  }
  return out;
}

json nics_json(const Topology& topo) {
  json out = json::array();
  for (const Nic& n : topo.nics) {
    out.push_back(
        {{"index", n.index},
         {"name", text_or_null(n.name)},
         {"kind", to_string(n.kind)},
         {"bus_id", n.bdf.empty() ? json(nullptr) : json(n.bdf)},
         {"numa_node", numa_json(n.numa_node)},
         {"port_rate_gbit", n.port_rate_gbps > 0 ? json(n.port_rate_gbps) : json(nullptr)},
         {"netdevs", n.netdevs},
         {"pcie", link_json(n.pcie)}});
  }
  return out;
}

json tree_json(const Topology& topo) {
  json roots = json::array();
  for (const RootComplex& rc : topo.root_complexes) {
    roots.push_back(
        {{"id", rc.id}, {"numa_node", numa_json(rc.numa_node)}, {"cpu_affinity", rc.cpu_affinity}});
  }
  json pci = json::array();
  for (const PciNode& n : topo.pci) {
    char cls[16];
    std::snprintf(cls, sizeof cls, "0x%06x", n.class_code);
    pci.push_back({{"bus_id", n.bdf},
                   {"class", cls},
                   {"vendor", n.vendor},
                   {"device", n.device},
                   {"parent", n.parent_bdf.empty() ? json(nullptr) : json(n.parent_bdf)},
                   {"root_complex", n.root_complex},
                   {"numa_node", numa_json(n.numa_node)},
                   {"acs_p2p_redirect",
                    n.acs_p2p_redirect < 0 ? json(nullptr) : json(n.acs_p2p_redirect == 1)},
                   {"link", link_json(n.link)}});
  }
  json switches = json::array();
  for (const NvSwitch& s : topo.nvswitches)
    switches.push_back(s.bdf);
  return {{"root_complexes", roots}, {"pci", pci}, {"nvswitches", switches}};
}

// As `nvidia-smi topo -m` up to kMatrixListedUpTo devices; past them the cells are null and
// the pairs are counted by path, so the document grows with the devices, not their square.
json matrix_json(const Topology& topo, const ConnectionMatrix& m) {
  if (m.labels.size() > kMatrixListedUpTo) {
    const MatrixSummary summary = summarise_matrix(m, topo.gpus.size());
    auto counts = [](const std::vector<PathCount>& listed) {
      json out = json::array();
      for (const PathCount& p : listed)
        out.push_back({{"path", label(p.connection)}, {"pairs", p.pairs}});
      return out;
    };
    return {{"labels", m.labels},
            {"cells", nullptr},
            {"pairs_by_path",
             {{"gpu_gpu", counts(summary.gpu_gpu)}, {"gpu_nic", counts(summary.gpu_nic)}}}};
  }
  json cells = json::array();
  for (const auto& row : m.cells) {
    json r = json::array();
    for (const Connection& c : row)
      r.push_back(label(c));
    cells.push_back(r);
  }
  return {{"labels", m.labels}, {"cells", cells}};
}

json analysis_json(const Topology& topo, const Analysis& a) {
  json pairing = json::array();
  for (const NicPairing& p : a.nic_pairing) {
    pairing.push_back(
        {{"gpu", p.gpu},
         {"nic", p.nic >= 0 ? json(p.nic) : json(nullptr)},
         {"nic_name",
          p.nic >= 0 ? text_or_null(topo.nics[static_cast<size_t>(p.nic)].name) : json(nullptr)},
         {"path", p.nic >= 0 ? json(label(p.path)) : json(nullptr)}});
  }
  json p2p = json::array();
  for (const P2pVerdict& v : a.p2p) {
    p2p.push_back(
        {{"gpus", {v.gpu_a, v.gpu_b}},
         {"known", v.known},
         {"access", v.known ? json(v.can_access) : json(nullptr)},
         {"performance_rank", v.performance_rank >= 0 ? json(v.performance_rank) : json(nullptr)},
         {"native_atomics", v.known ? json(v.native_atomics) : json(nullptr)},
         {"reason", v.reason}});
  }
  json findings = json::array();
  for (const Finding& f : a.findings) {
    findings.push_back({{"severity", f.severity == Severity::kWarning ? "warning" : "note"},
                        {"code", f.code},
                        {"message", f.message},
                        {"evidence", f.evidence},
                        {"advice", f.advice}});
  }
  return {{"matrix", matrix_json(topo, a.matrix)},
          {"nic_pairing", pairing},
          {"p2p", p2p},
          {"p2p_summary", a.p2p_summary.empty() ? json(nullptr) : json(a.p2p_summary)},
          {"findings", findings}};
}

}  // namespace

json topo_to_json(const Topology& topo, const Analysis& analysis) {
  json missing = json::array();
  for (const Missing& m : topo.missing)
    missing.push_back({{"what", m.what}, {"why", m.why}});
  json doc = {
      {"schema_version", kTopoSchemaVersion},
      {"command", "topo"},
      {"source", topo.source},
      {"driver_version", topo.driver_version.empty() ? json(nullptr) : json(topo.driver_version)},
      {"nvml_available", topo.nvml_available},
      {"cuda_queried", topo.cuda_queried},
      {"cuda_available", topo.cuda_queried ? json(topo.cuda_available) : json(nullptr)},
      {"virtual_machine", topo.in_vm},
      {"numa_nodes", topo.numa_node_count > 0 ? json(topo.numa_node_count) : json(nullptr)},
      {"iommu_groups", topo.iommu_groups >= 0 ? json(topo.iommu_groups) : json(nullptr)},
      {"gpus", gpus_json(topo, analysis)},
      {"nics", nics_json(topo)},
      {"missing", missing}};
  doc.update(tree_json(topo));
  doc.update(analysis_json(topo, analysis));
  return doc;
}

}  // namespace commtool::reports
