#include "tracing/crossrank/flight_recorder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/pickle.hpp"

namespace commtool::crossrank {

namespace fs = std::filesystem;
using nlohmann::json;

bool looks_like_flight_recorder(std::string_view head) {
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) return true;  // a pickle
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || head[first] != '{') return false;
  const std::string_view start = head.substr(0, 4096);
  return start.find("\"pg_config\"") != std::string_view::npos ||
         start.find("\"entries\"") != std::string_view::npos;
}

int rank_of_dump_file(const fs::path& file) {
  std::string name = file.filename().string();
  for (const char* ext : {".pickle", ".pkl", ".json"}) {
    const std::string e = ext;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      name.resize(name.size() - e.size());
    }
  }
  size_t digits = 0;
  while (digits < name.size() &&
         std::isdigit(static_cast<unsigned char>(name[name.size() - 1 - digits])))
    ++digits;
  if (digits == 0 || digits > 7) return -1;
  return std::stoi(name.substr(name.size() - digits));
}

namespace {

using files::find_member;

std::string text_of(const json& j, const char* key) {
  return files::member_as<std::string>(j, key).value_or("");
}

// pg_config's ranks: "[0, 1, 2]" as PyTorch writes them, or a list.
std::vector<int> ranks_of(const json* v) {
  std::vector<int> out;
  if (v == nullptr) return out;
  if (v->is_array()) {
    for (const json& r : *v)
      if (files::json_fits<int>(r)) out.push_back(r.get<int>());
    return out;
  }
  const std::string s = v->is_string() ? v->get<std::string>() : "";
  int64_t n = -1;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      n = (n < 0 ? 0 : n * 10) + (c - '0');
      if (n > kMaxGroupRank) return {};
    } else if (n >= 0) {
      out.push_back(static_cast<int>(n));
      n = -1;
    }
  }
  if (n >= 0) out.push_back(static_cast<int>(n));
  return out;
}

// The elements of a list of tensor shapes ([[262144], [2, 3]] -> 262150); none if not shapes.
std::optional<uint64_t> elements_of(const json* sizes) {
  if (sizes == nullptr || !sizes->is_array()) return std::nullopt;
  uint64_t total = 0;
  for (const json& shape : *sizes) {
    if (!shape.is_array()) return std::nullopt;
    uint64_t n = 1;
    for (const json& d : shape) {
      if (!files::json_fits<uint64_t>(d)) return std::nullopt;
      const uint64_t x = d.get<uint64_t>();
      if (x != 0 && n > UINT64_MAX / x) return std::nullopt;
      n *= x;
    }
    if (total > UINT64_MAX - n) return std::nullopt;
    total += n;
  }
  return total;
}

std::string dtypes_of(const json* v) {
  std::string out;
  if (v == nullptr || !v->is_array()) return out;
  for (const json& d : *v) {
    if (!d.is_string()) continue;
    if (!out.empty()) out += ",";
    out += d.get<std::string>();
    if (out.size() > 200) break;
  }
  return out;
}

// "train.py:88 step": the first frame outside installed packages (torch among them).
std::string site_of(const json* frames) {
  if (frames == nullptr || !frames->is_array()) return "";
  for (const json& f : *frames) {
    const std::string file = text_of(f, "filename");
    // Library frames (torch's own, anything installed) come first; the job's code is below.
    if (file.empty() || file.find("/site-packages/") != std::string::npos ||
        file.find("/dist-packages/") != std::string::npos || file.rfind("<", 0) == 0) {
      continue;
    }
    const std::optional<int64_t> line = files::member_as<int64_t>(f, "line");
    return fmt::format("{}:{} {}", fs::path(file).filename().string(), line.value_or(0),
                       text_of(f, "name"));
  }
  return "";
}

struct PgInfo {
  std::string desc;
  std::vector<int> ranks;  // global ranks, in the group's order
};

json load_document(const fs::path& file) {
  const std::string bytes = files::read_input_file(file.string());
  try {
    if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) return pickle::load(bytes);
    return files::parse_json_bounded(bytes, file.string());
  } catch (const json::exception& e) {
    throw usage_error(fmt::format("{}: not a Flight Recorder dump (neither a pickle nor JSON: {})",
                                  file.string(), e.what()));
  } catch (const Error& e) {
    throw usage_error(fmt::format("{}: {}", file.string(), e.what()));
  }
}

}  // namespace

FlightRecorderJob read_flight_recorder(const std::vector<fs::path>& files,
                                       const std::set<fs::path>& found) {
  FlightRecorderJob fr;
  fr.job.stuck = false;
  fr.job.absent_means =
      "no dump: the process died or was killed before the watchdog wrote one, "
      "or the dump is elsewhere";
  fr.job.absent_check =
      "look for its dump on its node (TORCH_FR_DUMP_TEMP_FILE, TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
      "in older PyTorch, names the files' prefix; the watchdog writes one on a timeout with "
      "TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_NCCL_TRACE_BUFFER_SIZE above 0) and in the job's "
      "log for how its process ended";
  std::map<std::string, size_t> group_index;  // "<pg name>" or "<pg name> p2p"
  std::map<int, std::string> seen_rank;
  std::map<std::string, PgInfo> pgs;
  const auto group_of = [&](const std::string& key, const std::string& pg, bool p2p) -> Group& {
    auto [it, added] = group_index.try_emplace(key, fr.job.groups.size());
    if (added) {
      const PgInfo& info = pgs[pg];
      fr.job.groups.push_back({.id = p2p ? pg + " p2p" : pg,
                               .name = info.desc,
                               .nranks = static_cast<int>(info.ranks.size()),
                               .kind = "process group",
                               .position = "#",
                               .ranks = {}});
    }
    return fr.job.groups[it->second];
  };
  for (const fs::path& file : files) {
    FrDumpInfo info;
    info.file = file.string();
    info.rank = rank_of_dump_file(file);
    if (info.rank < 0 && found.contains(file)) {
      fr.warnings.push_back(
          fmt::format("{}: left out: its name ends without a rank", file.string()));
      continue;
    }
    if (info.rank < 0) {
      throw usage_error(fmt::format(
          "{}: the name ends without a rank; a Flight Recorder dump is named by its rank "
          "(TORCH_FR_DUMP_TEMP_FILE followed by the rank, e.g. nccl_trace_rank_3)",
          file.string()));
    }
    if (auto [it, added] = seen_rank.try_emplace(info.rank, file.string()); !added) {
      throw usage_error(fmt::format("{}: a second dump of rank {} (the first: {})", file.string(),
                                    info.rank, it->second));
    }
    json doc;
    try {
      doc = load_document(file);
      if (!doc.is_object() ||
          (find_member(doc, "entries") == nullptr && find_member(doc, "pg_config") == nullptr)) {
        throw usage_error(fmt::format(
            "{}: not a Flight Recorder dump (no entries and no pg_config)", file.string()));
      }
    } catch (const Error& e) {
      if (!found.contains(file)) throw;
      fr.warnings.push_back(fmt::format("left out: {}", e.what()));
      seen_rank.erase(info.rank);
      continue;
    }
    const json* entries = find_member(doc, "entries");
    info.version = text_of(doc, "version");
    info.nccl_version = text_of(doc, "comm_lib_version");
    if (const json* config = find_member(doc, "pg_config");
        config != nullptr && config->is_object()) {
      for (const auto& [name, pg] : config->items()) {
        PgInfo& p = pgs[name];
        if (p.desc.empty()) p.desc = text_of(pg, "desc");
        std::vector<int> ranks = ranks_of(find_member(pg, "ranks"));
        if (p.ranks.empty()) {
          p.ranks = std::move(ranks);
        } else if (!ranks.empty() && ranks != p.ranks) {
          fr.warnings.push_back(fmt::format(
              "{}: process group {} lists other ranks than another dump's; the first kept",
              file.string(), excerpt(name, 40)));
        }
      }
    }
    std::map<std::string, Rank> ranks;  // this dump's rank in each group
    if (entries != nullptr && entries->is_array()) {
      for (const json& e : *entries) {
        if (info.entries >= kMaxFrEntries) {
          fr.warnings.push_back(fmt::format("{}: more than {} entries; the rest left out",
                                            file.string(), kMaxFrEntries));
          break;
        }
        std::string pg;
        if (const json* g = find_member(e, "process_group");
            g != nullptr && g->is_array() && !g->empty() && (*g)[0].is_string()) {
          pg = (*g)[0].get<std::string>();
        } else if (const std::optional<int64_t> id = files::member_as<int64_t>(e, "pg_id")) {
          pg = std::to_string(*id);
        }
        const bool p2p = files::member_as<bool>(e, "is_p2p").value_or(false);
        const std::optional<int64_t> seq =
            files::member_as<int64_t>(e, p2p ? "p2p_seq_id" : "collective_seq_id");
        const std::string name = text_of(e, "profiling_name");
        const std::string state = text_of(e, "state");
        if (pg.empty() || !seq || *seq < 0 || name.empty() ||
            (state != "completed" && state != "started" && state != "scheduled")) {
          ++info.left_out;
          continue;
        }
        ++info.entries;
        Call c;
        c.func = name.rfind("nccl:", 0) == 0 ? name.substr(5) : name;
        c.p2p = p2p;
        c.count = elements_of(find_member(e, "input_sizes"));
        c.datatype = dtypes_of(find_member(e, "input_dtypes"));
        const std::string key = p2p ? pg + " p2p" : pg;
        Rank& r = ranks[key];
        const std::string site = site_of(find_member(e, "frames"));
        r.ops.push_back(
            {.seq = static_cast<uint64_t>(*seq),
             .call = fr.job.call(c),
             .site = site.empty() ? kNoSite : fr.job.site(site),
             .state = state == "completed" ? OpState::kCompleted
                      : state == "started" ? OpState::kStarted
                                           : OpState::kScheduled,
             .start_wall_ns = files::member_as<int64_t>(e, "time_created_ns").value_or(0)});
        if (state != "completed") fr.job.stuck = true;
      }
    } else if (entries != nullptr) {
      fr.warnings.push_back(fmt::format("{}: entries is not a list; none read", file.string()));
    }
    if (info.left_out > 0) {
      fr.warnings.push_back(fmt::format(
          "{}: {} entries without a process group, a sequence number, a name or a known state "
          "were left out",
          file.string(), info.left_out));
    }
    // A rank of a process group that has no entry in it still took part: an empty history.
    if (const json* config = find_member(doc, "pg_config");
        config != nullptr && config->is_object()) {
      for (const auto& [name, pg] : config->items()) {
        const std::vector<int>& members = pgs[name].ranks;
        if (std::find(members.begin(), members.end(), info.rank) != members.end()) ranks[name];
      }
    }
    for (auto& [key, r] : ranks) {
      const std::string pg =
          key.size() > 4 && key.ends_with(" p2p") ? key.substr(0, key.size() - 4) : key;
      Group& g = group_of(key, pg, key != pg);
      const std::vector<int>& members = pgs[pg].ranks;
      auto at = std::find(members.begin(), members.end(), info.rank);
      r.rank = members.empty() ? info.rank : static_cast<int>(at - members.begin());
      if (!members.empty() && at == members.end()) {
        fr.warnings.push_back(fmt::format(
            "{}: rank {} is not among process group {}'s ranks; its entries there left out",
            file.string(), info.rank, excerpt(pg, 40)));
        continue;
      }
      r.where =
          fmt::format("global rank {} ({})", info.rank, fs::path(info.file).filename().string());
      g.ranks.push_back(std::move(r));
    }
    fr.dumps.push_back(std::move(info));
  }
  // A group's size is known once; ranks of it that left no dump are its missing ones.
  for (Group& g : fr.job.groups) {
    if (g.nranks == 0) continue;
    for (const Rank& r : g.ranks)
      g.nranks = std::max(g.nranks, r.rank + 1);
  }
  std::sort(fr.dumps.begin(), fr.dumps.end(),
            [](const FrDumpInfo& a, const FrDumpInfo& b) { return a.rank < b.rank; });
  normalise(fr.job);
  return fr;
}

}  // namespace commtool::crossrank

namespace commtool::crossrank {

namespace {

// "ranks 0,2: last completed all_reduce #5; in flight all_reduce #6 (started)" per set of ranks
// that stand alike.
std::string group_lines(const Job& job, const Group& g) {
  struct Where {
    std::optional<uint64_t> done;
    std::optional<uint32_t> done_call;
    std::optional<uint64_t> flight;
    std::optional<uint32_t> flight_call;
    OpState state = OpState::kCompleted;
  };
  std::vector<std::pair<Where, std::vector<int>>> sets;
  for (const Rank& r : g.ranks) {
    Where w;
    for (const Op& op : r.ops) {
      if (op.state == OpState::kCompleted) {
        w.done = op.seq;
        w.done_call = op.call;
      } else if (!w.flight) {
        w.flight = op.seq;
        w.flight_call = op.call;
        w.state = op.state;
      }
    }
    auto it = std::find_if(sets.begin(), sets.end(), [&](const auto& s) {
      return s.first.done == w.done && s.first.flight == w.flight && s.first.state == w.state;
    });
    if (it == sets.end()) {
      sets.push_back({w, {r.rank}});
    } else {
      it->second.push_back(r.rank);
    }
  }
  std::string out;
  for (const auto& [w, ranks] : sets) {
    out += fmt::format("    {}: ", ranks_text(ranks, g.nranks));
    out += w.done ? "last completed " + call_text(job, g, *w.done_call, *w.done)
                  : std::string("no operation completed (of those held)");
    if (w.flight) {
      out += fmt::format("; in flight {} ({})", call_text(job, g, *w.flight_call, *w.flight),
                         w.state == OpState::kStarted ? "started" : "enqueued, not started");
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string render_flight_recorder_text(const FlightRecorderJob& fr, const Verdict& v) {
  std::vector<int> ranks;
  std::string versions, nccl;
  for (const FrDumpInfo& d : fr.dumps) {
    ranks.push_back(d.rank);
    if (versions.find(d.version) == std::string::npos) {
      versions += (versions.empty() ? "" : ", ") + excerpt(d.version, 20);
    }
    if (nccl.find(d.nccl_version) == std::string::npos) {
      nccl += (nccl.empty() ? "" : ", ") + excerpt(d.nccl_version, 20);
    }
  }
  std::string out =
      fmt::format("Flight Recorder dumps of {} (PyTorch dump version {}, NCCL {}), {} file(s)\n",
                  ranks_text(ranks, 0), versions.empty() ? "unknown" : versions,
                  nccl.empty() ? "unknown" : nccl, fr.dumps.size());
  for (const std::string& w : fr.warnings)
    out += "WARNING: " + excerpt(w, 400) + "\n";
  out += "\n";
  if (v.error()) {
    out += v.hang ? "HANG: the dumps hold operations that never completed.\n"
                  : "FAULT: ranks disagree or are missing, though nothing is in flight.\n";
  } else if (!fr.job.stuck) {
    out += "No hang: every operation the dumps hold completed.\n";
  }
  out += render_text(fr.job, v);
  for (const Group& g : fr.job.groups) {
    out += fmt::format("\nprocess group {}{} ({}, positions by {}):\n", excerpt(g.id, 40),
                       g.name.empty() ? "" : fmt::format(" (\"{}\")", excerpt(g.name, 40)),
                       g.nranks > 0 ? fmt::format("{} ranks", g.nranks) : "rank count unknown",
                       g.id.ends_with(" p2p") ? "p2p_seq_id" : "collective_seq_id");
    out += group_lines(fr.job, g);
  }
  return out;
}

}  // namespace commtool::crossrank
