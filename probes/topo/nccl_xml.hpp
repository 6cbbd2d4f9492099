// The offline topology source: NCCL's XML topology file, as NCCL writes it with
// NCCL_TOPO_DUMP_FILE or as cloud vendors hand it out for NCCL_TOPO_FILE. It lets `commtool topo`
// explain a machine it is not running on.
//
// Sharp edges, all reported in Topology::missing: the file records each PCIe link's maximum
// speed and width only (never the trained state), no CUDA P2P answers, and no GPU names. NCCL
// keeps one <pci> element per PCIe switch, so every bridge in the result is one hop
// (Topology::pci_hops_collapsed). Elements and attributes this reader does not know are skipped,
// because NCCL adds new ones between versions; the ones it does read are checked strictly.
#pragma once

#include <string>
#include <string_view>

#include "probes/topo/topology.hpp"

namespace commtool::topo {

// `source_name` names the file in error messages ("topo.xml:7: ...") and in Topology::source.
// Throws commtool::usage_error for malformed XML and for values NCCL would not write.
Topology parse_nccl_xml(std::string_view text, const std::string& source_name);

// Reads and parses `path`; an unreadable file is a usage_error naming the path and the reason.
Topology read_nccl_xml_file(const std::string& path);

// NCCL's `affinity` attribute: the kernel's cpumask format, comma-separated 32-bit hex words,
// most significant first. "0000ffff,0000ffff" -> "0-15,32-47"; "" or all zero -> "".
// Throws commtool::usage_error when `mask` is not in that format.
std::string cpumask_to_cpulist(const std::string& mask);

}  // namespace commtool::topo
