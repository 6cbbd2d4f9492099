#include "tracing/trace/trace_run.hpp"

#include <fmt/format.h>

#include "probes/base/error.hpp"

namespace commtool::tracing {

std::string to_string(CompletionMode m) {
  switch (m) {
    case CompletionMode::kSync:
      return "sync";
    case CompletionMode::kAsyncWait:
      return "async-wait";
    case CompletionMode::kDeviceSync:
      return "device-sync";
    case CompletionMode::kBlockingWait:
      return "blocking-wait";
  }
  return "?";
}

std::optional<CompletionMode> parse_completion_mode(const std::string& text) {
  for (CompletionMode m : {CompletionMode::kSync, CompletionMode::kAsyncWait,
                           CompletionMode::kDeviceSync, CompletionMode::kBlockingWait}) {
    if (text == to_string(m)) return m;
  }
  return std::nullopt;
}

}  // namespace commtool::tracing
