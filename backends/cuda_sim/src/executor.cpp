// The executor: a launch runs block after block in a seeded random order; each CUDA thread of
// a block is a fiber (Boost.Context) on a guard-paged stack. A fiber runs until it reaches a
// barrier or a warp collective, or returns; the next fiber is drawn at random from the
// runnable ones, so code that assumes warp-synchronous order sees other orders. A barrier
// releases when every non-exited thread of the block waits at it (CUDA's rule for exited
// threads); a collective completes when every lane of its mask has arrived at the same call.
// When nothing can run, what is waiting is a finding: a collective whose lanes exited or wait
// elsewhere, a barrier reached at different sites.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bufferlab/core/error.h"
#include "device_memory.h"
#include "executor_state.h"
#include "findings.h"
#include "sim_state.h"

namespace bufferlab::sim {

namespace bctx = boost::context;

constinit thread_local ThreadState* t_thread = nullptr;
constinit thread_local BlockState* t_block = nullptr;
constinit thread_local LaunchState* t_launch = nullptr;

namespace {

// ---- Fiber stacks: allocated once, reused by every block, each with a guard page ----

constexpr size_t kStackBytes = size_t{256} << 10;
constexpr size_t kPage = 4096;

// Guard pages, for the fault handler: a fixed table it can read without locks.
constexpr size_t kMaxGuards = 1 << 14;
std::atomic<uintptr_t> g_guards[kMaxGuards];
std::atomic<size_t> g_guard_count{0};

// A fault in a guard page is a simulated thread overflowing its stack: say so, then die of
// the signal as before (anything else is not ours: the default action).
void on_fault(int sig, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  const size_t n = g_guard_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n && i < kMaxGuards; ++i) {
    const uintptr_t guard = g_guards[i].load(std::memory_order_relaxed);
    if (at < guard || at >= guard + kPage) continue;
    const char head[] = "cuda-sim: a simulated thread overflowed its 256 KiB fiber stack (kernel ";
    const char* kernel = t_launch != nullptr ? t_launch->spec.kernel : "?";
    ssize_t ignored = write(2, head, sizeof head - 1);
    ignored = write(2, kernel, std::strlen(kernel));
    ignored = write(2, "); the guard page stopped it\n", 29);
    (void)ignored;
    break;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

// The handler runs on its own stack: the faulting one is the overflowed fiber's.
void install_fault_handler() {
  static bool installed = [] {
    stack_t alt{};
    alt.ss_size = size_t{64} << 10;
    alt.ss_sp =
        mmap(nullptr, alt.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt.ss_sp != MAP_FAILED) sigaltstack(&alt, nullptr);
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, nullptr);
    return true;
  }();
  (void)installed;
}

class StackPool {
 public:
  bctx::stack_context take() {
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      install_fault_handler();
      base = mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) throw Error("cuda-sim: cannot map a fiber stack");
      mprotect(base, kPage, PROT_NONE);  // the guard page: an overflow faults, not corrupts
      const size_t i = g_guard_count.load(std::memory_order_relaxed);
      if (i < kMaxGuards) {
        g_guards[i].store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
        g_guard_count.store(i + 1, std::memory_order_release);
      }
    }
    bctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + kPage + kStackBytes;
    return sc;
  }
  void give(bctx::stack_context& sc) {
    free_.push_back(static_cast<char*>(sc.sp) - kStackBytes - kPage);
  }

 private:
  std::vector<void*> free_;
};

thread_local StackPool t_stacks;

struct PooledStack {
  bctx::stack_context allocate() { return t_stacks.take(); }
  void deallocate(bctx::stack_context& sc) noexcept { t_stacks.give(sc); }
};

// ---- Seeded choices ----

uint64_t mix(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string site(const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  return std::string(slash != nullptr ? slash + 1 : file) + ":" + std::to_string(line);
}

std::string dim_text(device::uint3 v) {
  char text[48];  // (GCC 12 warns -Wrestrict on the std::string concatenation)
  std::snprintf(text, sizeof text, "(%u,%u,%u)", v.x, v.y, v.z);
  return text;
}

ThreadState& self() {
  if (t_thread == nullptr)
    throw Error("cuda-sim: a device built-in was used outside a simulated kernel thread");
  return *t_thread;
}

// Suspends the running thread until the scheduler resumes it.
void suspend(ThreadState& t) { t.scheduler = std::move(t.scheduler).resume(); }

void kernel_finding(Check check, std::string detail, std::string address = {}) {
  Finding f;
  f.check = check;
  f.kernel = current_kernel();
  f.where = current_where();
  f.address = std::move(address);
  f.detail = std::move(detail);
  f.op = footprint().op;
  f.seed = options().seed;
  record(std::move(f));
}

// ---- Collectives ----

int source_lane(ShuffleKind kind, int lane, int arg, int width, bool* own) {
  const int segment = lane - lane % width;
  *own = false;
  switch (kind) {
    case ShuffleKind::idx:
      return segment + ((arg % width) + width) % width;
    case ShuffleKind::up:
      if (lane - arg < segment) *own = true;
      return *own ? lane : lane - arg;
    case ShuffleKind::down:
      if (lane + arg >= segment + width) *own = true;
      return *own ? lane : lane + arg;
    case ShuffleKind::bfly: {
      const int src = lane ^ arg;
      if (src >= segment + width || src < segment) *own = true;
      return *own ? lane : src;
    }
  }
  return lane;
}

void complete(BlockState& b, Collective& c) {
  ThreadState* lanes[32] = {};
  for (ThreadState* t : c.members) lanes[t->lane] = t;
  if (c.kind == CollectiveKind::shuffle) {
    for (ThreadState* t : c.members) {
      bool own = false;
      const int src = source_lane(c.shuffle, static_cast<int>(t->lane), t->arg, c.width, &own);
      if (!own && (src < 0 || src > 31 || ((c.mask >> src) & 1u) == 0 || lanes[src] == nullptr)) {
        t_thread = t;
        kernel_finding(
            Check::collective_mask, "shuffle at " + site(c.file, c.line) + " reads lane " +
                                        std::to_string(src) +
                                        ", outside the mask or absent (mask 0x" +
                                        [&] {
                                          char buf[16];
                                          std::snprintf(buf, sizeof buf, "%08x", c.mask);
                                          return std::string(buf);
                                        }() +
                                        "): its value is undefined");
        t_thread = nullptr;
        t->result = ~uint64_t{0};  // undefined on the device: poison here
      } else {
        t->result = own ? t->value : lanes[src]->value;
      }
    }
  } else if (c.kind == CollectiveKind::vote) {
    unsigned ballot = 0;
    for (ThreadState* t : c.members)
      if (t->predicate != 0) ballot |= 1u << t->lane;
    const unsigned present = c.arrived;
    for (ThreadState* t : c.members) {
      if (c.vote == VoteKind::ballot) t->result = ballot;
      if (c.vote == VoteKind::any) t->result = ballot != 0 ? 1 : 0;
      if (c.vote == VoteKind::all) t->result = ballot == present ? 1 : 0;
    }
  }
  if (c.kind == CollectiveKind::sync && !c.members.empty())
    b.warp_syncs[c.members.front()->warp].push_back({++b.sync_serial, c.mask});
  for (ThreadState* t : c.members) {
    t->wait = Wait::running;
    b.runnable.push_back(t);
  }
  c.members.clear();
  c.arrived = 0;
}

// A lane arrives at a collective: joins the pending one of its warp at the same call with
// the same mask, or opens one.
void arrive(CollectiveKind kind, unsigned mask, const char* file, int line, int width) {
  ThreadState& t = self();
  BlockState& b = *t_block;
  if (((mask >> t.lane) & 1u) == 0) {
    // Undefined on the device. The lane does not take part (its result is poison): joined
    // under a mask widened by its own bit it would wait alone for lanes that completed the
    // mask's collective and left, and the stall would blame them as missing.
    kernel_finding(Check::collective_mask, "lane " + std::to_string(t.lane) +
                                               " calls a warp collective at " + site(file, line) +
                                               " with a mask that excludes it");
    t.result = ~uint64_t{0};
    return;
  }
  std::vector<Collective>& pending = b.collectives[t.warp];
  Collective* c = nullptr;
  for (Collective& p : pending)
    if (p.file == file && p.line == line && p.mask == mask && p.kind == kind && p.arrived != 0)
      c = &p;
  if (c == nullptr) {
    pending.push_back(Collective{});
    c = &pending.back();
    c->kind = kind;
    c->mask = mask;
    c->file = file;
    c->line = line;
    c->width = width;
    c->shuffle = t.pending_shuffle;
    c->vote = t.pending_vote;
  }
  c->arrived |= 1u << t.lane;
  c->members.push_back(&t);
  t.wait = Wait::collective;
  t.wait_file = file;
  t.wait_line = line;
  if (c->arrived == mask) {
    complete(b, *c);
    // Done: out of the list, so a warp's k-th collective does not scan the k − 1 before it.
    pending.erase(pending.begin() + (c - pending.data()));
  }
  suspend(t);
}

// ---- The block scheduler ----

std::string describe_wait(const ThreadState& t) {
  if (t.wait == Wait::done) return "exited";
  if (t.wait == Wait::barrier) return "waits at the barrier at " + site(t.wait_file, t.wait_line);
  if (t.wait == Wait::collective)
    return "waits at a warp collective at " + site(t.wait_file, t.wait_line);
  return "runs";
}

// Nothing can run: complete the collectives that wait for lanes that will never come (a
// finding each), else release the barrier (a finding when its waiters disagree on the site).
void resolve_stall(BlockState& b) {
  for (auto& [warp, pending] : b.collectives) {
    for (Collective& c : pending) {
      if (c.arrived == 0) continue;
      const unsigned missing = c.mask & ~c.arrived;
      std::string who;
      for (int lane = 0; lane < 32; ++lane) {
        if (((missing >> lane) & 1u) == 0) continue;
        const uint64_t linear = uint64_t{warp} * 32 + static_cast<uint64_t>(lane);
        who += " lane " + std::to_string(lane) + " " +
               (linear < b.threads.size() ? describe_wait(b.threads[linear]) : "does not exist") +
               ";";
      }
      t_thread = c.members.front();
      kernel_finding(Check::collective_missing,
                     "warp collective at " + site(c.file, c.line) + " never completes:" + who);
      t_thread = nullptr;
      complete(b, c);
    }
    pending.clear();
  }
  if (!b.runnable.empty()) return;
  const ThreadState* first = nullptr;
  bool uneven = false;
  for (ThreadState& t : b.threads) {
    if (t.wait != Wait::barrier) continue;
    if (first == nullptr)
      first = &t;
    else if (t.wait_file != first->wait_file || t.wait_line != first->wait_line)
      uneven = true;
  }
  if (first == nullptr) return;
  if (uneven) {
    std::string sites;
    for (ThreadState& t : b.threads)
      if (t.wait == Wait::barrier &&
          (t.wait_file != first->wait_file || t.wait_line != first->wait_line)) {
        sites = site(first->wait_file, first->wait_line) + " and " + site(t.wait_file, t.wait_line);
        break;
      }
    t_thread = const_cast<ThreadState*>(first);
    kernel_finding(Check::barrier_divergence,
                   "threads of one block wait at different barriers: " + sites);
    t_thread = nullptr;
  }
  // Release: the predicate reductions of __syncthreads_or / _and / _count.
  int any = 0, all = 1, count = 0;
  for (ThreadState& t : b.threads) {
    if (t.wait != Wait::barrier) continue;
    any |= t.predicate != 0;
    all &= t.predicate != 0;
    count += t.predicate != 0;
  }
  b.epoch = next_epoch();
  for (ThreadState& t : b.threads) {
    if (t.wait != Wait::barrier) continue;
    t.result = t.barrier_kind == BarrierKind::any   ? static_cast<uint64_t>(any)
               : t.barrier_kind == BarrierKind::all ? static_cast<uint64_t>(all)
                                                    : static_cast<uint64_t>(count);
    t.wait = Wait::running;
    b.runnable.push_back(&t);
  }
}

void run_thread(ThreadState& t) {
  t_thread = &t;
  if (!t.started) {
    t.started = true;
    t.fiber = bctx::fiber(std::allocator_arg, PooledStack{}, [&t](bctx::fiber&& scheduler) {
      t.scheduler = std::move(scheduler);
      try {
        t_launch->body();
      } catch (const bctx::detail::forced_unwind&) {
        throw;
      } catch (const std::exception& e) {
        kernel_finding(Check::launch_config, std::string("the kernel threw: ") + e.what());
      }
      t.wait = Wait::done;
      return std::move(t.scheduler);
    });
  }
  t.fiber = std::move(t.fiber).resume();
  t_thread = nullptr;
}

void run_block(BlockState& b, std::mt19937_64& rng) {
  t_block = &b;
  b.runnable.clear();
  for (ThreadState& t : b.threads) b.runnable.push_back(&t);
  size_t live = b.threads.size();
  while (live > 0) {
    while (!b.runnable.empty()) {
      const size_t pick = rng() % b.runnable.size();
      ThreadState* t = b.runnable[pick];
      b.runnable[pick] = b.runnable.back();
      b.runnable.pop_back();
      run_thread(*t);
      if (t->wait == Wait::done) --live;
    }
    if (live == 0) break;
    resolve_stall(b);
    if (b.runnable.empty()) break;  // nothing waits at a barrier or a collective: all exited
  }
  t_block = nullptr;
}

}  // namespace

// ---- Built-in variables ----

device::uint3 thread_idx() { return self().idx; }
device::uint3 block_idx() {
  self();
  return t_block->idx;
}
device::dim3 block_dim() {
  self();
  return t_launch->spec.block;
}
device::dim3 grid_dim() {
  self();
  return t_launch->spec.grid;
}

std::string current_kernel() { return t_launch != nullptr ? t_launch->spec.kernel : ""; }
std::string current_where() {
  if (t_block == nullptr) return "";
  std::string w = "block " + dim_text(t_block->idx);
  if (t_thread != nullptr) w += " thread " + dim_text(t_thread->idx);
  return w + " (launch #" + std::to_string(t_launch->serial) + ")";
}
uint64_t current_writer_tag() {
  return (t_launch->serial << 32) | ((t_block->linear + 1) & 0xFFFFFFFFull);
}
uint64_t current_launch_serial() { return t_launch != nullptr ? t_launch->serial : 0; }

// ---- Barriers and collectives ----

namespace {
uint64_t barrier(BarrierKind kind, int predicate, const char* file, int line) {
  ThreadState& t = self();
  t.wait = Wait::barrier;
  t.wait_file = file;
  t.wait_line = line;
  t.predicate = predicate;
  t.barrier_kind = kind;
  suspend(t);
  return t.result;
}
}  // namespace

void syncthreads(const char* file, int line) { barrier(BarrierKind::count, 0, file, line); }
int syncthreads_or(int p, const char* file, int line) {
  return static_cast<int>(barrier(BarrierKind::any, p, file, line));
}
int syncthreads_and(int p, const char* file, int line) {
  return static_cast<int>(barrier(BarrierKind::all, p, file, line));
}
int syncthreads_count(int p, const char* file, int line) {
  return static_cast<int>(barrier(BarrierKind::count, p, file, line));
}

void syncwarp(unsigned mask, const char* file, int line) {
  arrive(CollectiveKind::sync, mask, file, line, 32);
}

uint64_t shuffle(ShuffleKind kind, unsigned mask, uint64_t value, int arg, int width,
                 const char* file, int line) {
  ThreadState& t = self();
  t.value = value;
  t.arg = arg;
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) {
    kernel_finding(Check::collective_mask, "shuffle at " + site(file, line) + " with width " +
                                               std::to_string(width) + " (a power of two ≤ 32)");
    width = 32;
  }
  t.pending_shuffle = kind;
  arrive(CollectiveKind::shuffle, mask, file, line, width);
  return t.result;
}

unsigned vote(VoteKind kind, unsigned mask, int predicate, const char* file, int line) {
  ThreadState& t = self();
  t.predicate = predicate;
  t.pending_vote = kind;
  arrive(CollectiveKind::vote, mask, file, line, 32);
  return static_cast<unsigned>(t.result);
}

// ---- Shared memory ----

void* shared_object_at(const void* site_key, const char* name, size_t bytes, size_t align) {
  self();
  BlockState& b = *t_block;
  for (const SharedSlot& s : b.slots)
    if (s.site == site_key) return b.shared + s.offset;
  size_t offset = (b.static_used + align - 1) / align * align;
  if (offset + bytes > kStaticSharedLimit) {
    kernel_finding(Check::launch_config,
                   std::string("static shared memory exceeds the 48 KiB limit at `") + name +
                       "` (" + std::to_string(offset + bytes) + " B)");
    offset = kStaticSharedLimit + kDynamicSharedLimit;  // the overflow area: not the device's
  } else {
    b.static_used = offset + bytes;
  }
  b.slots.push_back(SharedSlot{site_key, offset});
  return b.shared + offset;
}

void* dynamic_shared_base() {
  self();
  return t_block->shared + kStaticSharedLimit;
}

// ---- Atomics ----

void atomic_rmw(void* address, size_t bytes, void (*op)(void*, const void*, void*),
                const void* operand, void* old) {
  if (DeviceMemory::get().in_region(address)) {
    check_global(address, bytes, /*write=*/true, /*atomic=*/true);
  } else if (in_shared_arena(address)) {
    check_shared(address, bytes, true);
  }
  ++counters().atomics;
  op(address, operand, old);
}

// ---- The launch ----

namespace {

const device::cudaDeviceProp& h200() { return simulated_device(); }

// The driver's refusals (cudaLaunchKernel's documented errors), before anything runs.
bool launch_refused(const LaunchSpec& s) {
  const auto& p = h200();
  const uint64_t threads = uint64_t{s.block.x} * s.block.y * s.block.z;
  std::string why;
  device::cudaError_t code = device::cudaErrorInvalidConfiguration;
  if (s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0)
    why = "a grid dimension is 0";
  else if (s.grid.x > static_cast<unsigned>(p.maxGridSize[0]) ||
           s.grid.y > static_cast<unsigned>(p.maxGridSize[1]) ||
           s.grid.z > static_cast<unsigned>(p.maxGridSize[2]))
    why = "the grid " + dim_text({s.grid.x, s.grid.y, s.grid.z}) + " exceeds the device's maximum";
  else if (threads == 0 || threads > static_cast<uint64_t>(p.maxThreadsPerBlock) ||
           s.block.x > static_cast<unsigned>(p.maxThreadsDim[0]) ||
           s.block.y > static_cast<unsigned>(p.maxThreadsDim[1]) ||
           s.block.z > static_cast<unsigned>(p.maxThreadsDim[2]))
    why = "the block " + dim_text({s.block.x, s.block.y, s.block.z}) + " has " +
          std::to_string(threads) + " threads (1 to 1024)";
  else if (s.dynamic_shared > dynamic_shared_allowed(s.entry)) {
    why = std::to_string(s.dynamic_shared) + " B of dynamic shared memory exceed the " +
          std::to_string(dynamic_shared_allowed(s.entry)) +
          " B allowed (48 KiB without cudaFuncAttributeMaxDynamicSharedMemorySize)";
    code = device::cudaErrorInvalidValue;
  }
  if (why.empty()) return false;
  set_last_error(code);
  Finding f;
  f.check = Check::launch_config;
  f.kernel = s.kernel;
  f.detail = "the driver refuses the launch: " + why;
  f.op = footprint().op;
  f.seed = options().seed;
  record(std::move(f));
  return true;
}

uint64_t g_launch_serial = 0;

void run_once(LaunchState& launch, uint64_t seed) {
  const LaunchSpec& s = launch.spec;
  const uint64_t blocks = uint64_t{s.grid.x} * s.grid.y * s.grid.z;
  const uint64_t threads = uint64_t{s.block.x} * s.block.y * s.block.z;
  std::vector<uint64_t> order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) order[i] = i;
  std::mt19937_64 rng(mix(seed));
  std::shuffle(order.begin(), order.end(), rng);
  BlockState& b = block_storage(threads);
  for (uint64_t linear : order) {
    b.reset(linear, s, threads);
    run_block(b, rng);
    ++counters().blocks;
    counters().threads += threads;
  }
}

}  // namespace

void run_launch(const LaunchSpec& spec, ThreadBody body) {
  if (launch_refused(spec)) return;
  LaunchState launch;
  launch.spec = spec;
  launch.body = body;
  t_launch = &launch;
  ++counters().launches;
  ++counters().launches_by_kernel[spec.kernel];
  const uint64_t seed = mix(options().seed ^ mix(g_launch_serial + 1));
  launch.serial = ++g_launch_serial;
  if (!options().rerun) {
    run_once(launch, seed);
    t_launch = nullptr;
    return;
  }
  // The nondeterminism check: run, keep the result, restore what the run wrote, run again
  // with another schedule (and a new serial: the inter-block checker starts afresh), compare.
  launch.saving = true;
  run_once(launch, seed);
  PageSet first = launch.take_pages();
  PageSet first_results = capture_and_restore(first);
  launch.serial = ++g_launch_serial;
  run_once(launch, mix(seed));
  PageSet second = launch.take_pages();
  t_launch = nullptr;
  compare_runs(spec, first_results, second);
}

}  // namespace bufferlab::sim
