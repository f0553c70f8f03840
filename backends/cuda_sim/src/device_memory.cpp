// The simulated device memory: a first-fit allocator over one reserved range, and its shadows.
#include "device_memory.h"

#include <sys/mman.h>

#include <cstring>
#include <iterator>

#include "bufferlab/core/error.h"

namespace bufferlab::sim {
namespace {

// Reserved, not committed: MAP_NORESERVE pages cost nothing until touched.
void* reserve(uint64_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error(std::string("cuda-sim: cannot reserve the simulated ") + what + " (" +
                std::to_string(bytes >> 20) + " MiB of address space): " + std::strerror(errno));
  return p;
}

// Gives pages back (they read as zero again) without unmapping the range.
void discard(void* p, uint64_t bytes) {
  const uint64_t page = 4096;
  auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

DeviceMemory::DeviceMemory() {
  base_ = reinterpret_cast<uintptr_t>(reserve(kDeviceCapacity, "device memory"));
  written_ = static_cast<uint8_t*>(reserve(kDeviceCapacity, "written-bytes shadow"));
  writer_ = static_cast<uint64_t*>(reserve(kDeviceCapacity * sizeof(uint64_t), "writer shadow"));
  thread_writer_ =
      static_cast<uint64_t*>(reserve(kDeviceCapacity * sizeof(uint64_t), "thread-writer shadow"));
  free_.emplace(0, kDeviceCapacity);
}

void* DeviceMemory::allocate(uint64_t bytes) {
  const uint64_t need = round_up(bytes == 0 ? 1 : bytes, kAllocationAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const uint64_t offset = it->first, left = it->second - need;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + need, left);
    live_.emplace(offset, Allocation{offset, bytes, ++serial_});
    return at(offset);
  }
  return nullptr;
}

bool DeviceMemory::release(const void* p) {
  if (!in_region(p)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = live_.find(offset_of(p));
  if (it == live_.end()) return false;
  generation_.fetch_add(1, std::memory_order_relaxed);
  uint64_t offset = it->first,
           bytes = round_up(it->second.bytes == 0 ? 1 : it->second.bytes, kAllocationAlignment);
  live_.erase(it);
  discard(at(offset), bytes);
  discard(written_ + offset, bytes);
  discard(writer_ + offset, bytes * sizeof(uint64_t));
  discard(thread_writer_ + offset, bytes * sizeof(uint64_t));
  // Coalesce with the free neighbours.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + bytes) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return true;
    }
  }
  free_.emplace(offset, bytes);
  return true;
}

const Allocation* DeviceMemory::find(const void* p, uint64_t bytes) const {
  if (!in_region(p)) return nullptr;
  const uint64_t offset = offset_of(p);
  auto holds = [&](const Allocation& a) {
    return offset >= a.offset && offset + bytes <= a.offset + a.bytes && offset + bytes >= offset;
  };
  thread_local struct {
    uint64_t generation = 0;
    Allocation allocation;
  } cache;
  const uint64_t generation = generation_.load(std::memory_order_relaxed);
  if (cache.generation == generation && holds(cache.allocation)) return &cache.allocation;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return nullptr;
  --it;
  if (!holds(it->second)) return nullptr;
  cache.generation = generation;
  cache.allocation = it->second;
  return &cache.allocation;
}

uint64_t DeviceMemory::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t total = 0;
  for (const auto& [offset, a] : live_) total += a.bytes;
  return total;
}

void DeviceMemory::mark_written(const void* p, uint64_t bytes, bool value) {
  if (bytes == 0) return;
  std::memset(written_ + offset_of(p), value ? 1 : 0, bytes);
}

}  // namespace bufferlab::sim
