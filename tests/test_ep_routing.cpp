// diagnose ep's routing on the CPU: what the skewed generator draws, what a counts file or a
// placement file may say, how dispatch counts tokens (once per destination rank, DeepEP's way),
// the balance metrics, and where the replication what-if puts replicas.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "probes/base/error.hpp"
#include "tracing/ep/ep_routing.hpp"

using namespace commtool;
using namespace commtool::tracing;

namespace {

// The usage error's words, or "" when f accepted its input.
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

EpConfig config(int ranks, int tokens, int experts, int topk, const std::string& skew,
                uint64_t seed = 1) {
  EpConfig c;
  c.ranks = ranks;
  c.tokens_per_rank = tokens;
  c.experts = experts;
  c.topk = topk;
  c.skew = parse_skew(skew);
  c.seed = seed;
  return c;
}

// Selections per expert over all ranks.
std::vector<uint64_t> totals(const Routing& r) {
  std::vector<uint64_t> t(r.experts, 0);
  for (const auto& row : r.selections)
    for (int e = 0; e < r.experts; ++e)
      t[e] += row[e];
  return t;
}

// Routing from one layer of counts, as a counts file gives it (no per-token choices).
Routing from_counts(std::vector<uint64_t> counts, int ranks, uint64_t tokens, int topk) {
  return routing_from_counts({"test", {}, {}, {std::move(counts)}}, 0, ranks, tokens, topk);
}

// Routing with every token's picks given: tokens[s] lists rank s's tokens.
Routing hand_routing(int experts, const std::vector<std::vector<std::vector<int32_t>>>& tokens) {
  Routing r;
  r.ranks = static_cast<int>(tokens.size());
  r.experts = experts;
  r.topk = static_cast<int>(tokens[0][0].size());
  r.tokens_per_rank = tokens[0].size();
  r.selections.assign(r.ranks, std::vector<uint64_t>(experts, 0));
  r.token_experts.resize(r.ranks);
  for (int s = 0; s < r.ranks; ++s)
    for (const auto& token : tokens[s])
      for (int32_t e : token) {
        r.token_experts[s].push_back(e);
        ++r.selections[s][e];
      }
  return r;
}

// A file under /tmp for the loaders, removed when the test ends.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_("/tmp/commtool_test_ep_routing_" + std::to_string(getpid()) + "_" + name) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

// ---- skew ---------------------------------------------------------------------------------------

TEST(EpSkew, ParsesTheThreeForms) {
  EXPECT_EQ(parse_skew("uniform").kind, Skew::Kind::kUniform);
  Skew z = parse_skew("zipf:1.2");
  EXPECT_EQ(z.kind, Skew::Kind::kZipf);
  EXPECT_DOUBLE_EQ(z.zipf_s, 1.2);
  Skew h = parse_skew("hot:4:0.75");
  EXPECT_EQ(h.kind, Skew::Kind::kHot);
  EXPECT_EQ(h.hot_experts, 4);
  EXPECT_DOUBLE_EQ(h.hot_fraction, 0.75);
  EXPECT_EQ(to_string(z), "zipf:1.2");
  EXPECT_EQ(to_string(h), "hot:4:0.75");
}

// Named by the request field; the CLI prints --skew in its place (cli/option_names.cpp).
TEST(EpSkew, BadValuesAreNamedWithWhatIsAccepted) {
  auto parse = [](const char* text) { return refusal([&] { parse_skew(text); }); };
  EXPECT_EQ(parse("zipf:-1"),
            "skew zipf:-1: S must be a number above 0 (accepted: uniform, zipf:S, hot:K:F)");
  for (const char* bad : {"zipf:0", "zipf:", "zipf:x", "zipf:inf", "zipf:1.2x"})
    EXPECT_TRUE(has(parse(bad), "S must be a number above 0")) << bad;
  for (const char* bad : {"hot:0:0.5", "hot:-1:0.5", "hot:1.5:0.5", "hot::0.5"})
    EXPECT_TRUE(has(parse(bad), "K must be a whole number")) << bad;
  for (const char* bad : {"hot:2:0", "hot:2:1", "hot:2:1.5", "hot:2:"})
    EXPECT_TRUE(has(parse(bad), "F must be a fraction")) << bad;
  EXPECT_TRUE(has(parse("hot:2"), "give both K and F"));
  EXPECT_EQ(parse("gauss"), "skew gauss: not a skew (accepted: uniform, zipf:S, hot:K:F)");
}

TEST(EpSkew, HotExpertsMustBeFewerThanExperts) {
  EpConfig c = config(2, 16, 8, 2, "hot:8:0.5");
  EXPECT_TRUE(has(refusal([&] { check_config(c); }), "K must be below the expert count 8"));
  c.skew = parse_skew("hot:7:0.5");
  EXPECT_EQ(refusal([&] { check_config(c); }), "");
}

TEST(EpSkew, DrawProbabilitiesFollowTheDefinitions) {
  std::vector<double> z = draw_probabilities(parse_skew("zipf:2"), 3);
  const double norm = 1 + 1 / 4.0 + 1 / 9.0;
  EXPECT_DOUBLE_EQ(z[0], 1 / norm);
  EXPECT_DOUBLE_EQ(z[2], 1 / 9.0 / norm);
  std::vector<double> h = draw_probabilities(parse_skew("hot:2:0.6"), 6);
  EXPECT_DOUBLE_EQ(h[1], 0.3);
  EXPECT_DOUBLE_EQ(h[2], 0.1);
}

TEST(EpConfig, RefusesTopkAboveExpertsAndEmptySizes) {
  EXPECT_TRUE(has(refusal([] { check_config(config(2, 16, 4, 5, "uniform")); }),
                  "topk 5: must be between 1 and the expert count 4"));
  EXPECT_TRUE(has(refusal([] { check_config(config(2, 0, 4, 2, "uniform")); }),
                  "tokens_per_rank 0: must be at least 1"));
  EXPECT_EQ(token_bytes(EpConfig{}).dispatch, 7168u * 2);
}

// ---- generator ----------------------------------------------------------------------------------

TEST(EpGenerator, SameSeedSameRoutingOtherSeedOtherRouting) {
  const Routing a = generate_routing(config(4, 512, 64, 8, "zipf:1.1", 7));
  const Routing b = generate_routing(config(4, 512, 64, 8, "zipf:1.1", 7));
  const Routing c = generate_routing(config(4, 512, 64, 8, "zipf:1.1", 8));
  EXPECT_EQ(a.token_experts, b.token_experts);
  EXPECT_EQ(a.selections, b.selections);
  EXPECT_NE(a.token_experts, c.token_experts);
}

TEST(EpGenerator, RanksDrawDifferentTokensIndependentOfTheRankCount) {
  const Routing four = generate_routing(config(4, 256, 32, 4, "uniform", 3));
  const Routing two = generate_routing(config(2, 256, 32, 4, "uniform", 3));
  EXPECT_NE(four.token_experts[0], four.token_experts[1]);
  EXPECT_EQ(four.token_experts[1], two.token_experts[1]);
}

TEST(EpGenerator, OutputIsPinnedForASeed) {
  // mt19937_64 and the uniform conversion are fixed by the standard and this file, so these
  // picks are the same on every machine; a change here changes every user's seeded routing.
  const Routing r = generate_routing(config(1, 2, 16, 4, "zipf:1", 42));
  EXPECT_EQ(r.token_experts[0], (std::vector<int32_t>{9, 6, 0, 2, 5, 4, 1, 0}));
}

TEST(EpGenerator, TopkExpertsAreDistinctPerToken) {
  // A very hot expert makes repeats likely if the sampler allowed them; top-k = experts too.
  for (const char* skew : {"hot:1:0.99", "zipf:3", "uniform"}) {
    for (int experts : {8, 64}) {
      const Routing r = generate_routing(config(2, 2000, experts, 8, skew));
      for (const auto& picks : r.token_experts)
        for (size_t t = 0; t < picks.size(); t += 8) {
          std::set<int32_t> distinct(picks.begin() + t, picks.begin() + t + 8);
          ASSERT_EQ(distinct.size(), 8u) << skew << " token " << t / 8;
          ASSERT_LT(*distinct.rbegin(), experts);
          ASSERT_GE(*distinct.begin(), 0);
        }
    }
  }
}

TEST(EpGenerator, SelectionsCountTheTokensPicks) {
  const Routing r = generate_routing(config(3, 100, 16, 4, "zipf:1"));
  for (int s = 0; s < 3; ++s) {
    std::vector<uint64_t> counted(16, 0);
    for (int32_t e : r.token_experts[s])
      ++counted[e];
    EXPECT_EQ(counted, r.selections[s]);
  }
}

TEST(EpGenerator, UniformIsNearUniformOverALargeSample) {
  // 400k selections over 64 experts: 6250 expected each, standard deviation about 77.
  const std::vector<uint64_t> t = totals(generate_routing(config(2, 25000, 64, 8, "uniform")));
  for (int e = 0; e < 64; ++e)
    EXPECT_NEAR(static_cast<double>(t[e]), 6250, 400) << "expert " << e;
}

TEST(EpGenerator, ZipfExponentIsRecoveredAtTopOne) {
  // At top-1 the loads follow the weights: the slope of log(load) over log(i + 1) is -S.
  const std::vector<uint64_t> t = totals(generate_routing(config(4, 250000, 64, 1, "zipf:1.2")));
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const int n = 16;
  for (int i = 0; i < n; ++i) {
    const double x = std::log(i + 1.0), y = std::log(static_cast<double>(t[i]));
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  EXPECT_NEAR(-slope, 1.2, 0.1);
}

TEST(EpGenerator, HotFractionIsRecoveredAtTopOne) {
  const std::vector<uint64_t> t = totals(generate_routing(config(4, 100000, 32, 1, "hot:4:0.7")));
  const double hot = static_cast<double>(t[0] + t[1] + t[2] + t[3]) / (4 * 100000);
  EXPECT_NEAR(hot, 0.7, 0.01);
}

TEST(EpGenerator, AtTopKNoExpertGetsMoreThanOneKthOfTheSelections) {
  // hot:2:0.9 at top-8: nearly every token picks both hot experts, so they get about 2/8.
  const Routing r = generate_routing(config(2, 20000, 64, 8, "hot:2:0.9"));
  const std::vector<uint64_t> t = totals(r);
  EXPECT_LE(t[0], 40000u);
  EXPECT_NEAR(static_cast<double>(t[0] + t[1]) / (2 * 20000 * 8), 0.25, 0.005);
}

// ---- dispatch counting --------------------------------------------------------------------------

TEST(EpDispatch, TwoPicksOnOneRankCostOneToken) {
  // Experts 0, 1 on rank 0 and 2, 3 on rank 1.
  const Routing r = hand_routing(4, {{{0, 1}, {0, 2}, {2, 3}}, {{1, 3}, {3, 2}, {2, 3}}});
  EXPECT_EQ(dispatch_matrix(r, contiguous_placement(4, 2)), (RankMatrix{{2, 2}, {1, 3}}));
}

TEST(EpDispatch, CountsWithoutTokensCountEverySelection) {
  // 2 ranks, 2 tokens each, top-2, every token on experts 0 and 1 (both on rank 0): per token
  // that would be 2 tokens from each rank to rank 0; a counts file can only say 4.
  const Routing r = from_counts({4, 4, 0, 0}, 2, 2, 2);
  EXPECT_FALSE(r.per_token());
  EXPECT_EQ(dispatch_matrix(r, contiguous_placement(4, 2)), (RankMatrix{{4, 0}, {4, 0}}));
}

TEST(EpDispatch, RefusesAPlacementForOtherExperts) {
  const Routing r = from_counts({4, 4}, 2, 2, 2);
  EXPECT_TRUE(has(refusal([&] { dispatch_matrix(r, contiguous_placement(3, 2)); }),
                  "the placement is for 3 experts on 2 ranks, the routing has 2 experts"));
}

TEST(EpMatrices, TransposeSwapsSourceAndDestination) {
  EXPECT_EQ(transpose({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}),
            (RankMatrix{{1, 4, 7}, {2, 5, 8}, {3, 6, 9}}));
  EXPECT_EQ(transpose({{1, 2}}), (RankMatrix{{1}, {2}}));
}

TEST(EpMatrices, TrafficIsTokensTimesTokenBytesAndCombineGoesBack) {
  const EpTraffic t = ep_traffic({{1, 2}, {3, 4}}, TokenBytes{10, 100});
  EXPECT_EQ(t.dispatch_bytes, (RankMatrix{{10, 20}, {30, 40}}));
  EXPECT_EQ(t.combine_bytes, (RankMatrix{{100, 300}, {200, 400}}));
  EXPECT_EQ(matrix_total(t.dispatch_bytes), 100u);
}

TEST(EpMatrices, UniformBaselineKeepsTheTotalAndSpreadsTheRemainderFirst) {
  EXPECT_EQ(uniform_matrix(10, 2), (RankMatrix{{3, 3}, {2, 2}}));
  EXPECT_EQ(matrix_total(uniform_matrix(1000003, 8)), 1000003u);
  EXPECT_EQ(uniform_matrix(0, 2), (RankMatrix{{0, 0}, {0, 0}}));
}

// ---- metrics ------------------------------------------------------------------------------------

TEST(EpMetrics, ImbalanceAndCvOfHandComputedLoads) {
  EXPECT_DOUBLE_EQ(imbalance({10, 20, 30, 40}), 0.6);  // 40 / 25 - 1
  EXPECT_NEAR(coefficient_of_variation({10, 20, 30, 40}), std::sqrt(125.0) / 25, 1e-12);
  EXPECT_EQ(imbalance({7, 7, 7}), 0);
  EXPECT_EQ(coefficient_of_variation({7, 7, 7}), 0);
  EXPECT_EQ(imbalance({0, 0}), 0);
  EXPECT_EQ(imbalance({}), 0);
}

TEST(EpMetrics, PerRankTotalsFromTheMatrices) {
  const Routing r = from_counts({4, 4}, 2, 2, 2);
  const EpMetrics m =
      ep_metrics(r, contiguous_placement(2, 2), ep_traffic({{1, 5}, {2, 0}}, TokenBytes{10, 100}));
  EXPECT_EQ(m.ranks[0].tokens_sent, 6u);
  EXPECT_EQ(m.ranks[0].tokens_received, 3u);
  EXPECT_EQ(m.ranks[1].tokens_received, 5u);
  EXPECT_EQ(m.ranks[1].dispatch_bytes_received, 50u);
  EXPECT_EQ(m.ranks[1].combine_bytes_sent, 500u);
  EXPECT_EQ(m.ranks[0].combine_bytes_received, 600u);
  EXPECT_EQ(m.busiest_rank, 1);
  EXPECT_DOUBLE_EQ(m.imbalance, 5 / 4.0 - 1);
  EXPECT_TRUE(m.dispatch_per_selection);
}

TEST(EpMetrics, HotExpertsAboveTwiceTheMeanBusiestFirstDeadOnesListed) {
  // 100 selections over 8 experts: mean 12.5, hot above 25.
  const Routing r = from_counts({30, 0, 50, 4, 4, 4, 4, 4}, 2, 25, 2);
  const EpMetrics m = ep_metrics(r, contiguous_placement(8, 2),
                                 ep_traffic(dispatch_matrix(r, contiguous_placement(8, 2)), {}));
  ASSERT_EQ(m.hot.size(), 2u);
  EXPECT_EQ(m.hot[0].expert, 2);
  EXPECT_DOUBLE_EQ(m.hot[0].share, 0.5);
  EXPECT_EQ(m.hot[0].ranks, (std::vector<int>{0}));
  EXPECT_EQ(m.hot[1].expert, 0);
  EXPECT_EQ(m.dead, (std::vector<int>{1}));
  EXPECT_EQ(m.experts[7].selections, 4u);
  EXPECT_EQ(m.experts[7].ranks, (std::vector<int>{1}));
}

TEST(EpMetrics, BusiestRankTiesGoToTheLowest) {
  const Routing r = from_counts({4, 4}, 2, 2, 2);
  EXPECT_EQ(
      ep_metrics(r, contiguous_placement(2, 2), ep_traffic({{1, 2}, {1, 0}}, {})).busiest_rank, 0);
}

// ---- routing from counts ------------------------------------------------------------------------

TEST(EpCounts, RemaindersGoRoundRobinSoEveryRankHasItsSelections) {
  // 3 ranks x 2 tokens x top-2 = 12: expert 0 has 5 (1 each, extras to ranks 0 and 1), expert
  // 1 has 4 (1 each, the extra carries on to rank 2), expert 2 has 3 (1 each).
  const Routing r = from_counts({5, 4, 3}, 3, 2, 2);
  EXPECT_EQ(r.selections, (std::vector<std::vector<uint64_t>>{{2, 1, 1}, {2, 1, 1}, {1, 2, 1}}));
}

TEST(EpCounts, SumMustBeTokensTimesTopkTimesRanks) {
  EXPECT_EQ(refusal([] {
              from_counts({5, 2}, 2, 2, 2);
            }),
            "test: layer 0: counts add up to 7, expected 8 (tokens_per_rank 2 x topk 2 x ranks 2)");
}

TEST(EpCounts, AnExpertCannotHaveMoreSelectionsThanTokens) {
  EXPECT_TRUE(has(refusal([] {
                    from_counts({6, 2}, 2, 2, 2);
                  }),
                  "expert 0 has 6 selections, more than the 4 tokens"));
  EXPECT_TRUE(has(refusal([] { from_counts({4}, 2, 2, 2); }), "1 experts, fewer than top-k 2"));
}

// ---- counts files -------------------------------------------------------------------------------

TEST(EpCountsFile, JsonOneLayerAndLayers) {
  const RoutingCounts one = parse_routing_counts(
      R"({"model": "x", "tokens_per_rank": 4, "topk": 2, "counts": [3, 5]})", "a.json");
  EXPECT_EQ(one.tokens_per_rank, 4u);
  EXPECT_EQ(one.topk, 2);
  EXPECT_EQ(one.layers, (std::vector<std::vector<uint64_t>>{{3, 5}}));
  const RoutingCounts many = parse_routing_counts(R"({"layers": [[1, 2], [3, 0]]})", "b.json");
  EXPECT_FALSE(many.topk.has_value());
  EXPECT_EQ(many.layers, (std::vector<std::vector<uint64_t>>{{1, 2}, {3, 0}}));
}

TEST(EpCountsFile, CsvWithAndWithoutLayersInAnyOrder) {
  const RoutingCounts plain =
      parse_routing_counts("# from layer 3\nexpert,count\n1,5\n\n0, 3\n", "a.csv");
  EXPECT_EQ(plain.layers, (std::vector<std::vector<uint64_t>>{{3, 5}}));
  const RoutingCounts layered =
      parse_routing_counts("layer,expert,count\n1,0,7\n0,1,2\n0,0,1\n1,1,0\n", "b.csv");
  EXPECT_EQ(layered.layers, (std::vector<std::vector<uint64_t>>{{1, 2}, {7, 0}}));
  EXPECT_EQ(parse_routing_counts("0,4\r\n1,4\r\n", "c.csv").layers,
            (std::vector<std::vector<uint64_t>>{{4, 4}}));
}

TEST(EpCountsFile, JsonErrorsNameThePath) {
  auto parse = [](const char* text) {
    return refusal([&] { parse_routing_counts(text, "r.json"); });
  };
  EXPECT_EQ(parse(R"({"counts": [1, "2"]})"),
            R"(r.json: "counts"[1]: expected a whole number, got the string "2")");
  EXPECT_EQ(parse(R"({"counts": [1, -2]})"), R"(r.json: "counts"[1]: -2 is negative)");
  EXPECT_EQ(parse(R"({"counts": [1.5]})"), R"(r.json: "counts"[0]: 1.5 is not a whole number)");
  EXPECT_EQ(parse(R"({"layers": [[1], [2, "x"]]})"),
            R"(r.json: "layers"[1][1]: expected a whole number, got the string "x")");
  EXPECT_TRUE(has(parse(R"({"topk": 8})"), "give one of \"counts\" (one layer) or \"layers\""));
  EXPECT_TRUE(has(parse(R"({"counts": 3})"), "\"counts\": expected an array"));
  EXPECT_TRUE(has(parse(R"({"topk": "8", "counts": [1]})"), "\"topk\": expected a whole number"));
  EXPECT_TRUE(has(parse(R"({"tokens_per_rank": 0, "counts": [1]})"), "0 is below 1"));
  EXPECT_TRUE(has(parse(R"({"tokens_per_rank": 4294967296, "counts": [1]})"), "is above"));
  EXPECT_TRUE(has(parse(R"({"layers": [[1, 2], [3]]})"), "1 experts, but layer 0 has 2"));
  EXPECT_TRUE(has(parse(R"({"counts": [1,)"), "r.json: not valid JSON"));
}

TEST(EpCountsFile, CsvErrorsNameLineAndField) {
  auto parse = [](const char* text) {
    return refusal([&] { parse_routing_counts(text, "r.csv"); });
  };
  EXPECT_EQ(parse("expert,count\n0,1\n1,-3\n"), "r.csv:3: count: -3 is negative");
  EXPECT_EQ(parse("expert,count\n0,1\n1,x\n"), "r.csv:3: count: \"x\" is not a whole number");
  EXPECT_EQ(parse("expert,count\n0,1\n\n0,2\n"),
            "r.csv:4: expert: expert 0 of layer 0 already given on line 2");
  EXPECT_EQ(parse("0,1\n2,1\n"), "r.csv: layer 0: expert 1 has no line");
  EXPECT_EQ(parse("expert,count\n0,1,5\n"), "r.csv:2: line: 3 fields, expected 2");
  EXPECT_TRUE(has(parse("expert;count\n0;1\n"), "r.csv:1: header: expected expert,count or"));
  EXPECT_EQ(parse("layer,expert,count\n1,0,4\n"),
            "r.csv: layer 0 has no lines (layers 0..1 each need theirs)");
  EXPECT_TRUE(has(parse("layer,expert,count\n0,0,4\n0,1,4\n1,0,4\n"),
                  "layer 1 has 1 experts, but layer 0 has 2"));
  EXPECT_EQ(parse("expert,count\n"), "r.csv: no data lines");
}

TEST(EpCountsFile, LoadsFromAFileAndNamesAMissingOne) {
  TempFile file("counts.json", R"({"tokens_per_rank": 2, "topk": 1, "counts": [3, 1]})");
  const RoutingCounts c = load_routing_counts(file.path());
  EXPECT_EQ(c.source, file.path());
  const Routing r = routing_from_counts(c, 0, 2, *c.tokens_per_rank, *c.topk);
  EXPECT_EQ(r.selections, (std::vector<std::vector<uint64_t>>{{2, 0}, {1, 1}}));
  EXPECT_TRUE(has(refusal([&] { routing_from_counts(c, 1, 2, 2, 1); }), "no layer 1"));
  EXPECT_EQ(refusal([] { load_routing_counts("/tmp/commtool_no_such_file.json"); }),
            "/tmp/commtool_no_such_file.json: cannot open: No such file or directory");
}

// A small file must not make the reader allocate many times its size: a 1 GB sparse file (one
// line of NUL bytes) once took 7 GB and crashed under a memory limit.
TEST(EpCountsFile, FilesAreBoundedInSizeLinesAndEntries) {
  TempFile sparse("sparse.csv", "");
  ASSERT_EQ(::truncate(sparse.path().c_str(), 1ll << 30), 0);
  EXPECT_TRUE(has(refusal([&] { load_routing_counts(sparse.path()); }),
                  "1073741824 bytes, more than the 33554432 bytes commtool reads"));
  const std::string nul_line(1 << 20, '\0');
  EXPECT_EQ(refusal([&] { parse_routing_counts(nul_line, "r.csv"); }),
            "r.csv:1: line: longer than 4096 bytes");
  std::string many = "expert,count\n";
  for (size_t i = 0; i <= kMaxRoutingEntries; ++i)
    many += "0,1\n";
  EXPECT_TRUE(has(refusal([&] { parse_routing_counts(many, "r.csv"); }),
                  "r.csv: more than 1048576 data lines"));
  // 17 layers of 65,536 experts each: one layer more than the bound allows.
  std::string layers = R"({"layers": [)";
  std::string layer = "[0";
  for (int e = 1; e < kMaxExperts; ++e)
    layer += ",0";
  layer += "]";
  for (int l = 0; l < 17; ++l)
    layers += (l ? "," : "") + layer;
  layers += "]}";
  EXPECT_TRUE(has(refusal([&] { parse_routing_counts(layers, "r.json"); }),
                  "r.json: \"layers\"[16]: more than 1048576 (layer, expert) entries"));
}

TEST(EpCountsFile, CsvFileSumMismatchNamesTheFile) {
  TempFile file("counts.csv", "expert,count\n0,3\n1,2\n");
  const RoutingCounts c = load_routing_counts(file.path());
  EXPECT_EQ(refusal([&] { routing_from_counts(c, 0, 2, 2, 1); }),
            file.path() +
                ": layer 0: counts add up to 5, expected 4 (tokens_per_rank 2 x topk 1 x ranks 2)");
}

// ---- placement ----------------------------------------------------------------------------------

TEST(EpPlacement, ContiguousBlocksWithTheRemainderOnTheFirstRanks) {
  auto homes = [](int experts, int ranks) {
    std::vector<int> h;
    for (const auto& holders : contiguous_placement(experts, ranks).holders)
      h.push_back(holders.at(0));
    return h;
  };
  EXPECT_EQ(homes(8, 4), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(homes(10, 4), (std::vector<int>{0, 0, 0, 1, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(homes(2, 4), (std::vector<int>{0, 1}));
}

TEST(EpPlacement, JsonAndCsvFiles) {
  TempFile json("placement.json", R"({"placement": [1, 0, 1]})");
  EXPECT_EQ(load_placement(json.path(), 3, 2).holders,
            (std::vector<std::vector<int>>{{1}, {0}, {1}}));
  TempFile csv("placement.csv", "expert,rank\n2,0\n0,1\n# comment\n1,1\n");
  EXPECT_EQ(load_placement(csv.path(), 3, 2).holders,
            (std::vector<std::vector<int>>{{1}, {1}, {0}}));
}

TEST(EpPlacement, ErrorsNameTheFileLineAndField) {
  auto parse = [](const char* text) { return refusal([&] { parse_placement(text, "p", 3, 2); }); };
  EXPECT_EQ(parse("0,0\n1,1\n0,1\n"), "p:3: expert: expert 0 already placed on line 1");
  EXPECT_EQ(parse("0,0\n1,2\n2,1\n"), "p:2: rank: rank 2 is out of range (0..1 for 2 ranks)");
  EXPECT_EQ(parse("0,0\n3,1\n"), "p:2: expert: expert 3 is out of range (0..2)");
  EXPECT_EQ(parse("0,0\n2,1\n"), "p: expert 1 has no line (every expert 0..2 needs one)");
  EXPECT_EQ(parse("0,0\n1,x\n"), "p:2: rank: \"x\" is not a whole number");
  EXPECT_EQ(parse(R"({"placement": [0, 5, 1]})"),
            R"(p: "placement"[1]: rank 5 is out of range (0..1 for 2 ranks))");
  EXPECT_EQ(parse(R"({"placement": [0, 1]})"),
            R"(p: "placement": 2 entries, expected one per expert (3))");
  EXPECT_EQ(parse(R"({"placement": [0, "1", 1]})"),
            R"(p: "placement"[1]: expected a whole number, got the string "1")");
  EXPECT_EQ(parse(R"({"experts": [0, 1, 1]})"), R"(p: "placement": missing)");
}

// ---- replication --------------------------------------------------------------------------------

TEST(EpReplication, ReplicasGoToTheLeastLoadedRank) {
  // One expert per rank, loads 80, 30, 10. Expert 0's replica goes to rank 2 (10), leaving
  // 40, 30, 50; expert 1's then goes to rank 0 (40), the lighter rank that lacks it.
  const Routing r = from_counts({80, 30, 10}, 3, 40, 1);
  const ReplicationPlan plan = plan_replication(r, contiguous_placement(3, 3), 2, {});
  EXPECT_EQ(plan.replicated, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.placement.holders, (std::vector<std::vector<int>>{{0, 2}, {1, 0}, {2}}));
}

TEST(EpReplication, TiesGoToTheLowestExpertAndRank) {
  const Routing r = from_counts({10, 10, 10, 10}, 4, 10, 1);
  const ReplicationPlan plan = plan_replication(r, contiguous_placement(4, 4), 2, {});
  // Expert 0 to rank 1 (ranks 1..3 tie); then rank 0 holds 5 and takes expert 1's replica.
  EXPECT_EQ(plan.placement.holders, (std::vector<std::vector<int>>{{0, 1}, {1, 0}, {2}, {3}}));
}

TEST(EpReplication, AReplicaNeverJoinsARankThatHoldsTheExpert) {
  // Rank 0 (expert 0: 40, expert 1: 0) is lighter than rank 1 (30 + 30), but already holds
  // expert 0.
  const Routing r = from_counts({40, 0, 30, 30}, 2, 50, 1);
  const ReplicationPlan plan = plan_replication(r, contiguous_placement(4, 2), 1, {});
  EXPECT_EQ(plan.placement.holders[0], (std::vector<int>{0, 1}));
}

TEST(EpReplication, HoldersSplitEachSourcesSelectionsEqually) {
  // 2 ranks, top-1, 10 tokens each: expert 0 has 8 from each source, expert 1 has 2.
  const Routing even = from_counts({16, 4}, 2, 10, 1);
  const ReplicationPlan plan = plan_replication(even, contiguous_placement(2, 2), 1, {1, 1});
  EXPECT_EQ(plan.traffic.dispatch_tokens, (RankMatrix{{4, 6}, {4, 6}}));
  // Odd: source 0 has 8 of expert 0 (4 and 4), source 1 has 7: its first turn is rank 1's.
  const Routing odd = from_counts({15, 5}, 2, 10, 1);
  EXPECT_EQ(plan_replication(odd, contiguous_placement(2, 2), 1, {}).traffic.dispatch_tokens,
            (RankMatrix{{4, 6}, {3, 7}}));
}

TEST(EpReplication, ReplicasRecountDistinctDestinationsPerToken) {
  // Every token picks experts 0 (rank 0) and 1 (rank 1). With a replica of expert 0 on rank
  // 1, every other token finds both its experts on rank 1 and is sent once.
  const Routing r =
      hand_routing(2, {{{0, 1}, {0, 1}, {0, 1}, {0, 1}}, {{1, 0}, {1, 0}, {1, 0}, {1, 0}}});
  EXPECT_EQ(dispatch_matrix(r, contiguous_placement(2, 2)), (RankMatrix{{4, 4}, {4, 4}}));
  const ReplicationPlan plan = plan_replication(r, contiguous_placement(2, 2), 1, {});
  EXPECT_EQ(plan.placement.holders[0], (std::vector<int>{0, 1}));
  // Source 0's turns for expert 0 start at rank 0, source 1's at rank 1.
  EXPECT_EQ(plan.traffic.dispatch_tokens, (RankMatrix{{2, 4}, {2, 4}}));
  EXPECT_FALSE(plan.metrics.dispatch_per_selection);
  EXPECT_EQ(plan.metrics.experts[0].ranks, (std::vector<int>{0, 1}));
}

TEST(EpReplication, ZeroIsTheInputAndOneRankHasNowhereToGo) {
  const Routing r = from_counts({4, 4}, 2, 2, 2);
  const Placement p = contiguous_placement(2, 2);
  const ReplicationPlan none = plan_replication(r, p, 0, {});
  EXPECT_TRUE(none.replicated.empty());
  EXPECT_EQ(none.traffic.dispatch_tokens, dispatch_matrix(r, p));
  const Routing alone = from_counts({2, 2}, 1, 2, 2);
  EXPECT_TRUE(plan_replication(alone, contiguous_placement(2, 1), 2, {}).replicated.empty());
}

TEST(EpReplication, RefusesMoreThanTheExpertCount) {
  const Routing r = from_counts({4, 4}, 2, 2, 2);
  EXPECT_EQ(refusal([&] { plan_replication(r, contiguous_placement(2, 2), 3, {}); }),
            "replicate 3: must be between 0 and the expert count 2");
}

TEST(EpReplication, ReplicatingTheHottestLowersImbalanceOfAGeneratedRouting) {
  const Routing r = generate_routing(config(8, 4096, 64, 8, "zipf:1.2"));
  const Placement p = contiguous_placement(64, 8);
  const EpMetrics before = ep_metrics(r, p, ep_traffic(dispatch_matrix(r, p), {}));
  const ReplicationPlan plan = plan_replication(r, p, 4, {});
  EXPECT_LT(plan.metrics.imbalance, before.imbalance);
  // The same tokens are computed: selections are unchanged.
  EXPECT_EQ(plan.metrics.experts[0].selections, before.experts[0].selections);
}
