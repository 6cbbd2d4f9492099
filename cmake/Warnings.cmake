# One place for the warning set, applied per target so third-party headers stay quiet.
add_library(commtool_warnings INTERFACE)
target_compile_options(commtool_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Wimplicit-fallthrough>)
