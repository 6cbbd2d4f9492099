// Which Debian/Ubuntu package provides a tool that advice tells the user to run, in the words
// advice puts after the command: "`lspci -d 10de:` (package pciutils)". One place, so that every
// finding of every command names the same package for the same tool; the findings' tests fail
// when advice names a tool without its package (tests/next_step_checks.hpp).
#pragma once

namespace commtool::tools {

// lspci
inline constexpr const char* kPciutils = "package pciutils";
// nvidia-smi is not packaged on its own everywhere: it comes with the driver's utilities.
inline constexpr const char* kNvidiaSmi =
    "nvidia-smi comes with the NVIDIA driver: Debian's package nvidia-smi, Ubuntu's "
    "nvidia-utils-<driver version>";
// ibstat
inline constexpr const char* kInfinibandDiags = "package infiniband-diags";
// ibv_devinfo
inline constexpr const char* kIbverbsUtils = "package ibverbs-utils";
// dot -Tsvg
inline constexpr const char* kGraphviz = "package graphviz";
// numactl
inline constexpr const char* kNumactl = "package numactl";
// ethtool
inline constexpr const char* kEthtool = "package ethtool";
// gdb
inline constexpr const char* kGdb = "package gdb";
// py-spy is on PyPI, not in Debian or Ubuntu.
inline constexpr const char* kPySpy = "pip package py-spy";
// chronyc
inline constexpr const char* kChrony = "package chrony";
// ps, top: in Debian's and Ubuntu's base system, not always in a container image.
inline constexpr const char* kProcps = "package procps";

}  // namespace commtool::tools
