// NCCL comes with the CUDA toolkit on the build machine too, so loading it needs no GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "probes/base/error.hpp"
#include "probes/base/nccl/nccl_library.hpp"

using commtool::Error;
using commtool::ExitCode;
using commtool::nccl::Library;

TEST(NcclLibrary, LoadsNccl228OrNewer) {
  Library lib;
  EXPECT_GE(lib.version(), 22800) << lib.path();
  EXPECT_FALSE(lib.path().empty());
  EXPECT_EQ(lib.version_string().rfind("2.", 0), 0u);
}

TEST(NcclLibrary, MissingChosenLibraryIsAnEnvironmentErrorNamingIt) {
  setenv("COMMTOOL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  try {
    Library lib;
    ADD_FAILURE() << "loaded " << lib.path();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kEnvironment);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnccl.so.2"), std::string::npos);
  }
  unsetenv("COMMTOOL_NCCL_LIBRARY");
}

TEST(NcclLibrary, FailedCallCarriesNcclsOwnWords) {
  Library lib;
  try {
    lib.check(ncclInvalidArgument, "ncclAllReduce");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ncclAllReduce failed: invalid argument"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(lib.check(ncclSuccess, "ncclAllReduce"));
  EXPECT_NO_THROW(lib.check(ncclInProgress, "ncclAllReduce"));  // non-blocking: not an error
}
