// `commtool report DIR`: a saved run read back (run.json, then records-rank<R>.txt for each
// rank it lists) and analysed as report analyses it. The input is run.json, then optionally a
// NUL byte and the records every rank 0..3 gets (JSON text never holds a raw NUL).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fuzz_common.hpp"
#include "tracing/trace/record_io.hpp"
#include "tracing/trace/trace_analysis.hpp"

namespace fs = std::filesystem;
using namespace commtool::tracing;

namespace {

const fs::path& run_dir() {
  return commtool::fuzz::scratch_dir("commtool-fuzz-run");
}

void write(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  const size_t nul = text.find('\0');
  write(run_dir() / "run.json", text.substr(0, nul));
  const std::string records =
      nul == std::string::npos ? std::string("commtool-records 1\n") : text.substr(nul + 1);
  for (int rank = 0; rank < 4; ++rank)
    write(run_dir() / ("records-rank" + std::to_string(rank) + ".txt"), records);
  commtool::fuzz::expect_error_or_value([&] {
    TraceRun run = load_run(run_dir().string());
    analyse(run);
  });
  return 0;
}
