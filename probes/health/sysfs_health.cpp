#include "probes/health/sysfs_health.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <system_error>

#include "probes/base/parse_number.hpp"

namespace commtool::health {

namespace fs = std::filesystem;

const char* const kRdmaCounters[8] = {
    "symbol_error",
    "link_downed",
    "port_rcv_errors",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
};

namespace {

// A small sysfs attribute, its trailing newline dropped; nullopt when it cannot be read. Bounded:
// a planted FIFO or huge file is not a sysfs attribute.
std::optional<std::string> attribute(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

// "4: ACTIVE" -> "ACTIVE"
std::string after_colon(const std::string& s) {
  const size_t colon = s.find(':');
  std::string out = colon == std::string::npos ? s : s.substr(colon + 1);
  while (!out.empty() && out.front() == ' ')
    out.erase(0, 1);
  return out;
}

Count count_at(const fs::path& p) {
  Count c;
  const std::optional<std::string> text = attribute(p);
  if (!text) {
    c.why = fmt::format("no {} in sysfs", p.filename().string());
    return c;
  }
  if (const std::optional<uint64_t> v = parse_number<uint64_t>(*text)) {
    c.available = true;
    c.value = *v;
  } else {
    c.why = fmt::format("{} is not a count", p.filename().string());
  }
  return c;
}

// An aer_dev_* file: "RxErr 0\nBadTLP 0\n...\nTOTAL_ERR_COR 0". Its TOTAL_ line is the count;
// the non-zero kinds go to `detail`.
Count aer_total(const fs::path& p, std::string& detail) {
  Count c;
  const std::optional<std::string> text = attribute(p);
  if (!text) {
    c.why = "no " + p.filename().string() + " in sysfs (a kernel without AER, or a VM)";
    return c;
  }
  size_t at = 0;
  while (at < text->size()) {
    size_t end = text->find('\n', at);
    if (end == std::string::npos) end = text->size();
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    const std::optional<uint64_t> v = parse_number<uint64_t>(line.substr(space + 1));
    if (!v) continue;
    if (name.rfind("TOTAL_", 0) == 0) {
      c.available = true;
      c.value = *v;
    } else if (*v > 0) {
      detail += fmt::format("{}{} {}", detail.empty() ? "" : ", ", name, *v);
    }
  }
  if (!c.available) c.why = p.filename().string() + " has no TOTAL_ line";
  return c;
}

}  // namespace

std::vector<RdmaPort> read_rdma_ports(const std::vector<std::string>& devices,
                                      const fs::path& sysfs_root) {
  std::vector<RdmaPort> out;
  for (const std::string& device : devices) {
    const fs::path ports = sysfs_root / "class/infiniband" / device / "ports";
    std::vector<int> numbers;
    std::error_code ec;
    for (fs::directory_iterator it(ports, ec), end; !ec && it != end; it.increment(ec)) {
      if (const std::optional<int> n = parse_number<int>(it->path().filename().string())) {
        numbers.push_back(*n);
      }
      if (numbers.size() >= 64) break;
    }
    std::sort(numbers.begin(), numbers.end());
    for (int n : numbers) {
      const fs::path dir = ports / std::to_string(n);
      RdmaPort p;
      p.device = device;
      p.port = n;
      p.state = after_colon(attribute(dir / "state").value_or("?"));
      p.phys_state = after_colon(attribute(dir / "phys_state").value_or("?"));
      p.rate = attribute(dir / "rate").value_or("");
      p.link_layer = attribute(dir / "link_layer").value_or("InfiniBand");
      for (const char* name : kRdmaCounters)
        p.counters.emplace_back(name, count_at(dir / "counters" / name));
      out.push_back(std::move(p));
    }
  }
  return out;
}

AerCounts read_aer(const std::string& bdf, const fs::path& sysfs_root) {
  AerCounts a;
  a.bdf = bdf;
  const fs::path dev = sysfs_root / "bus/pci/devices" / bdf;
  a.correctable = aer_total(dev / "aer_dev_correctable", a.detail);
  a.nonfatal = aer_total(dev / "aer_dev_nonfatal", a.detail);
  a.fatal = aer_total(dev / "aer_dev_fatal", a.detail);
  return a;
}

std::string read_iommu_type(const std::string& bdf, const fs::path& sysfs_root) {
  const fs::path group = sysfs_root / "bus/pci/devices" / bdf / "iommu_group";
  std::error_code ec;
  if (!fs::exists(group, ec)) return "none";
  const std::optional<std::string> type = attribute(group / "type");
  if (!type || type->empty() || type->size() > 32) return "unknown";
  return *type;
}

}  // namespace commtool::health
