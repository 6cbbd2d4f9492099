// The judgement half of the analysis: why P2P is off, and what looks wrong. Split from
// classify.cpp so that the rules read as a list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probes/topo/classify.hpp"

namespace commtool::topo {

// One verdict per unordered GPU pair that CUDA was asked about.
std::vector<P2pVerdict> p2p_verdicts(const Topology& topo, const ConnectionMatrix& m);

// A line for the P2P section when there is no pair to show: "no peer: only one GPU".
std::string p2p_summary(const Topology& topo);

// The likely reason CUDA refuses P2P between two GPUs on this path.
std::string p2p_refusal_reason(const Topology& topo, const Gpu& a, const Gpu& b,
                               const Connection& path);

// Why the GPUs cannot be driven at all (one bound to no driver, or to vfio-pci), for the
// launchers to refuse before starting workers; nullopt when nothing says so.
std::optional<std::string> unusable_driver(const Topology& topo);

// Warnings first, then notes; each with its evidence.
std::vector<Finding> find_problems(const Topology& topo, const Analysis& analysis);

}  // namespace commtool::topo
