#include "tracing/crossrank/nccl_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "probes/base/error.hpp"
#include "probes/base/tool_packages.hpp"
#include "tracing/crossrank/crossrank.hpp"

namespace commtool::crossrank {

namespace {

constexpr size_t kMaxWarnings = 10'000;  // per file
constexpr size_t kMaxComms = 10'000;     // per file

// The word after `key ` in `line` ("rank 1 nranks 3" with "nranks" -> "3").
std::string after(std::string_view line, std::string_view key) {
  size_t at = 0;
  while ((at = line.find(key, at)) != std::string_view::npos) {
    const bool starts = at == 0 || line[at - 1] == ' ';
    const size_t end = at + key.size();
    if (starts && end < line.size() && line[end] == ' ') {
      const size_t from = end + 1;
      const size_t to = line.find(' ', from);
      return std::string(
          line.substr(from, to == std::string_view::npos ? line.size() - from : to - from));
    }
    at = end;
  }
  return "";
}

int int_of(const std::string& s, int fallback) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return fallback;
  }
  return std::stoi(s);
}

// "[time] host:pid:tid [dev] ..." -> time, host, pid, and the rest after "NCCL ".
struct Parsed {
  std::string when, host;
  int64_t pid = 0;
  std::string level;  // INFO, WARN
  std::string_view message;
};

bool parse(std::string_view line, Parsed& p) {
  if (!line.empty() && line[0] == '[') {
    const size_t close = line.find("] ");
    if (close == std::string_view::npos || close > 40) return false;
    p.when = std::string(line.substr(1, close - 1));
    line.remove_prefix(close + 2);
  }
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return false;
  const std::string_view who = line.substr(0, space);  // host:pid:tid
  const size_t c2 = who.rfind(':');
  const size_t c1 = c2 == std::string_view::npos ? c2 : who.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos || c1 == 0) return false;
  p.host = std::string(who.substr(0, c1));
  const std::string pid(who.substr(c1 + 1, c2 - c1 - 1));
  if (pid.empty() || pid.size() > 10 || !std::all_of(pid.begin(), pid.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return false;
  }
  p.pid = std::stoll(pid);
  const size_t nccl = line.find(" NCCL ", space);
  if (nccl == std::string_view::npos) return false;
  std::string_view rest = line.substr(nccl + 6);
  const size_t level_end = rest.find(' ');
  if (level_end == std::string_view::npos) return false;
  p.level = std::string(rest.substr(0, level_end));
  p.message = rest.substr(level_end + 1);
  return p.level == "INFO" || p.level == "WARN" || p.level == "ABORT" || p.level == "TRACE";
}

}  // namespace

bool looks_like_nccl_log(std::string_view head) {
  return head.find(" NCCL INFO ") != std::string_view::npos ||
         head.find(" NCCL WARN ") != std::string_view::npos;
}

namespace {

// "NET/Socket/0" -> "NET/Socket", "P2P/CUMEM/read" stays, "NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA":
// the transport's name without its device numbers; "" when it is not such a word.
std::string transport_name(std::string_view via) {
  via = via.substr(0, via.find(' '));
  std::string out;
  size_t start = 0;
  while (start <= via.size()) {
    size_t slash = via.find('/', start);
    if (slash == std::string_view::npos) slash = via.size();
    const std::string_view part = via.substr(start, slash - start);
    const bool number = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    const bool word = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    if (!number && !part.empty()) {
      if (!word) return "";
      out += (out.empty() ? "" : "/") + std::string(part);
    }
    start = slash + 1;
  }
  return out.size() <= 64 ? out : "";
}

}  // namespace

NcclLog read_nccl_log(std::string_view text, const std::string& file) {
  NcclLog log;
  log.file = file;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, std::min(nl - pos, kMaxLogLine));
    pos = nl + 1;
    Parsed p;
    if (!parse(line, p)) continue;
    ++log.lines;
    if (log.host.empty()) {
      log.host = p.host;
      log.pid = p.pid;
    }
    const std::string_view m = p.message;
    if (p.level == "WARN" || p.level == "ABORT") {
      if (log.warnings.size() < kMaxWarnings) log.warnings.push_back({p.when, std::string(m)});
      continue;
    }
    if (m.rfind("NCCL version ", 0) == 0) {
      log.version = std::string(m.substr(13, m.find(' ', 13) - 13));
    } else if (m.rfind("Using network ", 0) == 0) {
      log.network = std::string(m.substr(14));
    } else if (m.rfind("NET/IB : Using [", 0) == 0 && m.size() > 16 &&
               std::isdigit(static_cast<unsigned char>(m[16]))) {
      log.ib_devices = true;  // "Using [0]mlx5_0:1/IB ..."; "Using [RO]" names options, no device
    } else if (m.rfind("Channel ", 0) == 0 && m.find(" via ") != std::string_view::npos) {
      if (std::string name = transport_name(m.substr(m.find(" via ") + 5)); !name.empty()) {
        if (log.transports.size() < kMaxTransports || log.transports.count(name)) {
          ++log.transports[name];
        }
      }
    } else if (m.find("ncclCommInitRank") != std::string_view::npos &&
               m.find(" commId ") != std::string_view::npos) {
      const std::string id = after(m, "commId");
      const int rank = int_of(after(m, "rank"), -1);
      auto it = std::find_if(log.comms.begin(), log.comms.end(),
                             [&](const LogComm& c) { return c.comm_id == id && c.rank == rank; });
      if (it == log.comms.end() && log.comms.size() < kMaxComms) {
        log.comms.push_back({id, rank, int_of(after(m, "nranks"), 0), after(m, "busId"), false});
        it = log.comms.end() - 1;
      }
      if (it != log.comms.end() && m.find("Init COMPLETE") != std::string_view::npos) {
        it->init_complete = true;
      }
    }
  }
  return log;
}

std::vector<LogFinding> analyse_nccl_logs(const std::vector<NcclLog>& logs) {
  std::vector<LogFinding> out;
  // Warnings by their text, with the ranks (or processes) that logged them and the first time.
  struct Seen {
    std::set<std::string> who;
    std::string first;
  };
  std::map<std::string, Seen> warned;
  for (const NcclLog& l : logs) {
    std::string who = fmt::format("{} pid {}", excerpt(l.host, 40), l.pid);
    if (!l.comms.empty()) who += fmt::format(" (rank {})", l.comms.front().rank);
    for (const LogWarning& w : l.warnings) {
      Seen& s = warned[w.text];
      s.who.insert(who);
      if (!w.when.empty() && (s.first.empty() || w.when < s.first)) s.first = w.when;
    }
    if (l.network == "Socket" && l.ib_devices) {
      out.push_back(
          {fmt::format("{} uses NCCL's socket transport though InfiniBand devices were found", who),
           fmt::format("check that the job does not set NCCL_IB_DISABLE=1, NCCL_NET=Socket or an "
                       "NCCL_IB_HCA that matches no device on {}, and that the ports are up "
                       "(`ibstat`, {})",
                       excerpt(l.host, 40), tools::kInfinibandDiags)});
    }
  }
  for (const auto& [text, s] : warned) {
    std::string who;
    for (const std::string& w : s.who)
      who += (who.empty() ? "" : ", ") + w;
    out.push_back(
        {fmt::format("NCCL WARN \"{}\" from {}{}", excerpt(text, 200), excerpt(who, 400),
                     s.first.empty() ? "" : ", first at " + excerpt(s.first, 30)),
         fmt::format("read the lines of those processes' logs just before the warning{}: the "
                     "first process to warn is nearest the cause; a peer's exit or a network "
                     "error points at the ranks and links to check next",
                     s.first.empty() ? "" : " (" + excerpt(s.first, 30) + ")")});
  }
  // Ranks of a communicator that left no log here.
  std::map<std::string, std::pair<int, std::vector<int>>> comms;
  for (const NcclLog& l : logs)
    for (const LogComm& c : l.comms) {
      auto& [n, ranks] = comms[c.comm_id];
      n = std::max(n, c.nranks);
      ranks.push_back(c.rank);
    }
  for (const auto& [id, c] : comms) {
    std::vector<int> absent;
    for (int r = 0; r < c.first && absent.size() < 100'000; ++r)
      if (std::find(c.second.begin(), c.second.end(), r) == c.second.end()) absent.push_back(r);
    if (!absent.empty()) {
      out.push_back(
          {fmt::format("communicator {} ({} ranks): no log read for {}", excerpt(id, 40), c.first,
                       ranks_text(absent, c.first)),
           fmt::format("collect the logs of {} too: NCCL_DEBUG=INFO and "
                       "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p on every rank write one per process on "
                       "its node; give them to `commtool report` beside these",
                       ranks_text(absent, c.first))});
    }
  }
  return out;
}

std::string render_nccl_logs_text(const std::vector<NcclLog>& logs,
                                  const std::vector<LogFinding>& findings) {
  std::string out = fmt::format("NCCL logs of {} process(es)\n", logs.size());
  for (const LogFinding& f : findings)
    out += "  " + f.text + "\n    what to do: " + f.advice + "\n";
  if (findings.empty()) out += "  no warning logged\n";
  for (const NcclLog& l : logs) {
    out += fmt::format("  {} pid {}: NCCL {}, network {}{}", excerpt(l.host, 40), l.pid,
                       l.version.empty() ? "unknown" : excerpt(l.version, 30),
                       l.network.empty() ? "unknown" : excerpt(l.network, 30),
                       l.warnings.empty() ? "" : fmt::format(", {} warning(s)", l.warnings.size()));
    for (const LogComm& c : l.comms) {
      out += fmt::format("; rank {} of {} in {} (bus id {}{})", c.rank, c.nranks,
                         excerpt(c.comm_id, 40), excerpt(c.bus_id, 20),
                         c.init_complete ? "" : ", init not complete");
    }
    out += "\n";
  }
  return out;
}

}  // namespace commtool::crossrank
