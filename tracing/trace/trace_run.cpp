#include "tracing/trace/trace_run.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <ctime>

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

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name_here() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace commtool::tracing
