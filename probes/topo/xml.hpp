// A small, strict XML reader for the one dialect commtool reads: NCCL's topology files
// (NCCL_TOPO_DUMP_FILE output, or a vendor's NCCL_TOPO_FILE). Those files are small and machine
// written, so a full XML library buys nothing; what matters is that a damaged or hand-edited
// file fails with "file:line: what was expected" instead of a half-read topology.
//
// Supported: an optional <?xml ...?> declaration, comments, elements with single- or
// double-quoted attributes, self-closing tags, the five predefined entities and numeric
// character references in attribute values. Text content is skipped. Not supported, and
// rejected with an error: DOCTYPE, CDATA sections, processing instructions after the start.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace commtool::topo::xml {

// Deeper nesting than this is rejected: NCCL's files nest about six levels (system, cpu, a few
// PCIe switches, pci, gpu, nvlink), and the bound keeps the recursive reader's stack small.
inline constexpr int kMaxDepth = 64;

struct Element {
  std::string name;
  // In document order, entities decoded.
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<Element> children;
  int line = 0;  // 1-based line of the '<' that opens the element

  // The value of the attribute `key`, or nullptr when the element has none.
  const std::string* attribute(std::string_view key) const;
};

// Parses a whole document and returns its root element. `source_name` prefixes every error
// message ("topo.xml:14: ..."). Throws commtool::usage_error on any malformed input.
Element parse(std::string_view text, const std::string& source_name);

}  // namespace commtool::topo::xml
