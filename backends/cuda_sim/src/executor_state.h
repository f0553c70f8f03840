// The executor's records of a launch, its running block and their threads, shared with the
// access checkers (access_checks.cpp) and the runtime (runtime_api.cpp).
#pragma once

#include <array>
#include <boost/context/fiber.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "bufferlab/cuda_sim/device_api.h"
#include "sim_state.h"

namespace bufferlab::sim {

// H200 (sm_90): 48 KiB of static shared memory per block; up to 227 KiB dynamic with the
// opt-in attribute.
inline constexpr size_t kStaticSharedLimit = size_t{48} << 10;
inline constexpr size_t kDynamicSharedLimit = 232448;
// The arena: static part, dynamic part, and an overflow area for a static excess (reported).
inline constexpr size_t kSharedArenaBytes = kStaticSharedLimit + kDynamicSharedLimit + (64 << 10);

const device::cudaDeviceProp& simulated_device();
size_t dynamic_shared_allowed(const void* entry);  // 48 KiB or the attribute's value
void set_last_error(device::cudaError_t e);

enum class Wait { running, barrier, collective, done };
enum class BarrierKind { any, all, count };
enum class CollectiveKind { shuffle, vote, sync };

struct ThreadState {
  uint32_t linear = 0, warp = 0, lane = 0;
  device::uint3 idx;
  Wait wait = Wait::running;
  const char* wait_file = "";
  int wait_line = 0;
  BarrierKind barrier_kind = BarrierKind::count;
  ShuffleKind pending_shuffle = ShuffleKind::idx;
  VoteKind pending_vote = VoteKind::any;
  int predicate = 0, arg = 0;
  uint64_t value = 0, result = 0;
  bool started = false;
  boost::context::fiber fiber, scheduler;
};

struct Collective {
  CollectiveKind kind = CollectiveKind::sync;
  ShuffleKind shuffle = ShuffleKind::idx;
  VoteKind vote = VoteKind::any;
  unsigned mask = 0, arrived = 0;
  const char* file = "";
  int line = 0, width = 32;
  std::vector<ThreadState*> members;
};

struct SharedSlot {
  const void* site = nullptr;
  size_t offset = 0;
};

// Per shared byte: the last writer and reader, the barrier epoch of each access and the
// block's __syncwarp serial when it happened (warp-synchronous code orders shared accesses of
// one warp by __syncwarp, which CUDA documents as a memory barrier among its lanes). Several
// readers in one interval: their lanes, when all are in one warp (readers_warp, else -1).
struct SharedShadow {
  uint64_t write_epoch = 0, read_epoch = 0;
  uint64_t write_sync = 0, read_sync = 0;
  uint32_t writer = 0, reader = 0;
  uint32_t reader_lanes = 0;
  int32_t readers_warp = -1;
  bool many_readers = false;
};

// A completed __syncwarp: the block's serial of it and its mask.
struct WarpSync {
  uint64_t serial = 0;
  unsigned mask = 0;
};

uint64_t next_epoch();

struct BlockState {
  device::uint3 idx;
  uint64_t linear = 0;
  std::vector<ThreadState> threads;
  std::vector<ThreadState*> runnable;
  std::map<uint32_t, std::vector<Collective>> collectives;  // pending, by warp
  std::vector<SharedSlot> slots;
  std::byte* shared = nullptr;  // kSharedArenaBytes
  SharedShadow* shadow = nullptr;
  size_t static_used = 0, poisoned_static = 0;
  uint64_t epoch = 0, start_epoch = 0;
  // Completed __syncwarp calls per warp, serials counted per block (cleared by reset).
  std::vector<std::vector<WarpSync>> warp_syncs;
  uint64_t sync_serial = 0;
  // Whether lanes a and b of `warp` both took part in a __syncwarp completed after `serial`.
  bool synced_after(uint32_t warp, uint64_t serial, unsigned lanes) const;
  // Readies the block for the next one of the launch: fresh threads, poisoned shared memory.
  void reset(uint64_t linear_index, const LaunchSpec& spec, uint64_t thread_count);
};
BlockState& block_storage(uint64_t thread_count);

// Device pages a run stored to, with their bytes (and written-shadow bytes) before it.
struct PageSave {
  std::unique_ptr<std::byte[]> data, written;
};
using PageSet = std::unordered_map<uint64_t, PageSave>;  // by page index in the device range

struct LaunchState {
  LaunchSpec spec;
  ThreadBody body;
  uint64_t serial = 0;
  bool saving = false;
  PageSet pages;
  PageSet take_pages() { return std::move(pages); }
};
inline LaunchState* current_launch() { return t_launch; }
inline BlockState* current_block() { return t_block; }
inline ThreadState* current_thread() { return t_thread; }

// The running block's shared arena, for the hooks' classification.
inline bool in_shared_arena(const void* p) {
  const BlockState* b = t_block;
  if (b == nullptr) return false;
  const auto* q = static_cast<const std::byte*>(p);
  return q >= b->shared && q < b->shared + kSharedArenaBytes;
}

// After the first run: the pages' results, with the pages put back as they were before it.
PageSet capture_and_restore(PageSet& saved);
// After the second run: its results against the first run's, over the pages either wrote (a
// nondeterminism finding on a difference); the second run's state stays.
void compare_runs(const LaunchSpec& spec, const PageSet& first_results, const PageSet& second);

}  // namespace bufferlab::sim
