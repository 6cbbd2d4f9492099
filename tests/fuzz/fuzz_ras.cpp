// NCCL RAS answers (tracing/crossrank/ras.hpp) as `commtool report` reads them: either form, the
// comma repair of NCCL's JSON, the findings and the text. A hostile answer must end in
// commtool::Error, never a crash.
#include "fuzz_common.hpp"
#include "tracing/crossrank/ras.hpp"

using namespace commtool::crossrank;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  commtool::fuzz::expect_error_or_value([&] {
    const RasStatus s = read_ras(text, "fuzz");
    render_ras_text(s, analyse_ras(s), "fuzz");
  });
  return 0;
}
