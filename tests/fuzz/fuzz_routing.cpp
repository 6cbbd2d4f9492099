// `commtool diagnose ep --routing FILE`: a model's per-expert counts (JSON or CSV), then what
// the command does with them: routing dealt out over the ranks, the contiguous placement, the
// dispatch matrix and its metrics.
#include "fuzz_common.hpp"
#include "tracing/ep/ep_routing.hpp"

using namespace commtool::tracing;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  commtool::fuzz::expect_error_or_value([&] {
    RoutingCounts counts = parse_routing_counts(text, "fuzz.csv");
    // 1 to 8 ranks, from the input so that every count is tried at several.
    const int ranks = 1 + static_cast<int>(size % 8);
    for (size_t layer = 0; layer < counts.layers.size() && layer < 2; ++layer) {
      const int experts = static_cast<int>(counts.layers[layer].size());
      const int topk = counts.topk.value_or(experts < 8 ? experts : 8);
      const uint64_t tokens = counts.tokens_per_rank.value_or(16);
      commtool::fuzz::expect_error_or_value([&] {
        Routing routing = routing_from_counts(counts, layer, ranks, tokens, topk);
        Placement placement = contiguous_placement(routing.experts, ranks);
        RankMatrix tokens_matrix = dispatch_matrix(routing, placement);
        EpTraffic traffic = ep_traffic(tokens_matrix, TokenBytes{16, 16});
        ep_metrics(routing, placement, traffic);
      });
    }
  });
  return 0;
}
