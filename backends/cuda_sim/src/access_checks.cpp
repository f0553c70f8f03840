// The access checkers. A global access must lie in one live allocation; inside the running
// op's workspace it must lie in the op's declared reads (a load) or writes (a store) — the
// dynamic twin of the static verifier; a load must find its bytes written since they were
// allocated or poisoned; a store must not hit a byte another block of the launch stored. A
// shared access must not meet another thread's access to the same byte in the same barrier
// epoch with a store on either side, and a load must find the byte written in this block.
#include <algorithm>
#include <cstring>
#include <string>

#include "bufferlab/core/buffer_registry.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"
#include "device_memory.h"
#include "executor_state.h"
#include "findings.h"
#include "memory_checks.h"
#include "sim_state.h"

namespace bufferlab::sim {
namespace {

constexpr uint64_t kPageBytes = 4096;

bool covered(const std::vector<Range>& ranges, uintptr_t begin, uintptr_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](uintptr_t v, const Range& r) { return v < r.begin; });
  if (it == ranges.begin()) return false;
  --it;
  return begin >= it->begin && end <= it->end;
}

bool inside(const Range& r, uintptr_t a) { return a >= r.begin && a < r.end; }

// Sorted, merged (touching ranges join: an access may straddle two declared tensors).
std::vector<Range> normalise(std::vector<Range> v) {
  std::sort(v.begin(), v.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> out;
  for (const Range& r : v) {
    if (r.end <= r.begin) continue;
    if (!out.empty() && r.begin <= out.back().end)
      out.back().end = std::max(out.back().end, r.end);
    else
      out.push_back(r);
  }
  return out;
}

void finding(Check check, const void* p, size_t bytes, bool write, std::string detail,
             const char* library = nullptr) {
  Finding f;
  f.check = check;
  f.kernel = library != nullptr ? library : current_kernel();
  f.where = library != nullptr ? "" : current_where();
  f.address = describe_address(p) + " (" + (write ? "store" : "load") + " of " +
              std::to_string(bytes) + " B)";
  f.detail = std::move(detail);
  f.op = footprint().op;
  f.seed = options().seed;
  record(std::move(f));
}

// Which buffer a detail names, so one finding stands for every byte of the same mistake.
std::string buffer_of(const void* p) {
  std::string d = describe_address(p);
  return d.substr(0, d.find('+'));
}

// Footprint, bounds and initialisation of one global access; `library` names a stand-in.
void check_device_access(const void* p, size_t bytes, bool write, bool atomic,
                         const char* library) {
  DeviceMemory& memory = DeviceMemory::get();
  if (memory.find(p, bytes) == nullptr) {
    finding(Check::out_of_bounds, p, bytes, write,
            std::string(write ? "store" : "load") + " outside every live device allocation",
            library);
    return;
  }
  const Footprint& fp = footprint();
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (fp.active && (inside(fp.arena, a) || inside(fp.weights, a))) {
    // A load may also read back what the op writes (a GEMM output rounded in place): its
    // bytes were written by this op or the uninitialised-read check reports them.
    const bool ok = covered(write ? fp.writes : fp.reads, a, a + bytes) ||
                    (!write && covered(fp.writes, a, a + bytes)) ||
                    (atomic && covered(fp.writes, a, a + bytes));
    if (!ok)
      finding(write ? Check::footprint_write : Check::footprint_read, p, bytes, write,
              std::string(write ? "store to " : "load from ") + buffer_of(p) +
                  " outside the op's declared " + (write ? "writes" : "reads"),
              library);
  }
  const uint64_t offset = memory.offset_of(p);
  if (!write || atomic) {
    for (size_t i = 0; i < bytes; ++i)
      if (memory.written()[offset + i] == 0) {
        finding(Check::uninitialized_read, static_cast<const std::byte*>(p) + i, bytes - i, false,
                "load of " + buffer_of(p) + " bytes no earlier step wrote", library);
        break;
      }
  }
  if (write) memory.mark_written(p, bytes, true);
}

}  // namespace

// ---- Options, counters, footprint ----

SimOptions& options() {
  static SimOptions o;
  return o;
}
SimCounters g_counters;
Footprint& footprint() {
  static Footprint f;
  return f;
}

void set_footprint(const Workspace& ws, const std::vector<Access>& accesses, std::string op) {
  Footprint& f = footprint();
  f = Footprint{};
  f.active = true;
  f.op = std::move(op);
  f.ws = &ws;
  f.arena.begin = reinterpret_cast<uintptr_t>(ws.arena_base());
  f.arena.end = f.arena.begin + ws.layout().arena_bytes();
  if (ws.weights_bytes() > 0) {
    f.weights.begin = reinterpret_cast<uintptr_t>(ws.resolve(pool_tensor({1}, DType::u8)));
    f.weights.end = f.weights.begin + ws.weights_bytes();
  }
  std::vector<Range> reads, writes;
  for (const Access& access : accesses) {
    if (access.tensor.bytes() == 0) continue;
    const auto begin = reinterpret_cast<uintptr_t>(ws.resolve(access.tensor));
    const Range r{begin, begin + access.tensor.bytes()};
    (is_write(access.kind) ? writes : reads).push_back(r);
  }
  f.reads = normalise(std::move(reads));
  f.writes = normalise(std::move(writes));
}

void clear_footprint() { footprint() = Footprint{}; }

std::string describe_address(const void* p) {
  const Footprint& fp = footprint();
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (fp.ws != nullptr && inside(fp.arena, a)) {
    const uint64_t offset = a - fp.arena.begin;
    for (const LayoutEntry& e : fp.ws->layout().entries())
      if (!e.is_null() && offset >= e.offset && offset < e.end())
        return std::string(buffer_name(e.id)) + "+" + std::to_string(offset - e.offset);
    return "arena+" + std::to_string(offset) + " (between buffers)";
  }
  if (fp.ws != nullptr && inside(fp.weights, a))
    return "weights+" + std::to_string(a - fp.weights.begin);
  DeviceMemory& memory = DeviceMemory::get();
  if (const Allocation* alloc = memory.find(p, 1))
    return "allocation#" + std::to_string(alloc->serial) + "+" +
           std::to_string(memory.offset_of(p) - alloc->offset) + " (of " +
           std::to_string(alloc->bytes) + " B)";
  if (memory.in_region(p))
    return "device+" + std::to_string(memory.offset_of(p)) + " (unallocated)";
  return "host address 0x" + [&] {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(a));
    return std::string(buf);
  }();
}

// ---- Kernel accesses ----

void note_store_pages(const void* p, size_t bytes) {
  LaunchState* launch = current_launch();
  if (launch == nullptr || !launch->saving || bytes == 0) return;
  DeviceMemory& memory = DeviceMemory::get();
  const uint64_t first = memory.offset_of(p) / kPageBytes;
  const uint64_t last = (memory.offset_of(p) + bytes - 1) / kPageBytes;
  for (uint64_t page = first; page <= last; ++page) {
    auto [it, fresh] = launch->pages.try_emplace(page);
    if (!fresh) continue;
    it->second.data = std::make_unique<std::byte[]>(kPageBytes);
    it->second.written = std::make_unique<std::byte[]>(kPageBytes);
    std::memcpy(it->second.data.get(), memory.at(page * kPageBytes), kPageBytes);
    std::memcpy(it->second.written.get(), memory.written() + page * kPageBytes, kPageBytes);
  }
}

void check_global(const void* p, size_t bytes, bool write, bool atomic) {
  SimCounters& c = counters();
  if (!atomic) ++(write ? c.stores : c.loads);  // atomic_rmw counts atomics
  if (write && DeviceMemory::get().in_region(p)) note_store_pages(p, bytes);
  check_device_access(p, bytes, write, atomic, nullptr);
  if (!write || current_launch() == nullptr || DeviceMemory::get().find(p, bytes) == nullptr)
    return;
  // Inter-block races: a byte stored by two blocks of one launch, one of them not atomically.
  DeviceMemory& memory = DeviceMemory::get();
  uint64_t* writer = memory.writer() + memory.offset_of(p);
  const uint64_t mine = current_writer_tag() | (atomic ? (uint64_t{1} << 31) : 0);
  const uint64_t launch = current_launch_serial();
  for (size_t i = 0; i < bytes; ++i) {
    const uint64_t previous = writer[i];
    const bool same_launch = (previous >> 32) == launch;
    const bool other_block = (previous & 0x7FFFFFFFull) != (mine & 0x7FFFFFFFull);
    const bool both_atomic = atomic && (previous & (uint64_t{1} << 31)) != 0;
    if (same_launch && other_block && !both_atomic) {
      finding(Check::block_write_race, static_cast<const std::byte*>(p) + i, bytes - i, true,
              "store to " + buffer_of(p) +
                  " that another block of the launch also stored (linear block index " +
                  std::to_string((previous & 0x7FFFFFFFull) - 1) + "), not atomically");
      break;
    }
  }
  for (size_t i = 0; i < bytes; ++i) writer[i] = mine;
  // Within the block: a byte two of its threads stored between two barriers, one of them not
  // atomically (the epoch names the block's barrier interval: epochs are never reused).
  const ThreadState* t = current_thread();
  const BlockState* b = current_block();
  if (t == nullptr || b == nullptr) return;
  uint64_t* thread_writer = memory.thread_writer() + memory.offset_of(p);
  const uint64_t me = (b->epoch << 12) | (atomic ? uint64_t{1} << 11 : 0) | (t->linear + 1);
  for (size_t i = 0; i < bytes; ++i) {
    const uint64_t previous = thread_writer[i];
    const bool same_interval = (previous >> 12) == b->epoch;
    const bool other_thread = (previous & 0x7FF) != (me & 0x7FF);
    const bool both_atomic = atomic && (previous & (uint64_t{1} << 11)) != 0;
    if (same_interval && other_thread && !both_atomic) {
      finding(Check::thread_write_race, static_cast<const std::byte*>(p) + i, bytes - i, true,
              "store to " + buffer_of(p) +
                  " that another thread of the block also stored since the last barrier "
                  "(thread " +
                  std::to_string((previous & 0x7FF) - 1) + "), not atomically");
      break;
    }
  }
  for (size_t i = 0; i < bytes; ++i) thread_writer[i] = me;
}

namespace {

// A shared-memory finding at arena byte `at` of an access of `bytes`.
void shared_finding(Check check, size_t at, size_t bytes, bool write, std::string detail) {
  Finding f;
  f.check = check;
  f.kernel = current_kernel();
  f.where = current_where();
  f.address = "shared+" + std::to_string(at) + " (" + (write ? "store" : "load") + " of " +
              std::to_string(bytes) + " B)";
  f.detail = std::move(detail);
  f.op = footprint().op;
  f.seed = options().seed;
  record(std::move(f));
}

}  // namespace

bool BlockState::synced_after(uint32_t warp, uint64_t serial, unsigned lanes) const {
  if (warp >= warp_syncs.size()) return false;
  const std::vector<WarpSync>& syncs = warp_syncs[warp];
  for (auto it = syncs.rbegin(); it != syncs.rend() && it->serial > serial; ++it)
    if ((it->mask & lanes) == lanes) return true;
  return false;
}

void check_shared(const void* p, size_t bytes, bool write) {
  BlockState& b = *current_block();
  const ThreadState* t = current_thread();
  if (t == nullptr) return;
  ++counters().shared_accesses;
  const size_t offset = static_cast<size_t>(static_cast<const std::byte*>(p) - b.shared);
  const uint32_t me = t->linear + 1;
  const unsigned my_lane = 1u << t->lane;
  // Another thread's access (by linear id + 1) at serial `at` is ordered before this one by a
  // __syncwarp both took part in after it (same warp only).
  const auto ordered = [&](uint32_t other, uint64_t at) {
    const uint32_t o = other - 1;
    return o / 32 == t->warp && b.synced_after(t->warp, at, my_lane | (1u << (o % 32)));
  };
  for (size_t i = 0; i < bytes && offset + i < kSharedArenaBytes; ++i) {
    SharedShadow& s = b.shadow[offset + i];
    if (write) {
      const bool ww =
          s.write_epoch == b.epoch && s.writer != me && !ordered(s.writer, s.write_sync);
      const bool readers_ordered =
          s.many_readers ? s.readers_warp == static_cast<int32_t>(t->warp) &&
                               b.synced_after(t->warp, s.read_sync, my_lane | s.reader_lanes)
                         : ordered(s.reader, s.read_sync);
      const bool rw =
          s.read_epoch == b.epoch && (s.reader != me || s.many_readers) && !readers_ordered;
      if (ww || rw) {
        shared_finding(Check::shared_race, offset + i, bytes, true,
                       std::string("store to shared memory ") +
                           (ww ? "another thread stored" : "another thread loaded") +
                           " since the last barrier (thread " +
                           std::to_string((ww ? s.writer : s.reader) - 1) + ")");
        break;
      }
      s.write_epoch = b.epoch;
      s.write_sync = b.sync_serial;
      s.writer = me;
      continue;
    }
    if (s.write_epoch < b.start_epoch) {
      shared_finding(Check::shared_uninit, offset + i, bytes, false,
                     "load of shared memory no thread of this block wrote");
      break;
    }
    if (s.write_epoch == b.epoch && s.writer != me && !ordered(s.writer, s.write_sync)) {
      shared_finding(Check::shared_race, offset + i, bytes, false,
                     "load of shared memory another thread stored since the last barrier "
                     "(thread " +
                         std::to_string(s.writer - 1) + ")");
      break;
    }
    if (s.read_epoch == b.epoch && s.reader != me) {
      s.many_readers = true;
      if (s.readers_warp != static_cast<int32_t>(t->warp)) s.readers_warp = -1;
    } else if (s.read_epoch != b.epoch) {
      s.read_epoch = b.epoch;
      s.reader = me;
      s.many_readers = false;
      s.readers_warp = static_cast<int32_t>(t->warp);
      s.reader_lanes = 0;
    }
    s.reader_lanes |= my_lane;
    s.read_sync = b.sync_serial;
  }
}

// ---- Blocks ----

uint64_t next_epoch() {
  static uint64_t epoch = 0;
  return ++epoch;
}

BlockState& block_storage(uint64_t thread_count) {
  static BlockState block = [] {
    BlockState b;
    b.shared = static_cast<std::byte*>(::operator new(kSharedArenaBytes));
    b.shadow = new SharedShadow[kSharedArenaBytes];
    std::memset(b.shared, 0xFF, kSharedArenaBytes);
    return b;
  }();
  block.threads.reserve(thread_count);
  return block;
}

void BlockState::reset(uint64_t linear_index, const LaunchSpec& spec, uint64_t thread_count) {
  linear = linear_index;
  idx.x = static_cast<unsigned>(linear_index % spec.grid.x);
  idx.y = static_cast<unsigned>(linear_index / spec.grid.x % spec.grid.y);
  idx.z = static_cast<unsigned>(linear_index / (uint64_t{spec.grid.x} * spec.grid.y));
  threads.clear();
  threads.resize(thread_count);
  for (uint64_t i = 0; i < thread_count; ++i) {
    ThreadState& t = threads[i];
    t.linear = static_cast<uint32_t>(i);
    t.warp = static_cast<uint32_t>(i / 32);
    t.lane = static_cast<uint32_t>(i % 32);
    t.idx.x = static_cast<unsigned>(i % spec.block.x);
    t.idx.y = static_cast<unsigned>(i / spec.block.x % spec.block.y);
    t.idx.z = static_cast<unsigned>(i / (uint64_t{spec.block.x} * spec.block.y));
  }
  collectives.clear();
  slots.clear();
  warp_syncs.assign((thread_count + 31) / 32, {});
  sync_serial = 0;
  // Poison what the previous block used: NaN / all-ones words, never a plausible zero.
  std::memset(shared, 0xFF, std::max(static_used, poisoned_static));
  poisoned_static = static_used;
  static_used = 0;
  if (spec.dynamic_shared > 0)
    std::memset(shared + kStaticSharedLimit, 0xFF,
                std::min(spec.dynamic_shared, kDynamicSharedLimit));
  start_epoch = next_epoch();
  epoch = start_epoch;
}

// ---- The nondeterminism re-run ----

PageSet capture_and_restore(PageSet& saved) {
  DeviceMemory& memory = DeviceMemory::get();
  PageSet results;
  for (auto& [page, before] : saved) {
    PageSave& r = results[page];
    r.data = std::make_unique<std::byte[]>(kPageBytes);
    std::memcpy(r.data.get(), memory.at(page * kPageBytes), kPageBytes);
    std::memcpy(memory.at(page * kPageBytes), before.data.get(), kPageBytes);
    std::memcpy(memory.written() + page * kPageBytes, before.written.get(), kPageBytes);
  }
  return results;
}

void compare_runs(const LaunchSpec& spec, const PageSet& first_results, const PageSet& second) {
  DeviceMemory& memory = DeviceMemory::get();
  auto differs = [&](uint64_t page, const std::byte* expected) -> int64_t {
    const std::byte* now = memory.at(page * kPageBytes);
    for (uint64_t i = 0; i < kPageBytes; ++i)
      if (now[i] != expected[i]) return static_cast<int64_t>(i);
    return -1;
  };
  auto report = [&](uint64_t page, int64_t i) {
    Finding f;
    f.check = Check::nondeterminism;
    f.kernel = spec.kernel;
    f.address = describe_address(memory.at(page * kPageBytes + static_cast<uint64_t>(i)));
    f.detail = "a second run with another block and thread order stored different bits";
    f.op = footprint().op;
    f.seed = options().seed;
    record(std::move(f));
  };
  for (const auto& [page, result] : first_results)
    if (const int64_t i = differs(page, result.data.get()); i >= 0) return report(page, i);
  for (const auto& [page, before] : second) {
    if (first_results.count(page) != 0) continue;
    if (const int64_t i = differs(page, before.data.get()); i >= 0) return report(page, i);
  }
}

// ---- Library stand-ins ----

bool is_device_range(const void* p, size_t bytes) {
  return DeviceMemory::get().find(p, bytes) != nullptr;
}

bool library_access(const char* who, const void* p, size_t bytes, Touch touch) {
  ++counters().library_calls;
  if (bytes == 0) return true;
  const bool write = touch == Touch::write;
  if (!is_device_range(p, bytes)) {
    finding(Check::out_of_bounds, p, bytes, write,
            std::string(write ? "writes" : "reads") + " outside every live device allocation", who);
    return false;
  }
  check_device_access(p, bytes, write, false, who);
  return true;
}

}  // namespace bufferlab::sim
