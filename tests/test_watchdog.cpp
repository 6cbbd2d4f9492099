#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "probes/base/watchdog.hpp"

using namespace std::chrono_literals;

TEST(Watchdog, StuckStageEndsTheProcessWithExitCode5AndNamesTheStage) {
  EXPECT_EXIT(
      {
        commtool::Watchdog dog("topo", 50ms);
        dog.stage("nvml", /*driver_call=*/true);
        std::this_thread::sleep_for(5s);  // a driver call that never returns
      },
      ::testing::ExitedWithCode(5), "timed out after 0.1 s in stage 'nvml'.*Xid");
}

TEST(Watchdog, OverrunOutsideTheDriverIsNotBlamedOnIt) {
  EXPECT_EXIT(
      {
        commtool::Watchdog dog("topo", 50ms);
        dog.stage("analysis");
        std::this_thread::sleep_for(5s);  // a huge file being analysed
      },
      ::testing::ExitedWithCode(5), "stage 'analysis' \\(no driver call was running");
}

TEST(Watchdog, DriverAdviceOnlyForDriverStages) {
  EXPECT_EXIT(
      {
        commtool::Watchdog dog("topo", 50ms);
        dog.stage("nccl-xml");
        std::this_thread::sleep_for(5s);
      },
      ::testing::ExitedWithCode(5), "^[^X]*$");  // no "Xid" (nor any X) in the message
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
