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
  // advice: what the timeout message says instead (a string literal), for a stage that waits on
  // something else than the driver or the input (other MPI ranks).
  void stage(const char* name, bool driver_call = false, const char* advice = nullptr) {
    driver_call_.store(driver_call);
    advice_.store(advice);
    stage_.store(name);
  }

 private:
  void watch();

  std::string what_;
  std::chrono::duration<double> limit_;
  std::atomic<const char*> stage_{"start"};
  std::atomic<bool> driver_call_{false};
  std::atomic<const char*> advice_{nullptr};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace commtool
