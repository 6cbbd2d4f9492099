# Bakes the project version and the git commit into the binary, so that every figure commtool
# prints can be traced to the build that produced it.
find_package(Git QUIET)
set(COMMTOOL_GIT_COMMIT "unknown")
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                  OUTPUT_VARIABLE COMMTOOL_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(NOT COMMTOOL_GIT_COMMIT)
    set(COMMTOOL_GIT_COMMIT "unknown")
  endif()
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/build_info.hpp.in"
               "${PROJECT_BINARY_DIR}/generated/build_info.hpp" @ONLY)
