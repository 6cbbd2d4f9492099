# Bakes the project version and the git commit into the binary, so that every figure commtool
# prints can be traced to the build that produced it. The commit is read at every build, not
# only when CMake configures: a binary must not claim the commit of an older configure.
find_package(Git QUIET)
set(COMMTOOL_BUILD_INFO "${PROJECT_BINARY_DIR}/generated/build_info.hpp")
add_custom_target(commtool_build_info ALL
  COMMAND "${CMAKE_COMMAND}"
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUTPUT=${COMMTOOL_BUILD_INFO}
          -DGIT_EXECUTABLE=${GIT_EXECUTABLE}
          -DPROJECT_VERSION=${PROJECT_VERSION}
          -DCUDA_MAJOR=${CUDAToolkit_VERSION_MAJOR}
          -DCUDA_MINOR=${CUDAToolkit_VERSION_MINOR}
          -P "${PROJECT_SOURCE_DIR}/cmake/WriteBuildInfo.cmake"
  BYPRODUCTS "${COMMTOOL_BUILD_INFO}"
  COMMENT "Recording the git commit in build_info.hpp")
