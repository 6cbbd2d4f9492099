# Script mode (cmake -P): writes build_info.hpp from cmake/build_info.hpp.in. configure_file
# leaves the file untouched when nothing changed, so an unchanged commit rebuilds nothing.
set(COMMTOOL_GIT_COMMIT "unknown")
if(GIT_EXECUTABLE AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE COMMTOOL_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(NOT COMMTOOL_GIT_COMMIT)
    set(COMMTOOL_GIT_COMMIT "unknown")
  endif()
endif()
set(CUDAToolkit_VERSION_MAJOR ${CUDA_MAJOR})
set(CUDAToolkit_VERSION_MINOR ${CUDA_MINOR})
configure_file("${SOURCE_DIR}/cmake/build_info.hpp.in" "${OUTPUT}" @ONLY)
