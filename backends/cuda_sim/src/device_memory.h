// The simulated device's global memory: one reserved address range that every cudaMalloc
// carves from, so "is this a device address" is one comparison in the access hooks. Beside
// it, three shadows the checkers keep per device byte: `written` (some step stored it since it
// was allocated or poisoned), `writer` (which block of which launch last stored it) and
// `thread_writer` (which thread of its block, in which barrier interval). Pages are committed on
// first touch; a freed range gives its pages back.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace bufferlab::sim {

// The simulated device holds at most this much allocated memory (the simulator runs scaled
// configs; cudaMalloc beyond it fails with cudaErrorMemoryAllocation, as a full device does).
inline constexpr uint64_t kDeviceCapacity = uint64_t{2} << 30;
inline constexpr uint64_t kAllocationAlignment = 256;  // cudaMalloc's documented minimum

struct Allocation {
  uint64_t offset = 0, bytes = 0;  // in the device range
  uint64_t serial = 0;             // the n-th allocation of the process
};

class DeviceMemory {
 public:
  static DeviceMemory& get() {
    static DeviceMemory memory;
    return memory;
  }

  void* allocate(uint64_t bytes);  // nullptr when the simulated device is full
  bool release(const void* p);     // false when p is not the start of a live allocation

  bool in_region(const void* p) const {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p) - base_) < kDeviceCapacity;
  }
  // The live allocation holding [p, p + bytes), or nullptr.
  const Allocation* find(const void* p, uint64_t bytes) const;
  uint64_t offset_of(const void* p) const { return reinterpret_cast<uintptr_t>(p) - base_; }
  std::byte* at(uint64_t offset) const { return reinterpret_cast<std::byte*>(base_ + offset); }
  uint64_t allocated_bytes() const;

  // Shadows, indexed by offset_of(p).
  uint8_t* written() const { return written_; }
  uint64_t* writer() const { return writer_; }
  uint64_t* thread_writer() const { return thread_writer_; }
  void mark_written(const void* p, uint64_t bytes, bool value);

  // Every live allocation, for the nondeterminism check's snapshot.
  template <class F>
  void for_each(F f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [offset, a] : live_) f(a);
  }

 private:
  DeviceMemory();
  uintptr_t base_ = 0;
  uint8_t* written_ = nullptr;
  uint64_t* writer_ = nullptr;
  uint64_t* thread_writer_ = nullptr;
  mutable std::mutex mutex_;
  std::map<uint64_t, Allocation> live_;  // by offset
  std::map<uint64_t, uint64_t> free_;    // offset → bytes, coalesced
  uint64_t serial_ = 0;
  // Bumped by every release: a thread's cached lookup (device_memory.cpp) is valid while it
  // has not changed. Kernels touch one buffer many times in a row, so most lookups are
  // answered from that cache, without the lock and the map.
  std::atomic<uint64_t> generation_{1};
};

}  // namespace bufferlab::sim
