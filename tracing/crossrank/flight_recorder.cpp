#include "tracing/crossrank/flight_recorder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <thread>

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

// A JSON value behind the same questions as a pickle::Value, so that one reader takes a dump in
// either form: a missing key or index is a value that is not there.
class JsonValue {
 public:
  JsonValue() = default;
  explicit JsonValue(const json* j) : j_(j) {}
  bool valid() const { return j_ != nullptr; }
  bool is_dict() const { return j_ != nullptr && j_->is_object(); }
  bool is_list() const { return j_ != nullptr && j_->is_array(); }
  size_t size() const { return is_list() || is_dict() ? j_->size() : 0; }
  JsonValue operator[](size_t i) const {
    return is_list() && i < j_->size() ? JsonValue(&(*j_)[i]) : JsonValue();
  }
  JsonValue find(std::string_view key) const {
    if (!is_dict()) return {};
    const auto it = j_->find(key);
    return it != j_->end() ? JsonValue(&*it) : JsonValue();
  }
  std::optional<std::string_view> text() const {
    if (j_ == nullptr || !j_->is_string()) return std::nullopt;
    return std::string_view(j_->get_ref<const std::string&>());
  }
  std::optional<int64_t> integer() const {
    if (j_ == nullptr || !files::json_fits<int64_t>(*j_)) return std::nullopt;
    return j_->get<int64_t>();
  }
  std::optional<uint64_t> unsigned_integer() const {
    if (j_ == nullptr || !files::json_fits<uint64_t>(*j_)) return std::nullopt;
    return j_->get<uint64_t>();
  }
  std::optional<bool> boolean() const {
    if (j_ == nullptr || !j_->is_boolean()) return std::nullopt;
    return j_->get<bool>();
  }
  // Each member of a dict, in the document's order, with its key.
  template <class F>
  void each_member(F&& f) const {
    if (!is_dict()) return;
    for (const auto& [k, v] : j_->items())
      f(std::string_view(k), JsonValue(&v));
  }

 private:
  const json* j_ = nullptr;
};

// Each member of a pickled dict with its key; a key that is an int is its digits (as load()'s
// JSON writes it), any other key is passed over.
template <class F>
void each_member(const pickle::Value& v, F&& f) {
  for (size_t i = 0; i < v.size(); ++i) {
    const pickle::Value key = v.key(i);
    if (const std::optional<std::string_view> k = key.text()) {
      f(*k, v.value(i));
    } else if (const std::optional<int64_t> n = key.integer()) {
      f(std::string_view(std::to_string(*n)), v.value(i));
    }
  }
}
template <class F>
void each_member(const JsonValue& v, F&& f) {
  v.each_member(std::forward<F>(f));
}

template <class V>
std::string text_of(const V& v, std::string_view key) {
  return std::string(v.find(key).text().value_or(""));
}

// pg_config's ranks: "[0, 1, 2]" as PyTorch writes them, or a list.
template <class V>
std::vector<int> ranks_of(const V& v) {
  std::vector<int> out;
  if (v.is_list()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const std::optional<int64_t> r = v[i].integer();
      if (r && *r >= 0 && *r <= kMaxGroupRank) out.push_back(static_cast<int>(*r));
    }
    return out;
  }
  const std::string_view s = v.text().value_or("");
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
template <class V>
std::optional<uint64_t> elements_of(const V& sizes) {
  if (!sizes.is_list()) return std::nullopt;
  uint64_t total = 0;
  for (size_t i = 0, shapes = sizes.size(); i < shapes; ++i) {
    const V shape = sizes[i];
    if (!shape.is_list()) return std::nullopt;
    uint64_t n = 1;
    for (size_t j = 0, dims = shape.size(); j < dims; ++j) {
      const std::optional<uint64_t> x = shape[j].unsigned_integer();
      if (!x) return std::nullopt;
      if (*x != 0 && n > UINT64_MAX / *x) return std::nullopt;
      n *= *x;
    }
    if (total > UINT64_MAX - n) return std::nullopt;
    total += n;
  }
  return total;
}

template <class V>
std::string dtypes_of(const V& v) {
  std::string out;
  for (size_t i = 0, n = v.is_list() ? v.size() : 0; i < n; ++i) {
    const std::optional<std::string_view> d = v[i].text();
    if (!d) continue;
    if (!out.empty()) out += ",";
    out += *d;
    if (out.size() > 200) break;
  }
  return out;
}

// "train.py:88 step": the first frame outside installed packages (torch among them).
template <class V>
std::string site_of(const V& frames) {
  for (size_t i = 0, n = frames.is_list() ? frames.size() : 0; i < n; ++i) {
    const V f = frames[i];
    const std::string_view file = f.find("filename").text().value_or("");
    // Library frames (torch's own, anything installed) come first; the job's code is below.
    if (file.empty() || file.find("/site-packages/") != std::string_view::npos ||
        file.find("/dist-packages/") != std::string_view::npos || file.starts_with("<")) {
      continue;
    }
    const size_t slash = file.rfind('/');
    return fmt::format("{}:{} {}", slash == std::string_view::npos ? file : file.substr(slash + 1),
                       f.find("line").integer().value_or(0), text_of(f, "name"));
  }
  return "";
}

struct PgInfo {
  std::string desc;
  std::vector<int> ranks;  // global ranks, in the group's order
};

// The values the reader below visits in a dump, counted up to `limit`: a pickle's shared values
// are visited once per reference, so a few kB whose entries all name one list of a million
// shapes would have the reader walk a trillion of them. A dump that costs more is refused as
// load() refuses one that copies to more than its max_values.
template <class V>
uint64_t walk_cost(const V& doc, uint64_t limit) {
  uint64_t cost = 0;
  const auto spend = [&](uint64_t n) {
    cost = n > limit - std::min(cost, limit) ? limit + 1 : cost + n;
    return cost <= limit;
  };
  // A dict's members two levels down: each member, each item of a member that is a container,
  // and the items of those (an entry's input_sizes are shapes of dims, its frames dicts). A
  // lookup reads a dict's keys, so a dict visited costs its size.
  const auto members = [&](const V& dict) {
    const size_t n = dict.size();
    if (!spend(1 + n)) return false;
    for (size_t i = 0; i < n; ++i) {
      const V v = dict.value(i);
      const size_t items = v.size();
      if (!spend(items)) return false;
      for (size_t j = 0; j < items && v.is_list(); ++j)
        if (!spend(v[j].size())) return false;
    }
    return true;
  };
  if (!spend(doc.size())) return cost;
  const V config = doc.find("pg_config");
  for (size_t i = 0, n = config.size(); i < n; ++i)
    if (!members(config.value(i))) return cost;
  const V entries = doc.find("entries");
  for (size_t i = 0, n = entries.is_list() ? entries.size() : 0; i < n; ++i)
    if (!members(entries[i])) return cost;
  return cost;
}

// A dump read into memory, in either form.
struct LoadedDump {
  std::optional<pickle::Document> pickled;
  json parsed;               // when not a pickle
  std::exception_ptr error;  // why it could not be read (an Error)
};

LoadedDump load_document(const fs::path& file) {
  LoadedDump d;
  try {
    std::string bytes = files::read_input_file(file.string());
    try {
      if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
        d.pickled = pickle::Document::parse(std::move(bytes));
        const uint64_t limit = pickle::PickleLimits{}.max_values;
        if (walk_cost(d.pickled->root(), limit) > limit) {
          throw usage_error(fmt::format(
              "more than {} values once shared ones are counted at each reference", limit));
        }
      } else {
        d.parsed = files::parse_json_bounded(bytes, file.string());
      }
    } catch (const json::exception& e) {
      throw usage_error(
          fmt::format("{}: not a Flight Recorder dump (neither a pickle nor JSON: {})",
                      file.string(), e.what()));
    } catch (const Error& e) {
      throw usage_error(fmt::format("{}: {}", file.string(), e.what()));
    }
  } catch (...) {  // an Error, or bad_alloc: the taker rethrows it on the caller's thread
    d.error = std::current_exception();
  }
  return d;
}

}  // namespace

namespace {

// The job, built one dump at a time in the files' order.
class JobBuilder {
 public:
  explicit JobBuilder(const std::set<fs::path>& found) : found_(found) {
    fr_.job.stuck = false;
    fr_.job.absent_means =
        "no dump: the process died or was killed before the watchdog wrote one, "
        "or the dump is elsewhere";
    fr_.job.absent_check =
        "look for its dump on its node (TORCH_FR_DUMP_TEMP_FILE, TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
        "in older PyTorch, names the files' prefix; the watchdog writes one on a timeout with "
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_NCCL_TRACE_BUFFER_SIZE above 0) and in the job's "
        "log for how its process ended";
  }

  // One dump, read (`loaded`), into the job; a dump the user did not name that cannot be read
  // is left out with a warning.
  void take(const fs::path& file, const LoadedDump& loaded) {
    FrDumpInfo info;
    info.file = file.string();
    info.rank = rank_of_dump_file(file);
    if (info.rank < 0 && found_.contains(file)) {
      fr_.warnings.push_back(
          fmt::format("{}: left out: its name ends without a rank", file.string()));
      return;
    }
    if (info.rank < 0) {
      throw usage_error(fmt::format(
          "{}: the name ends without a rank; a Flight Recorder dump is named by its rank "
          "(TORCH_FR_DUMP_TEMP_FILE followed by the rank, e.g. nccl_trace_rank_3)",
          file.string()));
    }
    if (auto [it, added] = seen_rank_.try_emplace(info.rank, file.string()); !added) {
      throw usage_error(fmt::format("{}: a second dump of rank {} (the first: {})", file.string(),
                                    info.rank, it->second));
    }
    try {
      if (loaded.error) std::rethrow_exception(loaded.error);
      const bool dump = loaded.pickled
                            ? loaded.pickled->root().is_dict() &&
                                  (loaded.pickled->root().find("entries").valid() ||
                                   loaded.pickled->root().find("pg_config").valid())
                            : loaded.parsed.is_object() && (loaded.parsed.contains("entries") ||
                                                            loaded.parsed.contains("pg_config"));
      if (!dump) {
        throw usage_error(fmt::format(
            "{}: not a Flight Recorder dump (no entries and no pg_config)", file.string()));
      }
    } catch (const Error& e) {
      if (!found_.contains(file)) throw;
      fr_.warnings.push_back(fmt::format("left out: {}", e.what()));
      seen_rank_.erase(info.rank);
      return;
    }
    if (loaded.pickled) {
      take_document(loaded.pickled->root(), info);
    } else {
      take_document(JsonValue(&loaded.parsed), info);
    }
    fr_.dumps.push_back(std::move(info));
  }

  FlightRecorderJob finish() {
    // A group's size is known once; ranks of it that left no dump are its missing ones.
    for (Group& g : fr_.job.groups) {
      if (g.nranks == 0) continue;
      for (const Rank& r : g.ranks)
        g.nranks = std::max(g.nranks, r.rank + 1);
    }
    std::sort(fr_.dumps.begin(), fr_.dumps.end(),
              [](const FrDumpInfo& a, const FrDumpInfo& b) { return a.rank < b.rank; });
    normalise(fr_.job);
    return std::move(fr_);
  }

 private:
  template <class V>
  void take_document(const V& doc, FrDumpInfo& info) {
    info.version = text_of(doc, "version");
    info.nccl_version = text_of(doc, "comm_lib_version");
    const V config = doc.find("pg_config");
    take_pg_config(config, info);
    std::map<std::string, Rank> ranks;  // this dump's rank in each group
    const V entries = doc.find("entries");
    if (entries.is_list()) {
      for (size_t at = 0, n = entries.size(); at < n; ++at) {
        if (info.entries >= kMaxFrEntries) {
          fr_.warnings.push_back(
              fmt::format("{}: more than {} entries; the rest left out", info.file, kMaxFrEntries));
          break;
        }
        take_entry(entries[at], info, ranks);
      }
    } else if (entries.valid()) {
      fr_.warnings.push_back(fmt::format("{}: entries is not a list; none read", info.file));
    }
    if (info.left_out > 0) {
      fr_.warnings.push_back(fmt::format(
          "{}: {} entries without a process group, a sequence number, a name or a known state "
          "were left out",
          info.file, info.left_out));
    }
    // A rank of a process group that has no entry in it still took part: an empty history.
    each_member(config, [&](std::string_view name, const V&) {
      const std::vector<int>& members = pgs_[std::string(name)].ranks;
      if (std::find(members.begin(), members.end(), info.rank) != members.end()) {
        ranks[std::string(name)];
      }
    });
    join_groups(ranks, info);
  }

  template <class V>
  void take_pg_config(const V& config, const FrDumpInfo& info) {
    each_member(config, [&](std::string_view name, const V& pg) {
      PgInfo& p = pgs_[std::string(name)];
      if (p.desc.empty()) p.desc = text_of(pg, "desc");
      std::vector<int> ranks = ranks_of(pg.find("ranks"));
      if (p.ranks.empty()) {
        p.ranks = std::move(ranks);
      } else if (!ranks.empty() && ranks != p.ranks) {
        fr_.warnings.push_back(fmt::format(
            "{}: process group {} lists other ranks than another dump's; the first kept", info.file,
            excerpt(std::string(name), 40)));
      }
    });
  }

  // One entry into this dump's history in its group (`ranks`: by group key), or counted as left
  // out when it lacks what the verdict needs.
  template <class V>
  void take_entry(const V& e, FrDumpInfo& info, std::map<std::string, Rank>& ranks) {
    std::string pg;
    if (const std::optional<std::string_view> g = e.find("process_group")[0].text()) {
      pg = *g;
    } else if (const std::optional<int64_t> id = e.find("pg_id").integer()) {
      pg = std::to_string(*id);
    }
    const bool p2p = e.find("is_p2p").boolean().value_or(false);
    const std::optional<int64_t> seq = e.find(p2p ? "p2p_seq_id" : "collective_seq_id").integer();
    const std::string name = text_of(e, "profiling_name");
    const std::string state = text_of(e, "state");
    if (pg.empty() || !seq || *seq < 0 || name.empty() ||
        (state != "completed" && state != "started" && state != "scheduled")) {
      ++info.left_out;
      return;
    }
    ++info.entries;
    Call c;
    c.func = name.rfind("nccl:", 0) == 0 ? name.substr(5) : name;
    c.p2p = p2p;
    c.count = elements_of(e.find("input_sizes"));
    c.datatype = dtypes_of(e.find("input_dtypes"));
    Rank& r = ranks[p2p ? pg + " p2p" : pg];
    const std::string site = site_of(e.find("frames"));
    r.ops.push_back({.seq = static_cast<uint64_t>(*seq),
                     .call = fr_.job.call(c),
                     .site = site.empty() ? kNoSite : fr_.job.site(site),
                     .state = state == "completed" ? OpState::kCompleted
                              : state == "started" ? OpState::kStarted
                                                   : OpState::kScheduled,
                     .start_wall_ns = e.find("time_created_ns").integer().value_or(0)});
    if (state != "completed") fr_.job.stuck = true;
  }

  // This dump's history in each group joins the group, at its index among the group's ranks.
  void join_groups(std::map<std::string, Rank>& ranks, const FrDumpInfo& info) {
    for (auto& [key, r] : ranks) {
      const std::string pg =
          key.size() > 4 && key.ends_with(" p2p") ? key.substr(0, key.size() - 4) : key;
      Group& g = group_of(key, pg, key != pg);
      const std::vector<int>& members = pgs_[pg].ranks;
      auto at = std::find(members.begin(), members.end(), info.rank);
      r.rank = members.empty() ? info.rank : static_cast<int>(at - members.begin());
      if (!members.empty() && at == members.end()) {
        fr_.warnings.push_back(fmt::format(
            "{}: rank {} is not among process group {}'s ranks; its entries there left out",
            info.file, info.rank, excerpt(pg, 40)));
        continue;
      }
      r.where =
          fmt::format("global rank {} ({})", info.rank, fs::path(info.file).filename().string());
      g.ranks.push_back(std::move(r));
    }
  }

  Group& group_of(const std::string& key, const std::string& pg, bool p2p) {
    auto [it, added] = group_index_.try_emplace(key, fr_.job.groups.size());
    if (added) {
      const PgInfo& info = pgs_[pg];
      fr_.job.groups.push_back({.id = p2p ? pg + " p2p" : pg,
                                .name = info.desc,
                                .nranks = static_cast<int>(info.ranks.size()),
                                .kind = "process group",
                                .position = "#",
                                .ranks = {}});
    }
    return fr_.job.groups[it->second];
  }

  const std::set<fs::path>& found_;
  FlightRecorderJob fr_;
  std::map<std::string, size_t> group_index_;  // "<pg name>" or "<pg name> p2p"
  std::map<int, std::string> seen_rank_;
  std::map<std::string, PgInfo> pgs_;
};

}  // namespace

FlightRecorderJob read_flight_recorder(const std::vector<fs::path>& files,
                                       const std::set<fs::path>& found) {
  JobBuilder job(found);
  // Dumps are read and parsed ahead on other threads (the parse is most of the time), a window
  // of them at a time, while this thread takes them in the files' order: the job, its warnings
  // and its verdict are the same whatever the threads did, and at most the window's dumps are
  // in memory at once.
  const size_t window = 2 * std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::deque<std::future<LoadedDump>> ahead;
  size_t next = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    while (next < files.size() && ahead.size() < window) {
      ahead.push_back(std::async(std::launch::async, load_document, files[next]));
      ++next;
    }
    const LoadedDump loaded = ahead.front().get();
    ahead.pop_front();
    job.take(files[i], loaded);
  }
  return job.finish();
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
