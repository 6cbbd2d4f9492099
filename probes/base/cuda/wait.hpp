// The one way probes wait for the GPU: poll an event until a deadline. A GPU that never
// finishes becomes an Error(kTimeout) naming what was waited for, not a hung terminal.
#pragma once

#include <chrono>
#include <string>

#include "probes/base/cuda/memory.hpp"

namespace commtool::cuda {

void wait_for_event(const Event& done, std::chrono::duration<double> timeout,
                    const std::string& what);

}  // namespace commtool::cuda
