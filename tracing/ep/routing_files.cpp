// diagnose ep's input files: a real model's per-expert routing counts (--routing) and an
// expert-to-rank map (--placement), each as JSON or CSV (ep_routing.hpp gives the formats).
// Apart from the routing and traffic code because it is all checking: every refusal names the
// file with the line and field (CSV) or the JSON path, so a bad dump is fixed without guessing.
#include "tracing/ep/ep_routing.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "probes/base/error.hpp"
#include "probes/base/input_file.hpp"
#include "probes/base/parse_number.hpp"

using nlohmann::json;

namespace commtool::tracing {

namespace {

std::string read_text(const std::string& path) {
  return files::read_input_file(path, kMaxRoutingFileBytes);
}

}  // namespace

// ---- files: CSV and JSON helpers --------------------------------------------------------------

namespace {

struct CsvRow {
  size_t line = 0;  // 1-based
  std::vector<std::string> fields;
};

std::string trim(std::string_view s) {
  const char* space = " \t\r";
  size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(space) - first + 1));
}

[[noreturn]] void csv_fail(const std::string& source, size_t line, std::string_view field,
                           const std::string& what) {
  throw usage_error(fmt::format("{}:{}: {}: {}", source, line, field, what));
}

// Non-blank, non-comment lines split at commas, fields trimmed; at most kMaxRoutingEntries of
// them (and a header), each of at most a few fields, so that no file can make this allocate
// more than a small multiple of its own size. Views into `text` until a row is kept.
std::vector<CsvRow> csv_rows(const std::string& text, const std::string& source,
                             size_t max_fields) {
  std::vector<CsvRow> rows;
  size_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    ++number;
    const std::string content = trim(line.substr(0, std::min<size_t>(line.size(), 4096)));
    if (content.empty() || content[0] == '#') continue;
    if (line.size() > 4096) csv_fail(source, number, "line", "longer than 4096 bytes");
    if (rows.size() > kMaxRoutingEntries) {
      throw usage_error(
          fmt::format("{}: more than {} data lines; commtool reads at most that "
                      "many (layer, expert) entries",
                      source, kMaxRoutingEntries));
    }
    CsvRow row{number, {}};
    for (size_t from = 0;;) {
      const size_t comma = content.find(',', from);
      row.fields.push_back(trim(std::string_view(content).substr(from, comma - from)));
      if (comma == std::string::npos) break;
      from = comma + 1;
      if (row.fields.size() > max_fields) {
        csv_fail(source, number, "line", fmt::format("more than {} fields", max_fields));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// Drops a header row if there is one: one whose first field is not a number must be exactly
// one of `headers` (comma-joined column names). Returns the column names in use.
std::vector<std::string> take_header(std::vector<CsvRow>& rows, const std::string& source,
                                     const std::vector<std::string>& headers) {
  auto columns = [](const std::string& header) {
    std::vector<std::string> names;
    std::istringstream in(header);
    for (std::string name; std::getline(in, name, ',');)
      names.push_back(name);
    return names;
  };
  if (rows.empty()) throw usage_error(fmt::format("{}: no data lines", source));
  const CsvRow& first = rows.front();  // csv_rows gives every row at least one field
  bool numeric =
      !first.fields[0].empty() &&
      (std::isdigit(static_cast<unsigned char>(first.fields[0][0])) || first.fields[0][0] == '-');
  if (numeric) {  // no header: the columns are the header of that many fields
    for (const std::string& h : headers)
      if (columns(h).size() == first.fields.size()) return columns(h);
    csv_fail(source, first.line, "line",
             fmt::format("{} fields; expected the columns {}", first.fields.size(),
                         fmt::join(headers, " or ")));
  }
  for (const std::string& h : headers) {
    if (first.fields == columns(h)) {
      rows.erase(rows.begin());
      if (rows.empty()) throw usage_error(fmt::format("{}: no data lines", source));
      return columns(h);
    }
  }
  csv_fail(source, first.line, "header",
           fmt::format("expected {}, got \"{}\"", fmt::join(headers, " or "),
                       excerpt(fmt::format("{}", fmt::join(first.fields, ",")))));
}

uint64_t csv_number(const std::string& source, const CsvRow& row, size_t column,
                    const std::string& name) {
  const std::string& text = row.fields[column];
  if (text.starts_with('-') && parse_number<int64_t>(text))
    csv_fail(source, row.line, name, fmt::format("{} is negative", text));
  auto value = parse_number<uint64_t>(text);
  if (!value)
    csv_fail(source, row.line, name, fmt::format("\"{}\" is not a whole number", excerpt(text)));
  return *value;
}

// A whole number >= `min` at a JSON path, or a usage error naming the path.
uint64_t json_number(const json& j, const std::string& source, const std::string& path,
                     uint64_t min = 0) {
  if (j.is_number_integer() && !j.is_number_unsigned())
    throw usage_error(fmt::format("{}: {}: {} is negative", source, path, j.dump()));
  if (!j.is_number())
    throw usage_error(fmt::format("{}: {}: expected a whole number, got the {} {}", source, path,
                                  j.type_name(), j.dump()));
  if (!j.is_number_unsigned())
    throw usage_error(fmt::format("{}: {}: {} is not a whole number", source, path, j.dump()));
  if (j.get<uint64_t>() < min)
    throw usage_error(fmt::format("{}: {}: {} is below {}", source, path, j.dump(), min));
  return j.get<uint64_t>();
}

const json& json_array(const json& j, const std::string& source, const std::string& path) {
  if (!j.is_array())
    throw usage_error(fmt::format("{}: {}: expected an array, got {}", source, path, j.dump()));
  return j;
}

json parse_json(const std::string& text, const std::string& source) {
  try {
    json j = files::parse_json_bounded(text, source);
    if (!j.is_object()) throw usage_error(fmt::format("{}: expected a JSON object", source));
    return j;
  } catch (const json::parse_error& e) {
    throw usage_error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
}

bool looks_like_json(const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

// An expert index from a file: below `experts` when known (> 0), else below kMaxExperts.
int expert_index(uint64_t value, int experts, const std::string& where) {
  int limit = experts > 0 ? experts : kMaxExperts;
  if (value >= static_cast<uint64_t>(limit))
    throw usage_error(
        fmt::format("{}: expert {} is out of range (0..{})", where, value, limit - 1));
  return static_cast<int>(value);
}

}  // namespace

// ---- routing counts files ---------------------------------------------------------------------

namespace {

std::vector<uint64_t> json_counts(const json& list, const std::string& source,
                                  const std::string& path) {
  json_array(list, source, path);
  if (list.empty()) throw usage_error(fmt::format("{}: {}: no experts", source, path));
  if (list.size() > static_cast<size_t>(kMaxExperts))
    throw usage_error(
        fmt::format("{}: {}: {} experts, more than {}", source, path, list.size(), kMaxExperts));
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < list.size(); ++i)
    counts.push_back(json_number(list[i], source, fmt::format("{}[{}]", path, i)));
  return counts;
}

RoutingCounts counts_from_json(const std::string& text, const std::string& source) {
  json j = parse_json(text, source);
  RoutingCounts out{source, {}, {}, {}};
  if (j.contains("tokens_per_rank")) {  // EpConfig holds it as an int
    uint64_t tokens = json_number(j["tokens_per_rank"], source, "\"tokens_per_rank\"", 1);
    if (tokens > static_cast<uint64_t>(INT32_MAX))
      throw usage_error(
          fmt::format("{}: \"tokens_per_rank\": {} is above {}", source, tokens, INT32_MAX));
    out.tokens_per_rank = tokens;
  }
  if (j.contains("topk")) {
    uint64_t k = json_number(j["topk"], source, "\"topk\"", 1);
    if (k > static_cast<uint64_t>(kMaxExperts))
      throw usage_error(fmt::format("{}: \"topk\": {} is above {}", source, k, kMaxExperts));
    out.topk = static_cast<int>(k);
  }
  if (j.contains("counts") == j.contains("layers"))
    throw usage_error(fmt::format("{}: give one of \"counts\" (one layer) or \"layers\"", source));
  if (j.contains("counts")) {
    out.layers.push_back(json_counts(j["counts"], source, "\"counts\""));
    return out;
  }
  const json& layers = json_array(j["layers"], source, "\"layers\"");
  if (layers.empty()) throw usage_error(fmt::format("{}: \"layers\": no layers", source));
  size_t entries = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    std::string path = fmt::format("\"layers\"[{}]", l);
    entries += layers[l].is_array() ? layers[l].size() : 0;
    if (entries > kMaxRoutingEntries) {
      throw usage_error(
          fmt::format("{}: {}: more than {} (layer, expert) entries up to here; "
                      "commtool reads at most that many",
                      source, path, kMaxRoutingEntries));
    }
    out.layers.push_back(json_counts(layers[l], source, path));
    if (out.layers[l].size() != out.layers[0].size())
      throw usage_error(fmt::format("{}: {}: {} experts, but layer 0 has {}", source, path,
                                    out.layers[l].size(), out.layers[0].size()));
  }
  return out;
}

RoutingCounts counts_from_csv(const std::string& text, const std::string& source) {
  std::vector<CsvRow> rows = csv_rows(text, source, 3);
  const bool layered =
      take_header(rows, source, {"expert,count", "layer,expert,count"}).size() == 3;
  const size_t columns = layered ? 3 : 2;
  // [layer][expert] -> (count, line), filled in any order, then checked for gaps.
  std::map<uint64_t, std::map<int, std::pair<uint64_t, size_t>>> seen;
  for (const CsvRow& row : rows) {
    if (row.fields.size() != columns)
      csv_fail(source, row.line, "line",
               fmt::format("{} fields, expected {}", row.fields.size(), columns));
    uint64_t layer = layered ? csv_number(source, row, 0, "layer") : 0;
    uint64_t raw_expert = csv_number(source, row, columns - 2, "expert");
    int expert = expert_index(raw_expert, 0, fmt::format("{}:{}: expert", source, row.line));
    uint64_t count = csv_number(source, row, columns - 1, "count");
    auto [it, added] = seen[layer].try_emplace(expert, count, row.line);
    if (!added)
      csv_fail(source, row.line, "expert",
               fmt::format("expert {} of layer {} already given on line {}", expert, layer,
                           it->second.second));
  }
  RoutingCounts out{source, {}, {}, {}};
  const size_t experts = seen.begin()->second.size();
  for (auto& [layer, by_expert] : seen) {
    if (layer != out.layers.size())
      throw usage_error(fmt::format("{}: layer {} has no lines (layers 0..{} each need theirs)",
                                    source, out.layers.size(), seen.rbegin()->first));
    int expected = 0;
    for (auto& [expert, entry] : by_expert) {
      if (expert != expected)
        throw usage_error(
            fmt::format("{}: layer {}: expert {} has no line", source, layer, expected));
      ++expected;
    }
    if (by_expert.size() != experts)
      throw usage_error(fmt::format("{}: layer {} has {} experts, but layer 0 has {}", source,
                                    layer, by_expert.size(), experts));
    std::vector<uint64_t>& counts = out.layers.emplace_back();
    for (auto& [expert, entry] : by_expert)
      counts.push_back(entry.first);
  }
  return out;
}

}  // namespace

RoutingCounts parse_routing_counts(const std::string& text, const std::string& source) {
  return looks_like_json(text) ? counts_from_json(text, source) : counts_from_csv(text, source);
}

RoutingCounts load_routing_counts(const std::string& path) {
  return parse_routing_counts(read_text(path), path);
}

// ---- placement files --------------------------------------------------------------------------

namespace {

int rank_index(uint64_t value, int ranks, const std::string& where) {
  if (value >= static_cast<uint64_t>(ranks))
    throw usage_error(fmt::format("{}: rank {} is out of range (0..{} for {} ranks)", where, value,
                                  ranks - 1, ranks));
  return static_cast<int>(value);
}

Placement placement_from_json(const std::string& text, const std::string& source, int experts,
                              int ranks) {
  json j = parse_json(text, source);
  if (!j.contains("placement"))
    throw usage_error(fmt::format("{}: \"placement\": missing", source));
  const json& list = json_array(j["placement"], source, "\"placement\"");
  if (list.size() != static_cast<size_t>(experts))
    throw usage_error(fmt::format("{}: \"placement\": {} entries, expected one per expert ({})",
                                  source, list.size(), experts));
  Placement p{ranks, std::vector<std::vector<int>>(experts)};
  for (int e = 0; e < experts; ++e) {
    const std::string path = fmt::format("\"placement\"[{}]", e);
    p.holders[e] = {
        rank_index(json_number(list[e], source, path), ranks, fmt::format("{}: {}", source, path))};
  }
  return p;
}

Placement placement_from_csv(const std::string& text, const std::string& source, int experts,
                             int ranks) {
  std::vector<CsvRow> rows = csv_rows(text, source, 2);
  take_header(rows, source, {"expert,rank"});
  Placement p{ranks, std::vector<std::vector<int>>(experts)};
  std::vector<size_t> line_of(experts, 0);
  for (const CsvRow& row : rows) {
    if (row.fields.size() != 2)
      csv_fail(source, row.line, "line", fmt::format("{} fields, expected 2", row.fields.size()));
    const std::string at = fmt::format("{}:{}", source, row.line);
    int e = expert_index(csv_number(source, row, 0, "expert"), experts, at + ": expert");
    int r = rank_index(csv_number(source, row, 1, "rank"), ranks, at + ": rank");
    if (line_of[e] != 0)
      csv_fail(source, row.line, "expert",
               fmt::format("expert {} already placed on line {}", e, line_of[e]));
    line_of[e] = row.line;
    p.holders[e] = {r};
  }
  for (int e = 0; e < experts; ++e)
    if (line_of[e] == 0)
      throw usage_error(fmt::format("{}: expert {} has no line (every expert 0..{} needs one)",
                                    source, e, experts - 1));
  return p;
}

}  // namespace

Placement parse_placement(const std::string& text, const std::string& source, int experts,
                          int ranks) {
  return looks_like_json(text) ? placement_from_json(text, source, experts, ranks)
                               : placement_from_csv(text, source, experts, ranks);
}

Placement load_placement(const std::string& path, int experts, int ranks) {
  return parse_placement(read_text(path), path, experts, ranks);
}

}  // namespace commtool::tracing
