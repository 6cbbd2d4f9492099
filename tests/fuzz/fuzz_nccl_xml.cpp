// `commtool topo --nccl-xml FILE`: the XML reader, the NCCL topology reader on top of it, and
// the analysis a topology read from a file goes through (the connection matrix, findings).
#include "fuzz_common.hpp"
#include "probes/topo/classify.hpp"
#include "probes/topo/nccl_xml.hpp"
#include "probes/topo/xml.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  commtool::fuzz::expect_error_or_value([&] { commtool::topo::xml::parse(text, "fuzz.xml"); });
  commtool::fuzz::expect_error_or_value([&] {
    commtool::topo::Topology topo = commtool::topo::parse_nccl_xml(text, "fuzz.xml");
    commtool::topo::analyze(topo);
  });
  return 0;
}
