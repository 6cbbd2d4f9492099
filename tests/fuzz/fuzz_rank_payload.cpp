// What rank 0 of `topo` under MPI reads from every other rank: its payload (host, source, the
// facts the cluster view compares, its report), then the comparison and both renderings of the
// cluster view made from it. Another rank may run another build or be broken: bad input must
// end in commtool::Error, never a crash.
#include <vector>

#include "fuzz_common.hpp"
#include "probes/topo/cluster.hpp"
#include "probes/topo/cluster_wire.hpp"
#include "reports/topo/cluster_report.hpp"

using namespace commtool::topo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  commtool::fuzz::expect_error_or_value([&] {
    const RankPayload p = decode_rank_payload(text, 1);
    if (!p.ok) return;
    // The payload against an empty node, on either side of the comparison.
    RankPayload empty = p;
    empty.facts = NodeFacts{};
    const std::vector<RankPayload> ranks{p, p, empty};
    const ClusterView view = compare_cluster(ranks);
    differences(empty.facts, p.facts);
    commtool::reports::render_cluster_text(view, ranks);
    commtool::reports::cluster_to_json(view, ranks).dump();
  });
  return 0;
}
