// A deadline for work that cannot be interrupted: a driver call that never returns (cuInit on a
// GPU that fell off the bus, NVML on a wedged driver). The watchdog names the stage that was
// running and ends the process with exit code 5, so nothing hangs an on-call terminal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace commtool {

class Watchdog {
 public:
  // what: the command, for the message ("topo").
  Watchdog(std::string what, std::chrono::duration<double> limit);
  ~Watchdog();  // disarms
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The stage now running, named in the timeout message. Must be a string literal. A driver
  // stage (NVML, CUDA) that overruns is blamed on the driver, with the advice for a sick GPU;
  // any other (reading a file, analysing, rendering) is blamed on its own size.
  void stage(const char* name, bool driver_call = false) {
    driver_call_.store(driver_call);
    stage_.store(name);
  }

 private:
  void watch();

  std::string what_;
  std::chrono::duration<double> limit_;
  std::atomic<const char*> stage_{"start"};
  std::atomic<bool> driver_call_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace commtool
