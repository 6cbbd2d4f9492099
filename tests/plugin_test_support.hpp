// The built profiler plugin opened as NCCL opens it: the base of the test fixtures that call its
// ncclProfiler_v5 table with synthetic event descriptors.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "tracing/profiler/nccl_profiler_v5.hpp"

class LoadedPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // NODELETE: the plugin's static libstdc++ allocates its exception emergency pool at load
    // and never frees it; unloaded, LeakSanitizer would call that a leak of ours. (The library
    // is linked -z nodelete as well.)
    handle_ = dlopen(COMMTOOL_PROFILER_PLUGIN, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    ASSERT_NE(handle_, nullptr) << dlerror();
    table_ = static_cast<commtool::nccl_profiler::ProfilerV5*>(dlsym(handle_, "ncclProfiler_v5"));
    ASSERT_NE(table_, nullptr);
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }

  void* handle_ = nullptr;
  commtool::nccl_profiler::ProfilerV5* table_ = nullptr;
};
