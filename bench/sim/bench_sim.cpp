// What the kernel simulator (backends/cuda_sim) costs, as ratios to baselines measured in the
// same run, never absolute times:
//  (1) a simulated thread switch: an empty kernel (launch + one fiber per thread), a
//      1024-thread block calling __syncthreads() k times, a warp doing k __shfl_xor_sync —
//      each per thread (per barrier, per collective) against one call of a non-inlined
//      function in a plain loop;
//  (2) the access checkers: the same memory-bound kernel compiled with the simulator's
//      instrumentation and without it (checked / unchecked, and checked loads + stores per
//      second), and the nondeterminism re-run (SimOptions::rerun on / off).
// The nondeterminism re-run is off except where it is what is measured: with it every launch
// runs twice.
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/cuda_sim/cuda_sim_backend.h"
#include "findings.h"
#include "sim_bench_kernels.h"

namespace bufferlab::sim_bench {
namespace {

// This thread's CPU seconds. The simulator runs a launch on the calling thread (fibers, no
// worker threads), and on a shared 2-core machine wall time would count the other processes'
// share: every time below, the benchmarks' and the baselines', is this thread's CPU time.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Mean CPU seconds per call of f, after one warm-up call: batches of calls doubling until one
// lasts min_s, so reading the clock (itself ~0.3 µs for the thread clock) stays out of it.
template <class F>
double seconds_per_call(F f, double min_s) {
  f();
  for (uint64_t batch = 1;; batch *= 2) {
    const double start = thread_seconds();
    for (uint64_t i = 0; i < batch; ++i) f();
    const double elapsed = thread_seconds() - start;
    if (elapsed >= min_s) return elapsed / static_cast<double>(batch);
  }
}

// measure() once per key in this run (a baseline several benchmarks share).
template <class Key, class F>
double cached_seconds(std::map<Key, double>& cache, const Key& key, F measure) {
  auto [it, fresh] = cache.try_emplace(key, 0.0);
  if (fresh) it->second = measure();
  return it->second;
}

// The plain call the simulated ones are compared with: a function the compiler may not
// inline or drop (the empty asm keeps its argument live).
[[gnu::noinline]] void plain_step(int i) { asm volatile("" : : "r"(i) : "memory"); }

// Seconds per plain_step call, over a loop of 2^20 calls (its cost does not depend on how many
// calls a kernel makes), measured once in the run.
double plain_call_seconds() {
  static const double per_call = [] {
    constexpr uint64_t kCalls = uint64_t{1} << 20;
    const double per_loop = seconds_per_call(
        [] {
          for (uint64_t i = 0; i < kCalls; ++i) plain_step(static_cast<int>(i));
        },
        0.1);
    return per_loop / static_cast<double>(kCalls);
  }();
  return per_call;
}

SimOptions options(bool rerun) {
  SimOptions o;
  o.rerun = rerun;
  return o;
}

// Runs `launch` (returning a cudaError as int) as the timed loop; false (the benchmark skipped)
// when a launch fails or the simulator reports a finding: a benchmark of a broken kernel
// would measure the wrong thing.
template <class F>
bool timed_launches(benchmark::State& state, F launch) {
  for (auto _ : state) {
    if (launch() != 0) {
      state.SkipWithError("the launch failed");
      return false;
    }
  }
  if (!sim::take_findings().empty()) {
    state.SkipWithError("the simulator reported findings");
    return false;
  }
  return true;
}

double seconds_per_iteration(benchmark::State& state, double t0) {
  return (thread_seconds() - t0) / static_cast<double>(state.iterations());
}

// Seconds per empty launch of blocks × threads (the launch and fiber cost a body adds to).
double empty_launch_seconds(unsigned blocks, unsigned threads) {
  static std::map<std::pair<unsigned, unsigned>, double> cache;
  return cached_seconds(cache, std::pair{blocks, threads}, [&] {
    set_sim_options(options(false));
    return seconds_per_call([&] { launch_empty(blocks, threads); }, 0.1);
  });
}

// ---- (1) thread switch, barrier, collective ----

// An empty kernel of 1 block × range(0) threads: per thread, launch + fiber creation + the
// switches into and out of the fiber.
void BM_EmptyKernel(benchmark::State& state) {
  const auto threads = static_cast<unsigned>(state.range(0));
  set_sim_options(options(false));
  const double t0 = thread_seconds();
  if (!timed_launches(state, [&] { return launch_empty(1, threads); })) return;
  const double per_thread = seconds_per_iteration(state, t0) / threads;
  state.counters["ns_per_thread"] = 1e9 * per_thread;
  state.counters["x_plain_call"] = per_thread / plain_call_seconds();
}
BENCHMARK(BM_EmptyKernel)->Arg(32)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// A 1024-thread block, each thread at range(0) barriers: per barrier per thread (the empty
// launch of the same block measured in the run and taken off) — a barrier is each fiber
// switching out to the scheduler and back in.
void BM_Barrier(benchmark::State& state) {
  constexpr unsigned kThreads = 1024;
  const auto k = static_cast<int>(state.range(0));
  const double empty = empty_launch_seconds(1, kThreads);
  set_sim_options(options(false));
  const double t0 = thread_seconds();
  if (!timed_launches(state, [&] { return launch_barriers(kThreads, k); })) return;
  const double per_barrier_thread =
      (seconds_per_iteration(state, t0) - empty) / (static_cast<double>(kThreads) * k);
  state.counters["ns_per_barrier_thread"] = 1e9 * per_barrier_thread;
  state.counters["x_plain_call"] = per_barrier_thread / plain_call_seconds();
}
BENCHMARK(BM_Barrier)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

// A warp of 32 lanes, range(0) full-mask __shfl_xor_sync each: per collective (the whole
// warp's exchange) and per lane, the empty 32-thread launch taken off.
void BM_ShuffleXor(benchmark::State& state) {
  constexpr unsigned kLanes = 32;
  const auto k = static_cast<int>(state.range(0));
  float* out = device_floats(kLanes);
  const double empty = empty_launch_seconds(1, kLanes);
  set_sim_options(options(false));
  const double t0 = thread_seconds();
  const bool ok = timed_launches(state, [&] { return launch_shuffles(out, k); });
  const double per_launch = seconds_per_iteration(state, t0);
  free_device(out);
  if (!ok) return;
  const double per_collective = (per_launch - empty) / k;
  state.counters["ns_per_collective"] = 1e9 * per_collective;
  state.counters["ns_per_lane"] = 1e9 * per_collective / kLanes;
  state.counters["x_plain_call_per_lane"] = per_collective / kLanes / plain_call_seconds();
}
BENCHMARK(BM_ShuffleXor)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// ---- (2) the access checkers and the nondeterminism re-run ----

constexpr unsigned kCopyBlocks = 8, kCopyThreads = 256;

struct CopyArrays {
  explicit CopyArrays(int per_thread)
      : count(size_t{kCopyBlocks} * kCopyThreads * static_cast<size_t>(per_thread)),
        src(device_floats(count)),
        dst(device_floats(count)) {
    fill_device(src, count);
  }
  ~CopyArrays() {
    free_device(src);
    free_device(dst);
  }
  CopyArrays(const CopyArrays&) = delete;
  CopyArrays& operator=(const CopyArrays&) = delete;
  size_t count;
  float* src;
  float* dst;
};

// Seconds per pass of the copy kernel's body as a plain host loop: the same elements in the
// same order (thread by thread), on host memory, once per size.
double plain_copy_seconds(int per_thread) {
  static std::map<int, double> cache;
  return cached_seconds(cache, per_thread, [&] {
    const int threads = static_cast<int>(kCopyBlocks * kCopyThreads);
    std::vector<float> src(size_t{kCopyBlocks} * kCopyThreads * static_cast<size_t>(per_thread),
                           1.0f);
    std::vector<float> dst(src.size());
    return seconds_per_call(
        [&] {
          for (int t = 0; t < threads; ++t)
            for (int i = 0; i < per_thread; ++i) dst[t + i * threads] = 2.0f * src[t + i * threads];
          benchmark::DoNotOptimize(dst.data());
        },
        0.05);
  });
}

// Seconds per unchecked copy launch of `per_thread` floats (rerun off), once per size.
double unchecked_copy_seconds(int per_thread) {
  static std::map<int, double> cache;
  return cached_seconds(cache, per_thread, [&] {
    CopyArrays a(per_thread);
    set_sim_options(options(false));
    return seconds_per_call(
        [&] { launch_copy_unchecked(a.src, a.dst, kCopyBlocks, kCopyThreads, per_thread); }, 0.1);
  });
}

// 8 × 256 threads, each loading and storing range(0) floats. Checked: the instrumented kernel,
// with or without the re-run; counters: per element, against the body as a plain host loop,
// checked loads + stores per second (the simulator's own counters; the re-run's second run
// counts too), checked / unchecked (unchecked: re-run off), and with the re-run rerun-on /
// rerun-off of the checked kernel.
void copy_loop(benchmark::State& state, bool checked, bool rerun) {
  const auto per_thread = static_cast<int>(state.range(0));
  CopyArrays a(per_thread);
  set_sim_options(options(rerun));
  reset_sim_counters();
  const double t0 = thread_seconds();
  const bool ok = timed_launches(state, [&] {
    return checked ? launch_copy_checked(a.src, a.dst, kCopyBlocks, kCopyThreads, per_thread)
                   : launch_copy_unchecked(a.src, a.dst, kCopyBlocks, kCopyThreads, per_thread);
  });
  const double per_launch = seconds_per_iteration(state, t0);
  const SimCounters counters = sim_counters();
  if (!ok) return;
  const double copies = static_cast<double>(a.count);
  state.counters["ns_per_element"] = 1e9 * per_launch / copies;
  state.counters["x_plain_loop"] = per_launch / plain_copy_seconds(per_thread);
  if (!checked) return;
  state.counters["checked_accesses_per_s"] = benchmark::Counter(
      static_cast<double>(counters.loads + counters.stores), benchmark::Counter::kIsRate);
  state.counters["x_unchecked"] = per_launch / unchecked_copy_seconds(per_thread);
  if (rerun) {
    // The re-run's own ratio: against the checked kernel with the re-run off, timed here.
    set_sim_options(options(false));
    const double once = seconds_per_call(
        [&] { launch_copy_checked(a.src, a.dst, kCopyBlocks, kCopyThreads, per_thread); }, 0.1);
    state.counters["x_rerun_off"] = per_launch / once;
  }
}

void BM_CopyUnchecked(benchmark::State& state) { copy_loop(state, false, false); }
void BM_CopyChecked(benchmark::State& state) { copy_loop(state, true, false); }
void BM_CopyCheckedRerun(benchmark::State& state) { copy_loop(state, true, true); }
BENCHMARK(BM_CopyUnchecked)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CopyChecked)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CopyCheckedRerun)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bufferlab::sim_bench
