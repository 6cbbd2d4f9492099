// What every finding's next step is held to, by the tests of each command's findings: it is
// there, and a tool it tells the user to run comes with the Debian/Ubuntu package that provides
// it (probes/base/tool_packages.hpp).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace next_step {

struct Tool {
  const char* command;  // as advice writes it
  const char* package;  // what must then be said too
};

// Tools commtool's advice names, and the words that give their package.
inline constexpr Tool kTools[] = {
    {"lspci", "package pciutils"},
    {"nvidia-smi", "nvidia-smi comes with the NVIDIA driver"},
    {"ibstat", "package infiniband-diags"},
    {"ibv_devinfo", "package ibverbs-utils"},
    {"dot -T", "package graphviz"},
    {"numactl", "package numactl"},
    {"ethtool", "package ethtool"},
    {"`gdb ", "package gdb"},
    {"py-spy", "pip package py-spy"},
    {"chronyc", "package chrony"},
    {"`ps ", "package procps"},
    {"`top ", "package procps"},
};

// Adds a failure naming `what` (a finding's code, say) when `advice` is empty or names a tool
// without its package.
inline void expect_next_step(const std::string& advice, const std::string& what) {
  EXPECT_FALSE(advice.empty()) << what << ": no next step";
  for (const Tool& t : kTools) {
    if (advice.find(t.command) == std::string::npos) continue;
    EXPECT_NE(advice.find(t.package), std::string::npos)
        << what << ": names " << t.command << " without \"" << t.package << "\": " << advice;
  }
}

}  // namespace next_step
