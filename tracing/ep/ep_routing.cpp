// Which experts tokens pick, for diagnose ep: --skew and the config checks, routing generated
// from a seed, and routing dealt out from a real model's per-expert counts (ep_routing.hpp says
// what each means). Reading those counts from a file is routing_files.cpp's; where the experts
// live and the traffic that follows is ep_traffic.cpp's.
#include "tracing/ep/ep_routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>

#include "probes/base/error.hpp"
#include "probes/base/parse_number.hpp"
#include "probes/base/progress_line.hpp"

namespace commtool::tracing {

namespace {

constexpr const char* kAcceptedSkews = "accepted: uniform, zipf:S, hot:K:F";

}  // namespace

// ---- skew and config --------------------------------------------------------------------------

Skew parse_skew(const std::string& text) {
  auto fail = [&](const std::string& why) {
    return bad_value("skew", text, fmt::format("{} ({})", why, kAcceptedSkews));
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
    throw bad_value("experts", std::to_string(experts),
                    fmt::format("must be between 1 and {}", kMaxExperts));
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
      throw bad_value(
          "skew", to_string(skew),
          fmt::format("K must be below the expert count {} ({})", experts, kAcceptedSkews));
    for (int i = 0; i < experts; ++i)
      p[i] = i < k ? skew.hot_fraction / k : (1 - skew.hot_fraction) / (experts - k);
  }
  return p;
}

void check_config(const EpConfig& c) {
  auto at_least_one = [](const char* field, int value) {
    if (value < 1) throw bad_value(field, std::to_string(value), "must be at least 1");
  };
  at_least_one("ranks", c.ranks);
  at_least_one("tokens_per_rank", c.tokens_per_rank);
  at_least_one("hidden", c.hidden);
  if (c.dispatch_bytes_per_element < 1 || c.combine_bytes_per_element < 1) {
    throw usage_error(
        fmt::format("bytes per element {} (dispatch), {} (combine): each must be at "
                    "least 1",
                    c.dispatch_bytes_per_element, c.combine_bytes_per_element));
  }
  if (c.experts < 1 || c.experts > kMaxExperts)
    throw bad_value("experts", std::to_string(c.experts),
                    fmt::format("must be between 1 and {}", kMaxExperts));
  if (c.topk < 1 || c.topk > c.experts)
    throw bad_value("topk", std::to_string(c.topk),
                    fmt::format("must be between 1 and the expert count {}", c.experts));
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
  progress::Line line;  // millions of tokens per rank take seconds
  for (int rank = 0; rank < config.ranks; ++rank) {
    std::mt19937_64 engine(mix(config.seed ^ mix(static_cast<uint64_t>(rank))));
    std::vector<int32_t>& picks = r.token_experts[rank];
    const std::string what = fmt::format("routing rank {}'s {} tokens", rank, tokens);
    for (size_t t = 0; t < tokens; ++t) {
      if (t % (1 << 16) == 0) line.update(rank, config.ranks, what);
      sampler.draw(engine, config.topk, &picks[t * k], drawn);
    }
    for (int32_t e : picks)
      ++r.selections[rank][e];
  }
  return r;
}

// ---- routing from counts ----------------------------------------------------------------------

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

}  // namespace commtool::tracing
