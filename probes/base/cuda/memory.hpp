// Move-only owners of GPU and pinned host memory, streams and events. Every measurement in
// probes/ holds its resources through these, so an exception (a timeout, a wrong byte) frees
// everything on the way out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace commtool::cuda {

// cudaMalloc'd memory on the device current at construction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(device_, o.device_);
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = -1;
};

// Page-locked host memory placed on one NUMA node (mmap + mbind, then cudaHostRegister, so the
// pages are where the GPU's DMA engines are nearest), mapped into every device's address space.
// numa_node < 0: no placement (the OS's first-touch policy decides).
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(size_t bytes, int numa_node);
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& o) noexcept { swap(o); }
  PinnedHostBuffer& operator=(PinnedHostBuffer&& o) noexcept {
    swap(o);
    return *this;
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  bool placed() const { return placed_; }  // mbind succeeded

 private:
  void swap(PinnedHostBuffer& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(mapped_, o.mapped_);
    std::swap(placed_, o.placed_);
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_ = 0;
  bool placed_ = false;
};

class Stream {
 public:
  Stream();  // non-blocking stream on the current device
  ~Stream();
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event();  // timing event
  ~Event();
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Milliseconds between two completed events.
float elapsed_ms(const Event& start, const Event& end);

}  // namespace commtool::cuda
