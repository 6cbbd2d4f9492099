#include "tracing/crossrank/ras.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/tool_packages.hpp"
#include "tracing/crossrank/crossrank.hpp"

namespace commtool::crossrank {

using nlohmann::json;

namespace {

constexpr size_t kMaxRasComms = 100'000;
constexpr size_t kMaxRasRanks = 1'000'000;  // over all communicators

// The answer, past what a client wrote before it (a saved conversation).
std::string_view answer_of(std::string_view text) {
  const size_t json_at = text.find("{\n");
  const size_t text_at = text.find("NCCL version");
  size_t at = std::min(json_at, text_at);
  // A JSON answer begins with its brace; the text one with its version line.
  if (json_at != std::string_view::npos && json_at < text_at) at = json_at;
  return at == std::string_view::npos ? text : text.substr(at);
}

// NCCL 2.28.9 leaves out the comma between a value and the key on the next line in its list of
// missing ranks: one is put back wherever a value ends a line and a key begins the next.
std::string with_commas(std::string_view text, size_t& mended) {
  std::string out;
  out.reserve(text.size() + 64);
  bool in_string = false, escaped = false;
  char last = 0;  // the last character outside blanks, outside strings or a string's quote
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        last = '"';
      }
      continue;
    }
    if (c == '"') {
      const bool value_ended =
          last == '"' || last == '}' || last == ']' ||
          std::isdigit(static_cast<unsigned char>(last)) || last == 'e' ||
          last == 'l';  // a string, an object, a list, a number, true/false/null
      // Only across a line end: "a" "b" on one line is not something NCCL writes.
      const size_t nl = out.find_last_not_of(" \t\r");
      if (value_ended && nl != std::string::npos && out[nl] == '\n') {
        const size_t value_end = out.find_last_not_of(" \t\r\n");
        out.insert(value_end + 1, ",");
        ++mended;
      }
      in_string = true;
      out += c;
      continue;
    }
    out += c;
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') last = c;
  }
  return out;
}

using files::find_member;

template <class T>
T value_or(const json& j, const char* key, T fallback) {
  return files::member_as<T>(j, key).value_or(fallback);
}

std::string text_or(const json& j, const char* key) {
  return files::member_as<std::string>(j, key).value_or("");
}

RasRank rank_of(const json& r, bool missing) {
  RasRank out;
  out.rank = value_or<int>(r, "rank", -1);
  out.host = text_or(r, "host");
  out.pid = value_or<int64_t>(r, "pid", 0);
  out.gpu = value_or<int>(r, "cuda_dev", -1);
  out.missing = missing;
  if (const json* st = find_member(r, "status")) {
    out.async_error = value_or<int>(*st, "async_error", 0);
    out.finalize_called = value_or<bool>(*st, "finalize_called", false);
    out.destroy_flag = value_or<bool>(*st, "destroy_flag", false);
    out.abort_flag = value_or<bool>(*st, "abort_flag", false);
    out.unresponsive = value_or<bool>(*st, "unresponsive", false);
    out.considered_dead = value_or<bool>(*st, "considered_dead", false);
  }
  if (const json* counts = find_member(r, "collective_counts"); counts && counts->is_object()) {
    for (const auto& [kind, n] : counts->items())
      if (files::json_fits<uint64_t>(n)) out.counts[kind] = n.get<uint64_t>();
  }
  return out;
}

RasStatus from_json(const json& doc, const std::string& source) {
  RasStatus s;
  s.json = true;
  s.nccl_version = text_or(doc, "nccl_version");
  const json* comms = find_member(doc, "communicators");
  if (comms == nullptr || !comms->is_array()) {
    throw usage_error(fmt::format("{}: a RAS answer without \"communicators\"", source));
  }
  size_t ranks = 0;
  for (const json& c : *comms) {
    if (s.comms.size() >= kMaxRasComms) {
      throw usage_error(fmt::format("{}: more than {} communicators", source, kMaxRasComms));
    }
    RasComm comm;
    comm.hash = text_or(c, "hash");
    comm.size = value_or<int>(c, "size", 0);
    for (const char* list : {"ranks", "missing_ranks"}) {
      const json* rs = find_member(c, list);
      if (rs == nullptr || !rs->is_array()) continue;
      for (const json& r : *rs) {
        if (++ranks > kMaxRasRanks) {
          throw usage_error(fmt::format("{}: more than {} ranks", source, kMaxRasRanks));
        }
        comm.ranks.push_back(rank_of(r, std::string(list) == "missing_ranks"));
      }
    }
    s.comms.push_back(std::move(comm));
  }
  s.no_communicators = s.comms.empty();
  return s;
}

// The text form: the lines of its Errors and Warnings sections.
RasStatus from_text(std::string_view text) {
  RasStatus s;
  if (const size_t v = text.find("NCCL version "); v != std::string_view::npos) {
    const size_t end = text.find_first_of(" \n", v + 13);
    s.nccl_version =
        std::string(text.substr(v + 13, end == std::string_view::npos ? 20 : end - v - 13));
  }
  s.no_communicators = text.find("No communicator data collected") != std::string_view::npos;
  bool in_section = false;
  size_t pos = 0;
  while (pos < text.size() && s.messages.size() < 10'000) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line == "Errors" || line == "Warnings") {
      in_section = true;
      continue;
    }
    if (!in_section || line.empty() || line.find_first_not_of('=') == std::string_view::npos) {
      continue;
    }
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string_view::npos) s.messages.emplace_back(line.substr(first));
  }
  return s;
}

const char* nccl_result(int code) {
  switch (code) {
    case 1:
      return "unhandled CUDA error";
    case 2:
      return "system error";
    case 3:
      return "internal error";
    case 4:
      return "invalid argument";
    case 5:
      return "invalid usage";
    case 6:
      return "remote process error (a peer failed or went away)";
    case 7:
      return "in progress";
  }
  return "error";
}

std::string where_of(const RasRank& r) {
  return fmt::format("{} pid {}{}", excerpt(r.host, 60), r.pid,
                     r.gpu >= 0 ? fmt::format(", GPU {}", r.gpu) : "");
}

}  // namespace

bool looks_like_ras(std::string_view head) {
  return (head.find("\"communicators\"") != std::string_view::npos &&
          head.find("\"nccl_version\"") != std::string_view::npos) ||
         (head.find("NCCL version") != std::string_view::npos &&
          head.find("Job summary") != std::string_view::npos);
}

RasStatus read_ras(std::string_view text, const std::string& source) {
  const std::string_view answer = answer_of(text);
  if (!answer.empty() && answer[0] == '{') {
    try {
      return from_json(files::parse_json_bounded(std::string(answer), source), source);
    } catch (const json::exception&) {
      size_t mended = 0;
      const std::string fixed = with_commas(answer, mended);
      try {
        RasStatus s = from_json(files::parse_json_bounded(fixed, source), source);
        s.repairs.push_back(fmt::format(
            "{}: not valid JSON as NCCL wrote it; {} missing comma(s) put back (NCCL 2.28's "
            "list of missing ranks lacks them)",
            source, mended));
        return s;
      } catch (const json::exception& e) {
        throw usage_error(
            fmt::format("{}: a RAS answer that is not JSON, even with commas "
                        "put back: {}",
                        source, e.what()));
      }
    }
  }
  if (answer.find("NCCL version") == 0) return from_text(answer);
  throw usage_error(
      fmt::format("{}: not an answer of NCCL's RAS (neither its JSON nor its text)", source));
}

std::vector<RasFinding> analyse_ras(const RasStatus& s) {
  std::vector<RasFinding> missing, behind, errors, states;
  for (const RasComm& c : s.comms) {
    const std::string comm =
        fmt::format("communicator {} ({})", excerpt(c.hash, 40),
                    c.size > 0 ? fmt::format("{} ranks", c.size) : "rank count unknown");
    for (const RasRank& r : c.ranks) {
      if (!r.missing) continue;
      missing.push_back(
          {fmt::format("MISSING on {}: rank {} ({}) did not answer RAS{}: its process ended the "
                       "communicator, exited or cannot be reached",
                       comm, r.rank, where_of(r),
                       r.considered_dead ? " and is considered dead"
                       : r.unresponsive  ? " and is unresponsive"
                                         : ""),
           fmt::format("on {}, check whether process {} still runs (`ps -p {}`, {}); if it is "
                       "gone, the job's log has how it ended and `dmesg` an out-of-memory kill or "
                       "an Xid error; if it runs, RAS cannot reach it: check the network between "
                       "that host and the others",
                       excerpt(r.host, 60), r.pid, r.pid, tools::kProcps)});
    }
    // Per kind of collective, the ranks that issued fewer than the most.
    std::map<std::string, std::map<uint64_t, std::vector<int>>> by_kind;
    for (const RasRank& r : c.ranks)
      if (!r.missing)
        for (const auto& [kind, n] : r.counts)
          by_kind[kind][n].push_back(r.rank);
    for (const auto& [kind, counts] : by_kind) {
      if (counts.size() < 2) continue;
      const auto& [most, ahead] = *counts.rbegin();
      for (const auto& [n, ranks] : counts) {
        if (n == most) continue;
        behind.push_back({fmt::format("BEHIND on {}: {} issued {} {} where {} issued {}", comm,
                                      ranks_text(ranks, c.size), n, excerpt(kind, 30),
                                      ranks_text(ahead, c.size), most),
                          fmt::format("look at what {} {} doing instead of its next {}: its "
                                      "stack, `py-spy dump --pid PID` for Python ({}) or `gdb -p "
                                      "PID` ({}), with the host and pid below",
                                      ranks_text(ranks, c.size), ranks.size() == 1 ? "is" : "are",
                                      excerpt(kind, 30), tools::kPySpy, tools::kGdb)});
      }
    }
    for (const RasRank& r : c.ranks) {
      if (r.missing) continue;
      if (r.async_error != 0) {
        errors.push_back(
            {fmt::format("ERROR on {}: rank {} ({}) reports {} ({})", comm, r.rank, where_of(r),
                         nccl_result(r.async_error), r.async_error),
             fmt::format("read NCCL's log of rank {} on {} (NCCL_DEBUG=WARN or INFO, "
                         "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p) for the call that failed and why; a "
                         "remote or system error is the network or a peer that died: check the "
                         "NICs (`ibstat`, {}) and the other ranks' findings",
                         r.rank, excerpt(r.host, 60), tools::kInfinibandDiags)});
      }
      if (r.abort_flag || r.destroy_flag || r.finalize_called) {
        states.push_back(
            {fmt::format("on {}: rank {} ({}) has {} its communicator", comm, r.rank, where_of(r),
                         r.abort_flag     ? "aborted"
                         : r.destroy_flag ? "destroyed"
                                          : "finalised"),
             fmt::format("find in rank {}'s log why the application {} its communicator while "
                         "the others use it (an exception in that process, or a shutdown path "
                         "that runs on one rank only)",
                         r.rank,
                         r.abort_flag     ? "aborted"
                         : r.destroy_flag ? "destroyed"
                                          : "finalised")});
      }
    }
  }
  std::vector<RasFinding> out;
  for (auto* v : {&missing, &behind, &errors, &states})
    out.insert(out.end(), v->begin(), v->end());
  if (!s.json) {
    for (const std::string& m : s.messages)
      if (m.rfind("Rank ", 0) == 0) {
        out.push_back({excerpt(m, 300),
                       "read NCCL's log of the rank it names (NCCL_DEBUG=INFO) for the call and "
                       "why; RAS's JSON form (NCCL 2.28.7 and later) has each rank's collective "
                       "counts too"});
      }
  }
  return out;
}

std::string render_ras_text(const RasStatus& s, const std::vector<RasFinding>& findings,
                            const std::string& source) {
  std::string out =
      fmt::format("NCCL RAS status ({} form, NCCL {}) from {}\n", s.json ? "JSON" : "text",
                  excerpt(s.nccl_version, 20), excerpt(source, 200));
  for (const std::string& r : s.repairs)
    out += "WARNING: " + excerpt(r, 400) + "\n";
  out += "\n";
  if (findings.empty() && s.no_communicators) {
    out += "RAS holds no communicator: none was alive in the job when it was asked.\n";
  } else if (findings.empty()) {
    out += s.json ? "Every rank of every communicator answered, with as many collectives of "
                    "each kind as the others and no error.\n"
                  : "No rank is named in the answer's errors or warnings.\n";
  }
  for (size_t i = 0; i < findings.size(); ++i) {
    if (i == 1) out += "Further findings:\n";
    const std::string indent = i == 0 ? "" : "  ";
    out += indent + findings[i].text + ".\n";
    out += indent + "  what to do: " + findings[i].advice + ".\n";
  }
  if (!s.json && !s.messages.empty()) {
    out += "\nRAS's errors and warnings:\n";
    for (const std::string& m : s.messages)
      out += "  " + excerpt(m, 300) + "\n";
  }
  for (const RasComm& c : s.comms) {
    out += fmt::format(
        "\ncommunicator {}: {} ranks, {} answered\n", excerpt(c.hash, 40), c.size,
        std::count_if(c.ranks.begin(), c.ranks.end(), [](const RasRank& r) { return !r.missing; }));
    for (const RasRank& r : c.ranks) {
      std::string counts;
      for (const auto& [kind, n] : r.counts)
        if (n > 0)
          counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, excerpt(kind, 30));
      out += fmt::format("    rank {} ({}): {}\n", r.rank, where_of(r),
                         r.missing        ? "did not answer"
                         : counts.empty() ? "no collective"
                                          : counts);
    }
  }
  return out;
}

}  // namespace commtool::crossrank
