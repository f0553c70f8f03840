// The CUDA benchmarks' shared rig (bench_cuda_moe.cu, bench_cuda_mhc.cu): the H200 roofline of
// docs/gpu-runs.md, seeded tiled inputs, the one device state of the run (backend, CUDA events, the
// live workspace) and CUDA-event timing. Header-only; included by the .cu benchmarks alone.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::bench {

inline constexpr double kCopyBytesPerS = 4.3e12;  // H200, measured (docs/gpu-runs.md)
inline constexpr double kBf16FlopsPerS =
    790e12;  // H200 dense BF16 matrix product (docs/gpu-runs.md)
inline constexpr double kFp32FlopsPerS = 67e12;  // H100/H200 SXM FP32 (CUDA cores), datasheet

// ---------------------------------------------------------------- inputs

// SplitMix64's output for state x: a deterministic integer hash (oracle/seeded_random.h).
inline uint64_t mix(uint64_t x) { return oracle::splitmix64_hash(x); }

inline float value(uint64_t i, uint64_t seed, float scale) {
  const auto q = static_cast<int64_t>(mix(i * 0x100000001B3ull + seed) >> 48) - 32768;
  return scale * static_cast<float>(q) / 32768.0f;
}

// A tile of at most 4 Mi elements that large tensors repeat (host work and transfers stay
// small; the values only need to be finite and varied).
inline constexpr uint64_t kTile = uint64_t{1} << 22;

inline std::vector<uint16_t> bf16_tile(uint64_t n, uint64_t seed, float scale) {
  std::vector<uint16_t> v(std::min(n, kTile));
  for (uint64_t i = 0; i < v.size(); ++i) v[i] = f32_to_bf16_bits(value(i, seed, scale));
  return v;
}

inline std::vector<float> f32_tile(uint64_t n, uint64_t seed, float scale) {
  std::vector<float> v(std::min(n, kTile));
  for (uint64_t i = 0; i < v.size(); ++i) v[i] = value(i, seed, scale);
  return v;
}

// ---------------------------------------------------------------- device state

struct Device {
  std::unique_ptr<Backend> backend;
  cudaEvent_t start{}, stop{};
  // The one live workspace (sized for the largest token count of its family and shape; every
  // smaller pass's operands are prefixes of it). Replaced, never accumulated, so a run holds
  // one shape's weights at a time.
  std::string key;
  Workspace ws;
};

// The device state of the whole run. Deliberately never destroyed: freeing device memory and
// library handles from static destructors races the CUDA runtime's own teardown at exit.
inline Device* device_or_skip(benchmark::State& state) {
  static Device* dev = nullptr;
  static std::string error;
  if (dev == nullptr && error.empty()) {
    error = cuda_unavailable_reason();
    if (error.empty()) {
      try {
        auto d = std::make_unique<Device>();
        d->backend = make_cuda_backend();
        if (cudaEventCreate(&d->start) != cudaSuccess || cudaEventCreate(&d->stop) != cudaSuccess)
          throw Error(std::string("cudaEventCreate: ") + cudaGetErrorString(cudaGetLastError()));
        dev = d.release();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
  }
  if (dev == nullptr) state.SkipWithError(("skipped: " + error).c_str());
  return dev;
}

// Uploads `tile` repeated over the whole tensor (element size = sizeof(T)).
template <class T>
void upload_tiled(Device& d, const TensorRef& t, const std::vector<T>& tile) {
  const uint64_t n = t.elements();
  for (uint64_t done = 0; done < n;) {
    const uint64_t len = std::min<uint64_t>(tile.size(), n - done);
    TensorRef part = t;
    part.offset = t.offset + done * sizeof(T);
    part.shape = {len};
    d.backend->upload(d.ws, part, tile.data());
    done += len;
  }
}

// Makes `key` the live workspace: frees the previous one, then allocates and fills the new.
inline void use_workspace(Device& d, const std::string& key, const std::vector<Access>& accesses,
                          uint64_t pool_bytes, const std::function<void()>& fill) {
  if (d.key == key) return;
  d.key.clear();
  d.ws = Workspace();
  d.backend->synchronize();
  d.ws = d.backend->allocate(oracle::ffn_footprint_layout(accesses), pool_bytes);
  d.backend->poison(d.ws);
  fill();
  d.backend->synchronize();
  d.key = key;
}

// ---------------------------------------------------------------- timing

template <class F>
float event_ms(Device& d, F work) {
  cudaEventRecord(d.start);
  work();
  cudaEventRecord(d.stop);
  cudaEventSynchronize(d.stop);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, d.start, d.stop);
  return ms;
}

// Mean milliseconds per call after one warm-up call: one timed call, and when it took under
// 20 ms, the mean of enough further calls for ~20 ms (3 to 50).
template <class F>
double mean_ms(Device& d, F work) {
  work();
  const double once = event_ms(d, work);
  if (once >= 20.0) return once;
  const int reps = static_cast<int>(std::clamp(20.0 / std::max(once, 1e-3), 3.0, 50.0));
  return event_ms(d,
                  [&] {
                    for (int i = 0; i < reps; ++i) work();
                  }) /
         reps;
}

}  // namespace bufferlab::bench
