// PyTorch Flight Recorder dumps (tracing/crossrank/flight_recorder.hpp), as `commtool report`
// reads them: the pickle reader and the JSON form, the mapping to a cross-rank job, its verdict
// and every renderer. The first byte says how many dumps (1 to 3); the rest is cut into that many
// equal parts, each written as nccl_trace_rank_<i>. A hostile dump must end in commtool::Error,
// never a crash, a hang or unbounded memory.
#include <filesystem>
#include <fstream>

#include "fuzz_common.hpp"
#include "reports/format/verdict_json.hpp"
#include "tracing/crossrank/flight_recorder.hpp"

namespace fs = std::filesystem;
using namespace commtool::crossrank;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t dumps = 1 + data[0] % 3;
  const std::string rest = commtool::fuzz::text_of(data + 1, size - 1);
  const fs::path& dir = commtool::fuzz::scratch_dir("commtool-fuzz-fr");
  std::vector<fs::path> files;
  const size_t part = rest.size() / dumps;
  for (size_t i = 0; i < dumps; ++i) {
    const fs::path file = dir / ("nccl_trace_rank_" + std::to_string(i));
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        << rest.substr(i * part, i + 1 == dumps ? std::string::npos : part);
    files.push_back(file);
  }
  commtool::fuzz::expect_error_or_value([&] {
    const FlightRecorderJob fr = read_flight_recorder(files);
    const Verdict v = analyse(fr.job);
    render_flight_recorder_text(fr, v);
    // As the CLI prints it: text from a dump need not be UTF-8.
    commtool::reports::verdict_json(fr.job, v).dump(2, ' ', false,
                                                    nlohmann::json::error_handler_t::replace);
  });
  return 0;
}
