// run.json and the saved-run directory: the JSON half of record_io.hpp (the record lines are
// record_io.cpp). Every reader error names the key, and load_run adds the file.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/output_file.hpp"
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/saved_run_checks.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace commtool::tracing {

namespace {

constexpr int kSchemaVersion = 1;  // run.json
constexpr const char* kRunFile = "run.json";

// ---- JSON -------------------------------------------------------------------------------------

template <class T>
T get(const json& j, const char* key) {
  const json& value = files::json_member(j, key);
  if (!files::json_fits<T>(value)) {
    throw usage_error(fmt::format("\"{}\": {} has the wrong type or is out of range", key,
                                  excerpt(value.dump())));
  }
  try {
    return value.get<T>();
  } catch (const json::exception&) {
    throw usage_error(fmt::format("\"{}\": {} has the wrong type", key, excerpt(value.dump())));
  }
}

// j[key] when it is there, "" when it is not (a field older saved runs lack).
// Free text the file holds (host name, versions, notes) reaches the terminal when the run is
// reported: control characters and non-ASCII bytes are escaped as \xNN, length is bounded.
constexpr size_t kMaxShownText = 400;

std::string shown_string(const json& j, const char* key) {
  return excerpt(get<std::string>(j, key), kMaxShownText);
}

std::string optional_string(const json& j, const char* key) {
  return j.contains(key) ? shown_string(j, key) : std::string();
}

// A name the file holds, parsed; an unknown one is an error naming it, never a default that
// would analyse the run as something it was not.
template <class T, class Parse>
T parse_name(const std::string& text, Parse parse, const char* accepted) {
  if (std::optional<T> value = parse(text)) return *value;
  throw usage_error(fmt::format("\"{}\" is not one of {}", excerpt(text), accepted));
}

// The name under j[key], parsed, the key named in any error.
template <class T, class Parse>
T named(const json& j, const char* key, Parse parse, const char* accepted) {
  const std::string text = get<std::string>(j, key);
  try {
    return parse_name<T>(text, parse, accepted);
  } catch (const Error& e) {
    throw usage_error(fmt::format("\"{}\": {}", key, e.what()));
  }
}

// An element of the run's "modes" list (get_list names its index).
CompletionMode mode_element(const json& e) {
  if (!e.is_string()) throw usage_error(fmt::format("expected a string, got {}", e.type_name()));
  return parse_name<CompletionMode>(e.get<std::string>(), parse_completion_mode,
                                    kCompletionModeNames);
}

CompletionMode get_mode(const json& j) {
  return named<CompletionMode>(j, "mode", parse_completion_mode, kCompletionModeNames);
}

// Runs parse over every element of j[key], naming the element in any error.
template <class T, class Parse>
std::vector<T> get_list(const json& j, const char* key, Parse parse) {
  const json& list = files::json_member(j, key);
  if (!list.is_array()) throw usage_error(fmt::format("\"{}\": expected an array", key));
  std::vector<T> out;
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      out.push_back(parse(list[i]));
    } catch (const Error& e) {
      throw usage_error(fmt::format("\"{}\"[{}]: {}", key, i, e.what()));
    }
  }
  return out;
}

json sample_to_json(const OperationSample& s) {
  return {{"seq", s.seq},
          {"bytes", s.bytes},
          {"mode", to_string(s.mode)},
          {"poll_ms", s.poll_ms},
          {"traced", s.traced},
          {"time_us", s.time_us},
          {"host_call_us", s.host_call_us},
          {"wrong_elements", s.wrong_elements}};
}

OperationSample sample_from_json(const json& j) {
  OperationSample s;
  s.seq = get<uint64_t>(j, "seq");
  s.bytes = get<uint64_t>(j, "bytes");
  s.mode = get_mode(j);
  s.poll_ms = get<int>(j, "poll_ms");
  s.traced = get<bool>(j, "traced");
  s.time_us = get<double>(j, "time_us");
  s.host_call_us = get<double>(j, "host_call_us");
  s.wrong_elements = get<uint64_t>(j, "wrong_elements");
  return s;
}

json scope_to_json(const StreamScopeSample& s) {
  return {{"seq", s.seq},
          {"mode", to_string(s.mode)},
          {"poll_ms", s.poll_ms},
          {"host_wait_us", s.host_wait_us},
          {"complete_at_wait_return", s.complete_at_wait_return},
          {"b_before_a_us", s.b_before_a_us},
          {"wrong_elements", s.wrong_elements}};
}

StreamScopeSample scope_from_json(const json& j) {
  StreamScopeSample s;
  s.seq = get<uint64_t>(j, "seq");
  s.mode = get_mode(j);
  s.poll_ms = get<int>(j, "poll_ms");
  s.host_wait_us = get<double>(j, "host_wait_us");
  s.complete_at_wait_return = get<bool>(j, "complete_at_wait_return");
  s.b_before_a_us = get<double>(j, "b_before_a_us");
  s.wrong_elements = get<uint64_t>(j, "wrong_elements");
  return s;
}

json batch_to_json(const BatchSample& s) {
  return {{"first_seq", s.first_seq},
          {"bytes", s.bytes},
          {"ops", s.ops},
          {"time_us", s.time_us},
          {"wrong_elements", s.wrong_elements}};
}

BatchSample batch_from_json(const json& j) {
  BatchSample s;
  s.first_seq = get<uint64_t>(j, "first_seq");
  s.bytes = get<uint64_t>(j, "bytes");
  s.ops = get<int>(j, "ops");
  s.time_us = get<double>(j, "time_us");
  s.wrong_elements = get<uint64_t>(j, "wrong_elements");
  return s;
}

// The plugin's own line format, so a profiler record reads the same in its file and in run.json.
nccl_profiler::CollectiveRecord nccl_from_json(const json& j) {
  auto r = nccl_profiler::parse_json_line(j.dump());
  if (!r) throw usage_error(fmt::format("{} is not a profiler record", j.dump()));
  return *r;
}

// ---- files ------------------------------------------------------------------------------------

std::string records_file(int rank) {
  return fmt::format("records-rank{}.txt", rank);
}

bool is_records_file(std::string_view name) {
  constexpr std::string_view kPrefix = "records-rank", kSuffix = ".txt";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  std::string_view rank =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return !rank.empty() &&
         std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string read_file(const fs::path& path) {
  return files::read_input_file(path.string());
}

// Each records-rank<R>.txt in the directory with the rank it names, by name; a number too
// long for any rank reads as -1 (not a rank of any run).
std::vector<std::pair<std::string, long long>> records_files_in(const fs::path& dir) {
  std::vector<std::pair<std::string, long long>> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!is_records_file(name)) continue;
    const std::string digits = name.substr(12, name.size() - 12 - 4);
    long long rank = digits.size() > 9 ? -1 : std::stoll(digits);
    files.emplace_back((dir / name).string(), rank);
  }
  std::sort(files.begin(), files.end());
  return files;
}

void write_file(const fs::path& path, const std::string& content) {
  try {
    files::write_atomically(path.string(), content, "saved run file");
  } catch (const Error& e) {
    throw Error(ExitCode::kEnvironment, fmt::format("cannot save the run: {}", e.what()));
  }
}

}  // namespace

nlohmann::json to_json(const RankRun& rank, bool with_records) {
  json samples = json::array(), scope = json::array(), batches = json::array(),
       nccl = json::array();
  for (const OperationSample& s : rank.samples)
    samples.push_back(sample_to_json(s));
  for (const BatchSample& s : rank.batches)
    batches.push_back(batch_to_json(s));
  for (const StreamScopeSample& s : rank.scope)
    scope.push_back(scope_to_json(s));
  for (const auto& c : rank.nccl)
    nccl.push_back(json::parse(nccl_profiler::to_json_line(c)));
  json j = {{"rank", rank.rank},
            {"device", rank.device},
            {"bus_id", rank.bus_id},
            {"gpu_name", rank.gpu_name},
            {"host", rank.host},
            {"plugin_status", rank.plugin_status},
            {"clock_note", rank.clock_note},
            {"samples", std::move(samples)},
            {"scope", std::move(scope)},
            {"batches", std::move(batches)},
            {"nccl", std::move(nccl)}};
  if (with_records) j["records"] = serialize_records(rank.records);
  return j;
}

RankRun rank_run_from_json(const nlohmann::json& j) {
  RankRun r;
  r.rank = get<int>(j, "rank");
  r.device = get<int>(j, "device");
  r.bus_id = shown_string(j, "bus_id");
  r.gpu_name = shown_string(j, "gpu_name");
  r.host = optional_string(j, "host");
  r.plugin_status = shown_string(j, "plugin_status");
  r.clock_note = shown_string(j, "clock_note");
  r.samples = get_list<OperationSample>(j, "samples", sample_from_json);
  r.scope = get_list<StreamScopeSample>(j, "scope", scope_from_json);
  if (j.contains("batches")) {  // runs saved before batches were measured have none
    r.batches = get_list<BatchSample>(j, "batches", batch_from_json);
  }
  r.nccl = get_list<nccl_profiler::CollectiveRecord>(j, "nccl", nccl_from_json);
  if (auto text = j.find("records"); text != j.end()) {  // a worker's result carries them
    if (!text->is_string()) throw usage_error("\"records\": expected the records as a string");
    r.records =
        parse_records(text->get_ref<const std::string&>(), fmt::format("rank {} records", r.rank));
  }
  return r;
}

nlohmann::json to_json(const RunMeta& m) {
  json modes = json::array();
  for (CompletionMode mode : m.modes)
    modes.push_back(to_string(mode));
  return {{"collective", to_string(m.collective)},
          {"dtype", to_string(m.dtype)},
          {"op", to_string(m.op)},
          {"inplace", m.inplace},
          {"root", m.root},
          {"nranks", m.nranks},
          {"comm", nccl::to_string(m.comm)},
          {"sizes", m.sizes},
          {"modes", modes},
          {"poll_ms", m.poll_ms},
          {"iters", m.iters},
          {"warmup", m.warmup},
          {"cupti", m.cupti},
          {"untraced_pass", m.untraced_pass},
          {"batches", m.batches},
          {"scope_samples", m.scope_samples},
          {"scope_sleep_ms", m.scope_sleep_ms},
          {"scope_bytes", m.scope_bytes},
          {"nccl_version", m.nccl_version},
          {"nccl_library", m.nccl_library},
          {"commtool_version", m.commtool_version},
          {"started_at", m.started_at},
          {"hostname", m.hostname},
          {"saved_at", m.saved_at}};
}

RunMeta run_meta_from_json(const nlohmann::json& j) {
  RunMeta m;
  m.collective = named<Collective>(j, "collective", parse_collective,
                                   "allreduce, allgather, reducescatter, broadcast, reduce, "
                                   "alltoall, sendrecv");
  m.dtype = named<DataType>(j, "dtype", parse_data_type,
                            "int8, uint8, int32, uint32, int64, uint64, half, float, double, "
                            "bfloat16");
  m.op = named<ReduceOp>(j, "op", parse_reduce_op, "sum, prod, min, max, avg");
  m.inplace = get<bool>(j, "inplace");
  m.root = get<int>(j, "root");
  m.nranks = get<int>(j, "nranks");
  m.comm = j.contains("comm")
               ? named<nccl::CommMode>(j, "comm", nccl::parse_comm_mode, "blocking, nonblocking")
               : nccl::CommMode::kNonBlocking;
  m.sizes = get<std::vector<uint64_t>>(j, "sizes");
  m.modes = get_list<CompletionMode>(j, "modes", mode_element);
  m.poll_ms = get<int>(j, "poll_ms");
  m.iters = get<int>(j, "iters");
  m.warmup = get<int>(j, "warmup");
  m.cupti = get<bool>(j, "cupti");
  m.untraced_pass = get<bool>(j, "untraced_pass");
  m.batches = j.contains("batches") ? get<int>(j, "batches") : 0;
  m.scope_samples = get<int>(j, "scope_samples");
  m.scope_sleep_ms = get<double>(j, "scope_sleep_ms");
  m.scope_bytes = get<uint64_t>(j, "scope_bytes");
  m.nccl_version = shown_string(j, "nccl_version");
  m.nccl_library = shown_string(j, "nccl_library");
  // Where, when and by what: runs saved before a field was written read as unknown ("").
  m.commtool_version = optional_string(j, "commtool_version");
  m.started_at = optional_string(j, "started_at");
  m.hostname = optional_string(j, "hostname");
  m.saved_at = optional_string(j, "saved_at");
  return m;
}

// A directory save_run may write into: empty, or holding only what an earlier save_run left
// (its files and, after a crash, write_atomically's temporaries). Anything else is the user's.
void check_save_dir(const std::string& path) {
  files::check_name_length(path, "saved run directory");
  files::refuse_planted_links(path, "saved run directory");
  const fs::path dir(path);
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    // It will be created: the nearest directory that exists above it must take new entries.
    fs::path parent = fs::absolute(dir, ec).parent_path();
    while (!parent.empty() && !fs::exists(parent, ec) && parent != parent.parent_path())
      parent = parent.parent_path();
    // Tried, not inferred from permission bits: root passes those everywhere, even in /proc.
    std::string probe = (parent / ".commtool-probe-XXXXXX").string();
    if (!fs::is_directory(parent, ec) || ::mkdtemp(probe.data()) == nullptr) {
      throw usage_error(fmt::format("{}: cannot be created: {} is not a writable directory", path,
                                    parent.string()));
    }
    ::rmdir(probe.c_str());
    return;
  }
  if (!fs::is_directory(dir, ec)) {
    throw usage_error(fmt::format("{}: exists and is not a directory", dir.string()));
  }
  bool has_run = false;
  std::set<std::string> foreign;  // sorted, so the message names the same file everywhere
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name == kRunFile) {
      has_run = true;
    } else if (!is_records_file(name) && !name.starts_with(".commtool-")) {
      foreign.insert(std::move(name));
    }
  }
  if (ec) throw Error(ExitCode::kEnvironment, fmt::format("{}: {}", dir.string(), ec.message()));
  if (!foreign.empty()) {
    throw usage_error(fmt::format(
        "{}: not empty and not a saved run ({} is not one of its files); give a new or empty "
        "directory",
        dir.string(), *foreign.begin()));
  }
  if (!has_run && !fs::is_empty(dir, ec)) {
    throw usage_error(
        fmt::format("{}: not empty and has no {}: not a saved run; give a new or empty directory",
                    dir.string(), kRunFile));
  }
}

void save_run(const std::string& dir, const TraceRun& run) {
  fs::path root(dir);
  check_save_dir(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    throw Error(ExitCode::kEnvironment,
                fmt::format("{}: cannot create the directory: {}", dir, ec.message()));
  }
  json ranks = json::array();
  std::set<std::string> written;
  for (const RankRun& r : run.ranks) {
    write_file(root / records_file(r.rank), serialize_records(r.records));
    written.insert(records_file(r.rank));
    ranks.push_back(to_json(r, /*with_records=*/false));
  }
  // run.json last: a reader that finds it finds the records it names.
  RunMeta meta = run.meta;
  meta.saved_at = utc_now_iso8601();
  if (meta.hostname.empty()) meta.hostname = host_name_here();
  json doc = {{"schema_version", kSchemaVersion}, {"meta", to_json(meta)}, {"ranks", ranks}};
  write_file(root / kRunFile, doc.dump(2) + "\n");
  // An earlier save with more ranks left files that this run does not have.
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (is_records_file(name) && !written.contains(name)) fs::remove(entry.path(), ec);
  }
}

TraceRun load_run(const std::string& dir) {
  fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw usage_error(fmt::format("{}: {}; give a directory written by commtool trace --save", dir,
                                  fs::exists(root, ec) ? "not a directory" : "no such directory"));
  }
  fs::path run_path = root / kRunFile;
  if (!files::input_exists(run_path.string())) {
    throw usage_error(fmt::format("{}: missing; {} is not a saved run (commtool trace --save)",
                                  run_path.string(), dir));
  }
  json doc;
  try {
    doc = files::parse_json_bounded(read_file(run_path), run_path.string());
  } catch (const json::exception& e) {  // malformed, or a number no double holds (1e999)
    throw usage_error(fmt::format("{}: not valid JSON: {}", run_path.string(), e.what()));
  }
  TraceRun run;
  try {
    int version = get<int>(doc, "schema_version");
    if (version != kSchemaVersion) {
      throw usage_error(fmt::format("schema_version {} is not supported; this build reads {}",
                                    version, kSchemaVersion));
    }
    run.meta = run_meta_from_json(files::json_member(doc, "meta"));
    run.ranks = get_list<RankRun>(doc, "ranks", rank_run_from_json);
  } catch (const Error& e) {
    throw usage_error(fmt::format("{}: {}", run_path.string(), e.what()));
  }
  run.saved = true;
  check_run_values(run, run_path.string());
  check_ranks(run, records_files_in(root), dir);
  std::sort(run.ranks.begin(), run.ranks.end(),
            [](const RankRun& a, const RankRun& b) { return a.rank < b.rank; });
  for (RankRun& r : run.ranks) {
    fs::path path = root / records_file(r.rank);
    if (!fs::exists(path, ec)) {
      throw usage_error(fmt::format("{}: missing; run.json lists rank {}", path.string(), r.rank));
    }
    const std::string text = read_file(path);
    size_t cut_line = 0;
    r.records = parse_records(text, path.string(), &cut_line);
    std::string warning = check_rank_records(r, run.meta, text, path.string(), cut_line);
    if (!warning.empty()) run.warnings.push_back(std::move(warning));
  }
  return run;
}

}  // namespace commtool::tracing
