#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "probes/base/watchdog.hpp"

using namespace std::chrono_literals;

TEST(Watchdog, StuckStageEndsTheProcessWithExitCode5AndNamesTheStage) {
  EXPECT_EXIT(
      {
        commtool::Watchdog dog("topo", 50ms);
        dog.stage("nvml");
        std::this_thread::sleep_for(5s);  // a driver call that never returns
      },
      ::testing::ExitedWithCode(5), "timed out after 0.1 s in stage 'nvml'");
}

TEST(Watchdog, WorkThatFinishesInTimeIsLeftAlone) {
  auto started = std::chrono::steady_clock::now();
  {
    commtool::Watchdog dog("topo", 10s);
    dog.stage("sysfs");
  }
  // Disarming wakes the watcher at once rather than waiting out the limit.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}
