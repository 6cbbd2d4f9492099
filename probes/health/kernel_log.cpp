#include "probes/health/kernel_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "probes/base/error.hpp"
#include "probes/base/parse_number.hpp"
#include "probes/base/trim.hpp"

namespace commtool::health {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A line's stamp and the message after it: a /dev/kmsg record ("6,1234,5678901,-;msg", the
// stamp in microseconds since boot), dmesg's "[ 1843.308145] msg" or "[Mon Dec  7 ...] msg",
// journalctl's "Feb 14 05:03:41 host kernel: msg". Anything else is all message, no stamp.
std::pair<std::string, std::string_view> split_stamp(std::string_view line) {
  // /dev/kmsg: three comma-separated numbers, then flags, then ';'.
  if (const size_t semi = line.find(';'); semi != std::string_view::npos && semi < 64) {
    std::string_view head = line.substr(0, semi);
    size_t commas = 0;
    for (char c : head)
      commas += c == ',';
    if (commas >= 3 && is_digit(head.front())) {
      const size_t a = head.find(','), b = head.find(',', a + 1), c = head.find(',', b + 1);
      if (parse_number<int>(head.substr(0, a)) &&
          parse_number<uint64_t>(head.substr(a + 1, b - a - 1))) {
        if (auto usec = parse_number<uint64_t>(head.substr(b + 1, c - b - 1))) {
          return {fmt::format("{}.{:06}", *usec / 1000000, *usec % 1000000), line.substr(semi + 1)};
        }
      }
    }
  }
  if (line.starts_with('[')) {
    if (const size_t close = line.find(']'); close != std::string_view::npos && close < 48) {
      return {std::string(trim_blanks(line.substr(1, close - 1))), line.substr(close + 1)};
    }
  }
  // journalctl's short format: "Mmm dd hh:mm:ss host kernel: ".
  if (line.size() > 16 && std::isalpha(static_cast<unsigned char>(line[0])) && line[3] == ' ' &&
      line[9] == ':' && line[12] == ':') {
    if (const size_t k = line.find(" kernel: "); k != std::string_view::npos) {
      return {std::string(line.substr(0, 15)), line.substr(k + 9)};
    }
  }
  return {"", line};
}

// "0000:3b:00" or "0000:c5:00.0" at the start of `s`: the PCI address as the driver writes it.
std::optional<std::string> take_pci(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (is_hex(s[i]) || s[i] == ':' || s[i] == '.'))
    ++i;
  std::string_view pci = s.substr(0, i);
  while (!pci.empty() && (pci.back() == ':' || pci.back() == '.'))  // "0000:91:00.0: GPU has"
    pci.remove_suffix(1);
  size_t colons = 0;
  for (char c : pci)
    colons += c == ':';
  if (colons < 2 || pci.size() < 7) return std::nullopt;
  return lower(pci);
}

// "pid=1234, name=python, Graphics SM Warp Exception ..." (the driver also writes
// pid='<unknown>', name=<unknown>, or neither).
void take_process(std::string_view& rest, XidEvent& e) {
  rest = trim_blanks(rest);
  if (rest.starts_with("pid=")) {
    const size_t comma = rest.find(", ");
    std::string_view v = rest.substr(4, comma == std::string_view::npos ? rest.npos : comma - 4);
    e.pid = parse_number<int>(trim_blanks(v));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  rest = trim_blanks(rest);
  if (rest.starts_with("name=")) {
    const size_t comma = rest.find(", ");
    std::string_view v = rest.substr(5, comma == std::string_view::npos ? rest.npos : comma - 5);
    v = trim_blanks(v);
    if (v != "<unknown>" && v != "'<unknown>'") e.process = excerpt(v, 64);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
}

// An Xid or SXid line from the marker on: "(PCI:0000:3b:00): 13, pid=..., text".
std::optional<XidEvent> parse_xid(std::string_view after_marker, bool nvswitch) {
  XidEvent e;
  e.nvswitch = nvswitch;
  std::string_view s = after_marker;
  if (!s.starts_with("(")) return std::nullopt;
  s.remove_prefix(1);
  if (s.starts_with("PCI:")) s.remove_prefix(4);  // drivers before about 2013 wrote none
  auto pci = take_pci(s);
  if (!pci) return std::nullopt;
  e.pci = *pci;
  s.remove_prefix(e.pci.size());
  // A MIG instance, when the error is one's: "(PCI:0000:01:00 GPU-I:05 GPU-CI:01)".
  const size_t close = s.find(')');
  if (close == std::string_view::npos || close > 40) return std::nullopt;
  e.mig = std::string(trim_blanks(s.substr(0, close)));
  s.remove_prefix(close + 1);
  if (s.starts_with(":")) s.remove_prefix(1);
  s = trim_blanks(s);
  size_t digits = 0;
  while (digits < s.size() && is_digit(s[digits]))
    ++digits;
  auto xid = parse_number<int>(s.substr(0, digits));
  if (!xid || *xid <= 0) return std::nullopt;
  e.xid = *xid;
  s.remove_prefix(digits);
  if (s.starts_with(",")) s.remove_prefix(1);
  take_process(s, e);
  e.detail = excerpt(trim_blanks(s), 200);
  return e;
}

// "NVRM: The NVIDIA GPU 0000:b3:00.0" (the first line of the fallen-off-the-bus message) or
// "NVRM: GPU 0000:b3:00.0: ..." : the address it names.
std::optional<std::string> gpu_named(std::string_view message) {
  for (std::string_view lead : {"NVRM: The NVIDIA GPU ", "NVRM: GPU at PCI:", "NVRM: GPU "}) {
    if (const size_t at = message.find(lead); at != std::string_view::npos) {
      if (auto pci = take_pci(message.substr(at + lead.size()))) return pci;
    }
  }
  return std::nullopt;
}

std::string without_function(std::string_view pci) {
  const size_t dot = pci.rfind('.');
  const size_t last_colon = pci.rfind(':');
  return lower(dot != std::string_view::npos && dot > last_colon ? pci.substr(0, dot) : pci);
}

}  // namespace

KernelLogScan scan_kernel_log(std::string_view text) {
  KernelLogScan scan;
  // The address of the last "The NVIDIA GPU ..." line, while its message may still say it fell
  // off the bus (it spans three lines).
  std::optional<std::string> pending;
  size_t pending_line = 0;
  std::string pending_stamp;
  auto add = [&scan](XidEvent e) {
    if (scan.events.size() == kMaxXidEvents) {
      scan.dropped = true;
      return;
    }
    scan.events.push_back(std::move(e));
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++scan.lines;
    if (line.find("NVRM") == std::string_view::npos && line.find("Xid") == std::string_view::npos)
      continue;
    auto [stamp, message] = split_stamp(line);
    const size_t sxid = message.find("SXid ");
    const size_t xid = message.find("Xid ");
    if (sxid != std::string_view::npos || xid != std::string_view::npos) {
      const bool nvswitch = sxid != std::string_view::npos;
      const size_t at = nvswitch ? sxid + 5 : xid + 4;
      if (std::optional<XidEvent> e = parse_xid(message.substr(at), nvswitch)) {
        // An NVSwitch writes one SXid over several lines of one number (the link, then
        // "Severity ...", then "Data {...}", other switches' lines in between): one event,
        // with the first line's words.
        if (nvswitch && (e->detail.starts_with("Severity ") || e->detail.starts_with("Data {"))) {
          bool continued = false;
          for (auto it = scan.events.rbegin(); it != scan.events.rend() && !continued; ++it) {
            if (scan.lines - it->line > 8) break;
            continued = it->nvswitch && it->xid == e->xid && it->pci == e->pci;
          }
          if (continued) continue;
        }
        e->when = stamp;
        e->line = scan.lines;
        add(std::move(*e));
      } else if (message.find("(PCI:") != std::string_view::npos) {
        ++scan.unparsed;
      }
      continue;
    }
    if (auto named = gpu_named(message)) {
      pending = named;
      pending_line = scan.lines;
      pending_stamp = stamp;
    }
    if (message.find("fallen off the bus") == std::string_view::npos) continue;
    if (!pending || scan.lines - pending_line > 3) continue;
    const std::string pci = without_function(*pending);
    pending.reset();
    // The same fall reported as Xid 79 just before is one event, not two.
    bool seen = false;
    for (auto it = scan.events.rbegin(); it != scan.events.rend() && !seen; ++it) {
      if (scan.lines - it->line > 20) break;
      seen = it->xid == 79 && without_function(it->pci) == pci;
    }
    if (seen) continue;
    XidEvent e;
    e.pci = pci;
    e.xid = 79;
    e.from_message = true;
    e.detail = "GPU has fallen off the bus (the driver's message, without an Xid number)";
    e.when = stamp.empty() ? pending_stamp : stamp;
    e.line = scan.lines;
    add(std::move(e));
  }
  return scan;
}

bool same_gpu(const XidEvent& event, std::string_view pci_bus_id) {
  return without_function(event.pci) == without_function(pci_bus_id);
}

KernelLogRead read_live_kernel_log() {
  KernelLogRead r;
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    r.why = err == EPERM || err == EACCES
                ? fmt::format(
                      "/dev/kmsg: {} (kernel.dmesg_restrict is set: run as root or with "
                      "CAP_SYSLOG, or pass a saved log with --kernel-log)",
                      std::strerror(err))
                : fmt::format("/dev/kmsg: {}", std::strerror(err));
    return r;
  }
  // Each read() returns one record; EAGAIN: the end of what the buffer holds; EPIPE: a record
  // was overwritten while reading (the next read goes on from the oldest still there).
  std::string record(8192, '\0');
  constexpr size_t kMaxBytes = 64u << 20;
  while (r.text.size() < kMaxBytes) {
    const ssize_t n = ::read(fd, record.data(), record.size());
    if (n < 0) {
      if (errno == EINTR || errno == EPIPE) continue;
      if (errno != EAGAIN) {
        r.why = fmt::format("/dev/kmsg: {}", std::strerror(errno));
        ::close(fd);
        return r;
      }
      break;
    }
    if (n == 0) break;
    std::string_view rec(record.data(), static_cast<size_t>(n));
    // The message ends at its first newline; what follows are " KEY=value" dictionary lines.
    rec = rec.substr(0, rec.find('\n'));
    r.text.append(rec);
    r.text += '\n';
  }
  ::close(fd);
  r.readable = true;
  return r;
}

}  // namespace commtool::health
