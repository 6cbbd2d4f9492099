#include "probes/base/nvml_session.hpp"

#include <fmt/format.h>

namespace commtool::nvml {

Session::Session(const std::string& library) : lib_({library}) {
  if (!lib_) {
    why_not_ = fmt::format("cannot load {} ({})", library, lib_.error());
    return;
  }
  const auto init = lib_.symbol<Return (*)()>("nvmlInit_v2");
  shutdown_ = lib_.symbol<Return (*)()>("nvmlShutdown");
  error_string_ = lib_.symbol<const char* (*)(Return)>("nvmlErrorString");
  by_bus_id_ = lib_.symbol<Return (*)(const char*, Device*)>("nvmlDeviceGetHandleByPciBusId_v2");
  for (const auto& [present, name] :
       {std::pair{init != nullptr, "nvmlInit_v2"}, std::pair{shutdown_ != nullptr, "nvmlShutdown"},
        std::pair{by_bus_id_ != nullptr, "nvmlDeviceGetHandleByPciBusId_v2"}}) {
    if (!present) {
      why_not_ = fmt::format("{} lacks {} (a driver older than R450?)", library, name);
      return;
    }
  }
  if (const Return r = init(); r != kSuccess) {
    why_not_ = "nvmlInit failed: " + why(r);
    return;
  }
  started_ = true;
}

Session::~Session() {
  if (started_) shutdown_();
}

std::string Session::why(Return r) const {
  return error_string_ ? error_string_(r) : fmt::format("NVML error {}", r);
}

Return Session::device(const std::string& bdf, Device* out) const {
  return by_bus_id_(bdf.c_str(), out);
}

}  // namespace commtool::nvml
