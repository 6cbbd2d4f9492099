#include "probes/topo/cluster_wire.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/topo/cluster.hpp"

namespace commtool::topo {

using nlohmann::json;

namespace {

json gpu_json(const GpuFacts& g) {
  return {{"bus_id", g.bus_id},
          {"model", g.model},
          {"numa_node", g.numa_node},
          {"pcie_width", g.pcie_width},
          {"pcie_max_gen", g.pcie_max_gen},
          {"pcie_max_width", g.pcie_max_width},
          {"nvlinks_active", g.nvlinks_active},
          {"nic", g.nic},
          {"nic_path", g.nic_path}};
}

json nic_json(const NicFacts& n) {
  return {{"key", n.key},
          {"name", n.name},
          {"kind", n.kind},
          {"port_rate_gbps", n.port_rate_gbps},
          {"numa_node", n.numa_node},
          {"pcie_width", n.pcie_width}};
}

// Reads one payload, naming the rank and the field of anything wrong.
class Reader {
 public:
  explicit Reader(int rank) : rank_(rank) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw usage_error(
        fmt::format("rank {} sent a topology commtool cannot read: {}: {}", rank_, field, why));
  }

  const json& member(const json& j, const char* key, const std::string& where) const {
    if (!j.is_object()) fail(where, "not an object");
    auto it = j.find(key);
    if (it == j.end()) fail(where + "." + key, "missing");
    return *it;
  }

  std::string text(const json& j, const char* key, const std::string& where) const {
    const json& v = member(j, key, where);
    if (!v.is_string()) fail(where + "." + key, "not a string");
    return v.get<std::string>();
  }

  int integer(const json& j, const char* key, const std::string& where, int min, int max) const {
    const json& v = member(j, key, where);
    if (!v.is_number_integer()) fail(where + "." + key, "not a whole number");
    const auto n = v.get<int64_t>();
    if (n < min || n > max) {
      fail(where + "." + key, fmt::format("{} is outside {}..{}", n, min, max));
    }
    return static_cast<int>(n);
  }

  double number(const json& j, const char* key, const std::string& where) const {
    const json& v = member(j, key, where);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      fail(where + "." + key, "not a finite number of at least 0");
    }
    return v.get<double>();
  }

  const json& array(const json& j, const char* key, const std::string& where) const {
    const json& v = member(j, key, where);
    if (!v.is_array()) fail(where + "." + key, "not an array");
    return v;
  }

  NodeFacts facts(const json& j) const {
    constexpr int kMaxNuma = 1 << 16;
    constexpr int kMaxLanes = 32;  // PCIe x32 is the widest link the specification defines
    constexpr int kMaxGen = 64;
    constexpr int kMaxNvlinks = 64;
    NodeFacts f;
    const json& gpus = array(j, "gpus", "facts");
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string at = fmt::format("facts.gpus[{}]", i);
      GpuFacts g;
      g.bus_id = text(gpus[i], "bus_id", at);
      g.model = text(gpus[i], "model", at);
      g.numa_node = integer(gpus[i], "numa_node", at, kUnknownNuma, kMaxNuma);
      g.pcie_width = integer(gpus[i], "pcie_width", at, 0, kMaxLanes);
      g.pcie_max_gen = integer(gpus[i], "pcie_max_gen", at, 0, kMaxGen);
      g.pcie_max_width = integer(gpus[i], "pcie_max_width", at, 0, kMaxLanes);
      g.nvlinks_active = integer(gpus[i], "nvlinks_active", at, -1, kMaxNvlinks);
      g.nic = text(gpus[i], "nic", at);
      g.nic_path = text(gpus[i], "nic_path", at);
      f.gpus.push_back(std::move(g));
    }
    const json& nics = array(j, "nics", "facts");
    for (size_t i = 0; i < nics.size(); ++i) {
      const std::string at = fmt::format("facts.nics[{}]", i);
      NicFacts n;
      n.key = text(nics[i], "key", at);
      n.name = text(nics[i], "name", at);
      n.kind = text(nics[i], "kind", at);
      n.port_rate_gbps = number(nics[i], "port_rate_gbps", at);
      n.numa_node = integer(nics[i], "numa_node", at, kUnknownNuma, kMaxNuma);
      n.pcie_width = integer(nics[i], "pcie_width", at, 0, kMaxLanes);
      f.nics.push_back(std::move(n));
    }
    f.nvswitches = integer(j, "nvswitches", "facts", 0, 1 << 20);
    f.driver_version = text(j, "driver_version", "facts");
    f.cuda_version = text(j, "cuda_version", "facts");
    f.nccl_version = text(j, "nccl_version", "facts");
    return f;
  }

 private:
  int rank_;
};

}  // namespace

std::string encode_rank_payload(const RankPayload& p) {
  json doc = {{"format", kRankPayloadFormat},
              {"version", kRankPayloadVersion},
              {"ok", p.ok},
              {"host", p.host}};
  if (!p.ok) {
    doc["exit_code"] = p.exit_code;
    doc["error"] = p.error;
    return doc.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  json gpus = json::array();
  for (const GpuFacts& g : p.facts.gpus)
    gpus.push_back(gpu_json(g));
  json nics = json::array();
  for (const NicFacts& n : p.facts.nics)
    nics.push_back(nic_json(n));
  doc["source"] = p.source;
  doc["facts"] = {{"gpus", gpus},
                  {"nics", nics},
                  {"nvswitches", p.facts.nvswitches},
                  {"driver_version", p.facts.driver_version},
                  {"cuda_version", p.facts.cuda_version},
                  {"nccl_version", p.facts.nccl_version}};
  doc["document"] = p.document;
  // A name read from sysfs may hold any byte; replace what is not UTF-8 rather than fail.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

RankPayload decode_rank_payload(std::string_view bytes, int rank) {
  const Reader r(rank);
  json doc;
  try {
    doc = files::parse_json_bounded(std::string(bytes), fmt::format("rank {}'s topology", rank));
  } catch (const json::exception& e) {
    r.fail("payload", fmt::format("not JSON ({})", e.what()));
  }
  if (!doc.is_object() || doc.value("format", json()) != kRankPayloadFormat) {
    r.fail("format", fmt::format("not \"{}\"", kRankPayloadFormat));
  }
  const json& version = r.member(doc, "version", "payload");
  if (version != kRankPayloadVersion) {
    r.fail("version", fmt::format("{} where this commtool reads {} (is another commtool build "
                                  "installed on that node?)",
                                  excerpt(version.dump()), kRankPayloadVersion));
  }
  RankPayload p;
  const json& ok = r.member(doc, "ok", "payload");
  if (!ok.is_boolean()) r.fail("ok", "not true or false");
  p.ok = ok.get<bool>();
  p.host = r.text(doc, "host", "payload");
  if (p.host.empty()) r.fail("host", "empty");
  if (!p.ok) {
    p.exit_code = r.integer(doc, "exit_code", "payload", 1, 255);
    p.error = r.text(doc, "error", "payload");
    return p;
  }
  p.source = r.text(doc, "source", "payload");
  p.facts = r.facts(r.member(doc, "facts", "payload"));
  p.document = r.text(doc, "document", "payload");
  return p;
}

std::vector<RankPayload> decode_rank_payloads(const std::vector<std::string>& gathered) {
  std::vector<RankPayload> out;
  std::vector<int> failed;
  for (size_t r = 0; r < gathered.size(); ++r) {
    out.push_back(decode_rank_payload(gathered[r], static_cast<int>(r)));
    if (!out.back().ok) failed.push_back(static_cast<int>(r));
  }
  if (failed.empty()) return out;
  const RankPayload& first = out[static_cast<size_t>(failed.front())];
  std::string message = fmt::format("rank {} on {}: {}", failed.front(), first.host, first.error);
  if (failed.size() > 1) {
    message += fmt::format(" (and {} more rank(s) failed: ranks {})", failed.size() - 1,
                           rank_ranges(std::vector<int>(failed.begin() + 1, failed.end())));
  }
  throw Error(static_cast<ExitCode>(first.exit_code), message);
}

}  // namespace commtool::topo
