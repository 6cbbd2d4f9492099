# One place for the warning set, applied per target so third-party headers stay quiet.
add_library(commtool_warnings INTERFACE)
target_compile_options(commtool_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Wimplicit-fallthrough>
  # GCC 12 warns falsely inside libstdc++'s std::string operator+ at -O2 (GCC bug 105651).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>)
