// Timing helpers shared by the CPU benchmarks: the mean time per call of a baseline measured in
// the same run, skipping a benchmark whose op throws, the timed loop, a per-key cache so a slow
// baseline is timed once per shape (and a setup made once per shape), an op against its naive
// loop, the memcpy bandwidth baseline, and the naive loops' scalar activations. Header-only.
#pragma once

#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bufferlab::bench {

// Mean seconds per call of f over at least min_s (after one warm-up call unless cold).
template <class F>
double seconds_per_call(F f, double min_s = 0.1, bool warm_up = true) {
  using Clock = std::chrono::steady_clock;
  if (warm_up) f();
  uint64_t calls = 0;
  const auto start = Clock::now();
  std::chrono::duration<double> elapsed{0};
  do {
    f();
    ++calls;
    elapsed = Clock::now() - start;
  } while (elapsed.count() < min_s);
  return elapsed.count() / static_cast<double>(calls);
}

// Runs `op` once; on an Error (e.g. a kernel not written yet) skips the benchmark.
template <class F>
bool first_call_or_skip(benchmark::State& state, F op) {
  try {
    op();
    return true;
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("skipped: ") + e.what()).c_str());
    return false;
  }
}

// Runs `op` once (skipping the benchmark on an Error), then as the benchmark's timed loop;
// false when skipped.
template <class F>
bool timed_loop_or_skip(benchmark::State& state, F op) {
  if (!first_call_or_skip(state, op)) return false;
  for (auto _ : state) op();
  return true;
}

template <class Key, class F>
double cached_seconds(std::map<Key, double>& cache, const Key& key, F measure) {
  auto [it, fresh] = cache.try_emplace(key, 0.0);
  if (fresh) it->second = measure();
  return it->second;
}

// The setup of `key`: made by make() (a std::unique_ptr<T>) on its first use, kept for the run.
template <class T, class Key, class Make>
T& cached_setup(std::map<Key, std::unique_ptr<T>>& cache, const Key& key, Make make) {
  std::unique_ptr<T>& s = cache[key];
  if (!s) s = make();
  return *s;
}

// The seconds per call of our op and of the naive loop it is compared with.
struct OwnAndNaive {
  double own = 0, naive = 0;
};

// The benchmark loop of `ours` (nothing returned when it is skipped on an Error), then the
// seconds per call of the naive loop (kept in naive_s: timed once per shape in this run; one
// cold call unless warm_up) and of ours, also in the counters speedup_vs_naive = naive / ours
// and naive_us.
template <class Ours, class Naive>
std::optional<OwnAndNaive> time_against_naive(benchmark::State& state,
                                              std::optional<double>& naive_s, Ours ours,
                                              Naive naive, bool warm_up = true) {
  if (!timed_loop_or_skip(state, ours)) return std::nullopt;
  if (!naive_s) naive_s = seconds_per_call(naive, 0.1, warm_up);
  OwnAndNaive t;
  t.naive = *naive_s;
  t.own = seconds_per_call(ours);
  state.counters["speedup_vs_naive"] = t.naive / t.own;
  state.counters["naive_us"] = 1e6 * t.naive;
  return t;
}

// memcpy of `bytes` split evenly over the OpenMP team: the bandwidth baseline.
inline void parallel_memcpy(std::byte* dst, const std::byte* src, uint64_t bytes) {
#pragma omp parallel
  {
    const auto threads = static_cast<uint64_t>(omp_get_num_threads());
    const auto id = static_cast<uint64_t>(omp_get_thread_num());
    const uint64_t chunk = (bytes + threads - 1) / threads;
    const uint64_t begin = std::min(bytes, id * chunk);
    const uint64_t end = std::min(bytes, begin + chunk);
    std::memcpy(dst + begin, src + begin, end - begin);
  }
}

// The copy baseline: seconds per parallel_memcpy of `bytes` (each timing at least min_s),
// measured once per (bytes, min_s) in this run.
inline double copy_seconds(uint64_t bytes, double min_s = 0.1) {
  static std::map<std::pair<uint64_t, double>, double> cache;
  return cached_seconds(cache, std::pair{bytes, min_s}, [&] {
    std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes, std::byte{0});
    return seconds_per_call(
        [&] {
          parallel_memcpy(dst.data(), src.data(), bytes);
          benchmark::DoNotOptimize(dst.data());
        },
        min_s);
  });
}

// The naive loops' scalar activations (one element at a time, FP32).
inline float sigmoidf(float v) { return 1.0f / (1.0f + std::exp(-v)); }
inline float siluf(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace bufferlab::bench
