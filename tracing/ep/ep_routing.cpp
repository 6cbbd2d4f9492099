// Routing, placement and traffic for diagnose ep (ep_routing.hpp says what each means).
#include "tracing/ep/ep_routing.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "probes/base/error.hpp"

using nlohmann::json;

namespace commtool::tracing {

namespace {

constexpr const char* kAcceptedSkews = "accepted: uniform, zipf:S, hot:K:F";

// The whole of `text` as a number, or nullopt (from_chars: no locale, no leading '+').
template <class T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error(fmt::format("{}: missing or unreadable", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw usage_error(fmt::format("{}: read failed", path));
  return text.str();
}

}  // namespace

// ---- skew and config --------------------------------------------------------------------------

Skew parse_skew(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return usage_error(fmt::format("--skew {}: {} ({})", text, why, kAcceptedSkews));
  };
  Skew skew;
  if (text == "uniform") return skew;
  if (text.starts_with("zipf:")) {
    auto s = parse_number<double>(std::string_view(text).substr(5));
    if (!s || !std::isfinite(*s) || *s <= 0) throw fail("S must be a number above 0");
    skew.kind = Skew::Kind::kZipf;
    skew.zipf_s = *s;
    return skew;
  }
  if (text.starts_with("hot:")) {
    std::string_view rest = std::string_view(text).substr(4);
    size_t colon = rest.find(':');
    if (colon == std::string_view::npos) throw fail("give both K and F");
    auto k = parse_number<int>(rest.substr(0, colon));
    if (!k || *k < 1) throw fail("K must be a whole number of experts, at least 1");
    auto f = parse_number<double>(rest.substr(colon + 1));
    if (!f || !(*f > 0 && *f < 1)) throw fail("F must be a fraction above 0 and below 1");
    skew.kind = Skew::Kind::kHot;
    skew.hot_experts = *k;
    skew.hot_fraction = *f;
    return skew;
  }
  throw fail("not a skew");
}

std::string to_string(const Skew& skew) {
  switch (skew.kind) {
    case Skew::Kind::kUniform:
      return "uniform";
    case Skew::Kind::kZipf:
      return fmt::format("zipf:{}", skew.zipf_s);
    case Skew::Kind::kHot:
      return fmt::format("hot:{}:{}", skew.hot_experts, skew.hot_fraction);
  }
  return "?";
}

std::vector<double> draw_probabilities(const Skew& skew, int experts) {
  if (experts < 1 || experts > kMaxExperts)
    throw usage_error(fmt::format("--experts {}: must be between 1 and {}", experts, kMaxExperts));
  std::vector<double> p(experts, 1.0 / experts);
  if (skew.kind == Skew::Kind::kZipf) {
    double sum = 0;
    for (int i = 0; i < experts; ++i)
      sum += p[i] = std::pow(i + 1.0, -skew.zipf_s);
    for (double& x : p)
      x /= sum;
  } else if (skew.kind == Skew::Kind::kHot) {
    const int k = skew.hot_experts;
    if (k >= experts)
      throw usage_error(fmt::format("--skew {}: K must be below the expert count {} ({})",
                                    to_string(skew), experts, kAcceptedSkews));
    for (int i = 0; i < experts; ++i)
      p[i] = i < k ? skew.hot_fraction / k : (1 - skew.hot_fraction) / (experts - k);
  }
  return p;
}

void check_config(const EpConfig& c) {
  auto at_least_one = [](const char* flag, int value) {
    if (value < 1) throw usage_error(fmt::format("{} {}: must be at least 1", flag, value));
  };
  at_least_one("the rank count", c.ranks);
  at_least_one("--tokens", c.tokens_per_rank);
  at_least_one("--hidden", c.hidden);
  at_least_one("dispatch bytes per element", c.dispatch_bytes_per_element);
  at_least_one("combine bytes per element", c.combine_bytes_per_element);
  if (c.experts < 1 || c.experts > kMaxExperts)
    throw usage_error(
        fmt::format("--experts {}: must be between 1 and {}", c.experts, kMaxExperts));
  if (c.topk < 1 || c.topk > c.experts)
    throw usage_error(
        fmt::format("--topk {}: must be between 1 and the expert count {}", c.topk, c.experts));
  draw_probabilities(c.skew, c.experts);  // throws for hot:K:F with K >= experts
}

TokenBytes token_bytes(const EpConfig& c) {
  const auto hidden = static_cast<uint64_t>(c.hidden);
  return {hidden * static_cast<uint64_t>(c.dispatch_bytes_per_element),
          hidden * static_cast<uint64_t>(c.combine_bytes_per_element)};
}

// ---- generator --------------------------------------------------------------------------------

namespace {

// A uniform double in [0, 1) from the top 53 bits: the same on every machine.
double uniform01(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1.0p-53;
}

// SplitMix64's finaliser: independent-looking engine seeds for neighbouring (seed, rank).
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Draws k distinct experts, each draw in proportion to the weights of those not yet drawn.
// One binary search per draw: a uniform point on the undrawn weight is moved past the drawn
// experts' intervals of the cumulative weights, in index order, which lands it on an undrawn
// expert with exactly the renormalised probability.
class ExpertSampler {
 public:
  explicit ExpertSampler(const std::vector<double>& weights)
      : weights_(weights), start_(weights.size() + 1, 0.0) {
    for (size_t i = 0; i < weights.size(); ++i)
      start_[i + 1] = start_[i] + weights[i];
  }

  // Writes k picks to out, in draw order; `drawn` is scratch (sorted picks).
  void draw(std::mt19937_64& engine, int k, int32_t* out, std::vector<int32_t>& drawn) const {
    drawn.clear();
    double drawn_weight = 0;
    for (int j = 0; j < k; ++j) {
      int32_t e = pick(engine, drawn, drawn_weight);
      out[j] = e;
      drawn.insert(std::upper_bound(drawn.begin(), drawn.end(), e), e);
      drawn_weight += weights_[e];
    }
  }

 private:
  int32_t pick(std::mt19937_64& engine, const std::vector<int32_t>& drawn,
               double drawn_weight) const {
    const auto experts = static_cast<int32_t>(weights_.size());
    // Rounding can land a point on a drawn expert's edge (a chance of about 1e-16): draw again.
    // Weights that underflowed to 0 (zipf with a huge S) can leave no undrawn weight at all:
    // then the lowest undrawn expert, after a few tries.
    for (int attempt = 0; attempt < 8; ++attempt) {
      double x = uniform01(engine) * (start_.back() - drawn_weight);
      for (int32_t d : drawn) {
        if (x < start_[d]) break;
        x += weights_[d];
      }
      auto e = static_cast<int32_t>(std::upper_bound(start_.begin() + 1, start_.end(), x) -
                                    (start_.begin() + 1));
      if (e < experts && !std::binary_search(drawn.begin(), drawn.end(), e)) return e;
    }
    int32_t e = 0;
    while (std::binary_search(drawn.begin(), drawn.end(), e))
      ++e;
    return e;
  }

  std::vector<double> weights_;
  std::vector<double> start_;  // start_[i]: the weight of experts below i; start_[E]: total
};

}  // namespace

Routing generate_routing(const EpConfig& config) {
  check_config(config);
  const ExpertSampler sampler(draw_probabilities(config.skew, config.experts));
  const auto tokens = static_cast<size_t>(config.tokens_per_rank);
  const auto k = static_cast<size_t>(config.topk);

  Routing r{config.ranks, config.experts, config.topk, tokens, {}, {}};
  r.selections.assign(config.ranks, std::vector<uint64_t>(config.experts, 0));
  r.token_experts.assign(config.ranks, std::vector<int32_t>(tokens * k));
  std::vector<int32_t> drawn;
  for (int rank = 0; rank < config.ranks; ++rank) {
    std::mt19937_64 engine(mix(config.seed ^ mix(static_cast<uint64_t>(rank))));
    std::vector<int32_t>& picks = r.token_experts[rank];
    for (size_t t = 0; t < tokens; ++t)
      sampler.draw(engine, config.topk, &picks[t * k], drawn);
    for (int32_t e : picks)
      ++r.selections[rank][e];
  }
  return r;
}

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

// Non-blank, non-comment lines split at commas, fields trimmed.
std::vector<CsvRow> csv_rows(const std::string& text) {
  std::vector<CsvRow> rows;
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::string content = trim(line);
    if (content.empty() || content[0] == '#') continue;
    CsvRow row{number, {}};
    std::istringstream fields(content);
    for (std::string field; std::getline(fields, field, ',');)
      row.fields.push_back(trim(field));
    if (content.back() == ',') row.fields.emplace_back();
    rows.push_back(std::move(row));
  }
  return rows;
}

[[noreturn]] void csv_fail(const std::string& source, size_t line, std::string_view field,
                           const std::string& what) {
  throw usage_error(fmt::format("{}:{}: {}: {}", source, line, field, what));
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
  const CsvRow& first = rows.front();
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
                       fmt::join(first.fields, ",")));
}

uint64_t csv_number(const std::string& source, const CsvRow& row, size_t column,
                    const std::string& name) {
  const std::string& text = row.fields[column];
  if (text.starts_with('-') && parse_number<int64_t>(text))
    csv_fail(source, row.line, name, fmt::format("{} is negative", text));
  auto value = parse_number<uint64_t>(text);
  if (!value) csv_fail(source, row.line, name, fmt::format("\"{}\" is not a whole number", text));
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
    json j = json::parse(text);
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
  for (size_t l = 0; l < layers.size(); ++l) {
    std::string path = fmt::format("\"layers\"[{}]", l);
    out.layers.push_back(json_counts(layers[l], source, path));
    if (out.layers[l].size() != out.layers[0].size())
      throw usage_error(fmt::format("{}: {}: {} experts, but layer 0 has {}", source, path,
                                    out.layers[l].size(), out.layers[0].size()));
  }
  return out;
}

RoutingCounts counts_from_csv(const std::string& text, const std::string& source) {
  std::vector<CsvRow> rows = csv_rows(text);
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

Routing routing_from_counts(const RoutingCounts& counts, size_t layer, int ranks,
                            uint64_t tokens_per_rank, int topk) {
  if (layer >= counts.layers.size())
    throw usage_error(fmt::format("{}: no layer {} (the file has {})", counts.source, layer,
                                  counts.layers.size()));
  const std::vector<uint64_t>& c = counts.layers[layer];
  const auto experts = static_cast<int>(c.size());
  const auto nranks = static_cast<uint64_t>(ranks);
  const std::string where = fmt::format("{}: layer {}", counts.source, layer);
  if (ranks < 1 || topk < 1 || tokens_per_rank < 1)
    throw usage_error(fmt::format("{}: needs at least 1 rank, token and top-k pick", where));
  if (topk > experts)
    throw usage_error(fmt::format("{}: {} experts, fewer than top-k {}", where, experts, topk));
  const uint64_t tokens = tokens_per_rank * nranks;
  const uint64_t expected = tokens * static_cast<uint64_t>(topk);
  const uint64_t sum = std::accumulate(c.begin(), c.end(), uint64_t{0});
  if (sum != expected)
    throw usage_error(fmt::format(
        "{}: counts add up to {}, expected {} (tokens_per_rank {} x topk {} x ranks {})", where,
        sum, expected, tokens_per_rank, topk, ranks));
  for (int e = 0; e < experts; ++e)
    if (c[e] > tokens)
      throw usage_error(fmt::format(
          "{}: expert {} has {} selections, more than the {} tokens (a token picks an expert "
          "at most once)",
          where, e, c[e], tokens));

  Routing r{ranks, experts, topk, tokens_per_rank, {}, {}};
  r.selections.assign(ranks, std::vector<uint64_t>(experts, 0));
  uint64_t next = 0;  // the rank that gets the next remainder selection
  for (int e = 0; e < experts; ++e) {
    for (int s = 0; s < ranks; ++s)
      r.selections[s][e] = c[e] / nranks;
    for (uint64_t extra = c[e] % nranks; extra > 0; --extra, next = (next + 1) % nranks)
      ++r.selections[next][e];
  }
  return r;
}

// ---- placement --------------------------------------------------------------------------------

Placement contiguous_placement(int experts, int ranks) {
  Placement p{ranks, std::vector<std::vector<int>>(experts)};
  const int base = experts / ranks, extra = experts % ranks;
  int e = 0;
  for (int r = 0; r < ranks; ++r)
    for (int i = 0; i < base + (r < extra ? 1 : 0); ++i)
      p.holders[e++] = {r};
  return p;
}

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
  std::vector<CsvRow> rows = csv_rows(text);
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

// Every expert held by distinct ranks in range; the rank counts agree.
void check_placement(const Placement& p, int experts, int ranks) {
  if (p.ranks != ranks || p.holders.size() != static_cast<size_t>(experts))
    throw usage_error(fmt::format(
        "the placement is for {} experts on {} ranks, the routing has {} experts on {} ranks",
        p.holders.size(), p.ranks, experts, ranks));
  for (int e = 0; e < experts; ++e) {
    std::vector<int> h = p.holders[e];
    std::sort(h.begin(), h.end());
    if (h.empty() || h.front() < 0 || h.back() >= ranks ||
        std::adjacent_find(h.begin(), h.end()) != h.end())
      throw usage_error(fmt::format("expert {}: its holders {} are not distinct ranks in 0..{}", e,
                                    fmt::join(p.holders[e], ","), ranks - 1));
  }
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

// ---- matrices ---------------------------------------------------------------------------------

RankMatrix dispatch_matrix(const Routing& routing, const Placement& placement) {
  check_placement(placement, routing.experts, routing.ranks);
  const int ranks = routing.ranks;
  RankMatrix m(ranks, std::vector<uint64_t>(ranks, 0));
  // The holder of the j-th selection of expert e from source s: holders take turns from s.
  auto holder = [&](int e, uint64_t j, int s) {
    const std::vector<int>& h = placement.holders[e];
    return h[(j + static_cast<uint64_t>(s)) % h.size()];
  };
  for (int s = 0; s < ranks; ++s) {
    if (!routing.per_token()) {  // every selection is a token of its own
      for (int e = 0; e < routing.experts; ++e) {
        const uint64_t count = routing.selections[s][e], n = placement.holders[e].size();
        for (uint64_t turn = 0; turn < n; ++turn)
          m[s][holder(e, turn, s)] += count / n + (turn < count % n ? 1 : 0);
      }
      continue;
    }
    std::vector<uint64_t> turn(routing.experts, 0);
    std::vector<uint64_t> counted_token(ranks, UINT64_MAX);  // [d]: the last token sent to d
    const auto k = static_cast<size_t>(routing.topk);
    for (uint64_t t = 0; t < routing.tokens_per_rank; ++t) {
      for (size_t j = 0; j < k; ++j) {
        const int32_t e = routing.token_experts[s][t * k + j];
        const int d = holder(e, turn[e]++, s);
        if (counted_token[d] != t) {  // once per distinct destination
          counted_token[d] = t;
          ++m[s][d];
        }
      }
    }
  }
  return m;
}

RankMatrix transpose(const RankMatrix& m) {
  RankMatrix t(m.empty() ? 0 : m[0].size(), std::vector<uint64_t>(m.size(), 0));
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[i].size(); ++j)
      t[j][i] = m[i][j];
  return t;
}

RankMatrix scaled(const RankMatrix& m, uint64_t factor) {
  RankMatrix out = m;
  for (auto& row : out)
    for (uint64_t& x : row)
      x *= factor;
  return out;
}

uint64_t matrix_total(const RankMatrix& m) {
  uint64_t total = 0;
  for (const auto& row : m)
    total = std::accumulate(row.begin(), row.end(), total);
  return total;
}

RankMatrix uniform_matrix(uint64_t total_bytes, int ranks) {
  const auto pairs = static_cast<uint64_t>(ranks) * static_cast<uint64_t>(ranks);
  RankMatrix m(ranks, std::vector<uint64_t>(ranks, total_bytes / pairs));
  uint64_t extra = total_bytes % pairs;
  for (int s = 0; s < ranks && extra > 0; ++s)
    for (int d = 0; d < ranks && extra > 0; ++d, --extra)
      ++m[s][d];
  return m;
}

EpTraffic ep_traffic(const RankMatrix& dispatch_tokens, const TokenBytes& bytes) {
  return {dispatch_tokens, scaled(dispatch_tokens, bytes.dispatch),
          scaled(transpose(dispatch_tokens), bytes.combine)};
}

// ---- metrics ----------------------------------------------------------------------------------

double imbalance(const std::vector<uint64_t>& values) {
  if (values.empty()) return 0;
  const double mean =
      static_cast<double>(std::accumulate(values.begin(), values.end(), uint64_t{0})) /
      static_cast<double>(values.size());
  if (mean == 0) return 0;
  return static_cast<double>(*std::max_element(values.begin(), values.end())) / mean - 1;
}

double coefficient_of_variation(const std::vector<uint64_t>& values) {
  if (values.empty()) return 0;
  const auto n = static_cast<double>(values.size());
  double mean = 0, squares = 0;
  for (uint64_t v : values)
    mean += static_cast<double>(v) / n;
  if (mean == 0) return 0;
  for (uint64_t v : values)
    squares += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean) / n;
  return std::sqrt(squares) / mean;
}

namespace {

std::vector<uint64_t> expert_totals(const Routing& routing) {
  std::vector<uint64_t> totals(routing.experts, 0);
  for (const auto& row : routing.selections)
    for (int e = 0; e < routing.experts; ++e)
      totals[e] += row[e];
  return totals;
}

// Experts by selections, most first, ties by index.
std::vector<int> by_load(const std::vector<uint64_t>& totals) {
  std::vector<int> order(totals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return totals[a] > totals[b]; });
  return order;
}

}  // namespace

EpMetrics ep_metrics(const Routing& routing, const Placement& placement, const EpTraffic& traffic) {
  EpMetrics m;
  m.dispatch_per_selection = !routing.per_token();
  const int ranks = routing.ranks;
  m.ranks.resize(ranks);
  std::vector<uint64_t> received(ranks, 0);
  for (int s = 0; s < ranks; ++s) {
    for (int d = 0; d < ranks; ++d) {
      RankLoad &from = m.ranks[s], &to = m.ranks[d];
      from.tokens_sent += traffic.dispatch_tokens[s][d];
      to.tokens_received += traffic.dispatch_tokens[s][d];
      from.dispatch_bytes_sent += traffic.dispatch_bytes[s][d];
      to.dispatch_bytes_received += traffic.dispatch_bytes[s][d];
      from.combine_bytes_sent += traffic.combine_bytes[s][d];
      to.combine_bytes_received += traffic.combine_bytes[s][d];
    }
  }
  for (int r = 0; r < ranks; ++r)
    received[r] = m.ranks[r].tokens_received;
  m.imbalance = imbalance(received);
  m.cv = coefficient_of_variation(received);
  m.busiest_rank =
      static_cast<int>(std::max_element(received.begin(), received.end()) - received.begin());

  const std::vector<uint64_t> totals = expert_totals(routing);
  const uint64_t all = std::accumulate(totals.begin(), totals.end(), uint64_t{0});
  for (int e = 0; e < routing.experts; ++e) {
    double share = all == 0 ? 0 : static_cast<double>(totals[e]) / static_cast<double>(all);
    m.experts.push_back({e, totals[e], share, placement.holders[e]});
    if (totals[e] == 0) m.dead.push_back(e);
  }
  const double hot_above = kHotLoadFactor * static_cast<double>(all) / routing.experts;
  for (int e : by_load(totals))
    if (static_cast<double>(totals[e]) > hot_above) m.hot.push_back(m.experts[e]);
  return m;
}

// ---- replication ------------------------------------------------------------------------------

namespace {

// Each rank's planned selections: every expert's total split over its holders, the remainder
// one each to the first.
std::vector<uint64_t> planned_loads(const std::vector<uint64_t>& totals, const Placement& p) {
  std::vector<uint64_t> load(p.ranks, 0);
  for (size_t e = 0; e < totals.size(); ++e) {
    const std::vector<int>& h = p.holders[e];
    for (size_t i = 0; i < h.size(); ++i)
      load[h[i]] += totals[e] / h.size() + (i < totals[e] % h.size() ? 1 : 0);
  }
  return load;
}

}  // namespace

ReplicationPlan plan_replication(const Routing& routing, const Placement& placement, int hottest,
                                 const TokenBytes& bytes) {
  if (hottest < 0 || hottest > routing.experts)
    throw usage_error(fmt::format("--replicate {}: must be between 0 and the expert count {}",
                                  hottest, routing.experts));
  check_placement(placement, routing.experts, routing.ranks);
  ReplicationPlan plan;
  plan.placement = placement;
  const std::vector<uint64_t> totals = expert_totals(routing);
  const std::vector<int> order = by_load(totals);
  for (int i = 0; i < hottest; ++i) {
    const int e = order[i];
    std::vector<int>& holders = plan.placement.holders[e];
    const std::vector<uint64_t> load = planned_loads(totals, plan.placement);
    int target = -1;
    for (int r = 0; r < routing.ranks; ++r)
      if (std::find(holders.begin(), holders.end(), r) == holders.end() &&
          (target < 0 || load[r] < load[target]))
        target = r;
    if (target < 0) continue;  // every rank holds it already (one rank)
    holders.push_back(target);
    plan.replicated.push_back(e);
  }
  plan.traffic = ep_traffic(dispatch_matrix(routing, plan.placement), bytes);
  plan.metrics = ep_metrics(routing, plan.placement, plan.traffic);
  return plan;
}

}  // namespace commtool::tracing
