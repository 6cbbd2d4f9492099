// NCCL RAS answers (tracing/crossrank/ras.hpp) as `commtool report` reads them: either form, the
// comma repair of NCCL's JSON, the findings and the text; and the same bytes as NCCL's log
// (tracing/crossrank/nccl_log.hpp). Hostile input must end in commtool::Error, never a crash.
#include "fuzz_common.hpp"
#include "tracing/crossrank/nccl_log.hpp"
#include "tracing/crossrank/ras.hpp"

using namespace commtool::crossrank;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = commtool::fuzz::text_of(data, size);
  commtool::fuzz::expect_error_or_value([&] {
    const RasStatus s = read_ras(text, "fuzz");
    render_ras_text(s, analyse_ras(s), "fuzz");
  });
  const NcclLog log = read_nccl_log(text, "fuzz");
  render_nccl_logs_text({log}, analyse_nccl_logs({log}));
  return 0;
}
