// Tasks that exercise the worker layer without a GPU: the unit tests run them through the real
// binary to pin how the launcher handles exchange, death, hangs and errors. Hidden from users.
#pragma once

namespace commtool::workers {

// Registers "test-exchange", "test-die", "test-hang", "test-error", "test-busy-hang",
// "test-diverge" and "test-env" (see test_tasks.cpp).
void register_test_tasks();

}  // namespace commtool::workers
