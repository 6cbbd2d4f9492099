#include "probes/health/thresholds.hpp"

#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/parse_number.hpp"
#include "probes/base/trim.hpp"

namespace commtool::health {

namespace {

constexpr const char* kDcgm = "DCGM 4.6 ";

struct Field {
  std::string name;
  std::function<double&(Thresholds&)> at;
  std::string source;
};

std::vector<Field> fields() {
  std::vector<Field> out;
  for (int gen = 1; gen <= 6; ++gen) {
    out.push_back({fmt::format("pcie_replays_per_lane_minute.gen{}", gen),
                   [gen](Thresholds& t) -> double& { return t.pcie_replays_per_lane_minute[gen]; },
                   std::string(kDcgm) + "GetExpectedPcieReplayRate (speed x BER 1e-12 x 60 s)"});
  }
  const auto add = [&](const char* name, double Thresholds::*member, std::string source) {
    out.push_back(
        {name, [member](Thresholds& t) -> double& { return t.*member; }, std::move(source)});
  };
  add("nvlink_crc_warn", &Thresholds::nvlink_crc_warn,
      std::string(kDcgm) + "DCGM_LIMIT_MAX_NVLINK_ERROR");
  add("nvlink_crc_fail_per_s", &Thresholds::nvlink_crc_fail_per_s,
      std::string(kDcgm) + "DCGM_LIMIT_MAX_NVLINK_CRC_ERROR");
  add("nvlink_replay_fail", &Thresholds::nvlink_replay_fail,
      std::string(kDcgm) + "MonitorNVLink: replay errors are failures");
  add("nvlink_recovery_fail", &Thresholds::nvlink_recovery_fail,
      std::string(kDcgm) + "MonitorNVLink: recovery errors are failures");
  add("ecc_volatile_uncorrected_fail", &Thresholds::ecc_volatile_uncorrected_fail,
      std::string(kDcgm) + "MonitorMemVolatileDbes (> 0)");
  add("retired_pages_fail", &Thresholds::retired_pages_fail,
      std::string(kDcgm) + "DCGM_LIMIT_MAX_RETIRED_PAGES");
  add("remap_uncorrectable_warn", &Thresholds::remap_uncorrectable_warn,
      std::string(kDcgm) + "DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE");
  add("rdma_port_errors_warn", &Thresholds::rdma_port_errors_warn,
      "commtool: any error an InfiniBand port counts (ibqueryerrors lists every non-zero one)");
  add("aer_nonfatal_warn", &Thresholds::aer_nonfatal_warn,
      "commtool: any non-fatal PCIe error the kernel's AER counted since boot");
  add("aer_fatal_fail", &Thresholds::aer_fatal_fail,
      "commtool: any fatal PCIe error the kernel's AER counted since boot");
  return out;
}

}  // namespace

std::vector<ThresholdInfo> describe(const Thresholds& t) {
  Thresholds copy = t;
  std::vector<ThresholdInfo> out;
  for (const Field& f : fields())
    out.push_back({f.name, f.at(copy), f.source});
  return out;
}

Thresholds parse_thresholds(std::string_view text, const std::string& source, Thresholds base) {
  const std::vector<Field> known = fields();
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    line = trim_blanks(line);
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", excerpt(source), line_no);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      throw usage_error(fmt::format("{}: '{}' is not a 'name = value' line", where, excerpt(line)));
    }
    const std::string_view name = trim_blanks(line.substr(0, eq));
    const std::string_view value = trim_blanks(line.substr(eq + 1));
    const Field* field = nullptr;
    for (const Field& f : known)
      if (f.name == name) field = &f;
    if (field == nullptr) {
      std::string names;
      for (const Field& f : known)
        names += (names.empty() ? "" : ", ") + f.name;
      throw usage_error(
          fmt::format("{}: '{}' is not a threshold (known: {})", where, excerpt(name), names));
    }
    const std::optional<double> v = parse_number<double>(value);
    if (!v || !std::isfinite(*v) || *v < 0) {
      throw usage_error(fmt::format("{}: {} '{}': not a non-negative decimal number", where,
                                    field->name, excerpt(value)));
    }
    field->at(base) = *v;
  }
  return base;
}

Thresholds load_thresholds(const std::string& path) {
  return parse_thresholds(files::read_input_file(path, 1 << 20), path);
}

}  // namespace commtool::health
