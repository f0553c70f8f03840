// Google Benchmark: the CUDA fused residual add + RMSNorm kernel against this GPU's
// device-to-device cudaMemcpy bandwidth over the same bytes, measured in the same run with CUDA
// events (manual time). Without a usable GPU every benchmark reports the reason through
// SkipWithError. Not pass/fail.
//
// Traffic per call (compulsory bytes of the add variant): 8·rows·width + 2·width (read x and
// residual, write residual and norm_output, read the weight row once). The copy moves half as
// many bytes (a copy reads and writes each). Counters: bytes_per_second (traffic rate) and
// copy_fraction = copy time / kernel time (1.0 = at the device's copy bandwidth).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/cuda/cuda_backend.h"

namespace bufferlab {
namespace {

uint64_t traffic_bytes(uint64_t rows, uint64_t width) { return 8 * rows * width + 2 * width; }

// The op's footprint as a layout (the oracle's footprint_layout, which this target does not
// link): every arena tensor the op touches, sized by its own TensorRef.
Layout footprint_layout(const FusedAddRmsNormOp& op) {
  BufferSizes sizes;
  for (const Access& a : op.accesses()) {
    if (a.tensor.space != Space::arena) continue;
    uint64_t& b = sizes.bytes(a.tensor.buffer);
    b = std::max(b, a.tensor.offset + a.tensor.bytes());
  }
  return Layout::build(sizes);
}

std::vector<uint16_t> pattern(uint64_t n, float scale) {
  std::vector<uint16_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = f32_to_bf16_bits(scale * std::sin(0.37f * static_cast<float>(i % 4099)));
  return v;
}

struct Setup {
  FusedAddRmsNormOp op;
  std::unique_ptr<Backend> backend;
  Workspace ws;
  void* copy_src = nullptr;
  void* copy_dst = nullptr;
  cudaEvent_t start{}, stop{};
};

// One device workspace per shape, kept for the whole run (freed at exit by the OS).
Setup* setup(uint64_t rows, uint64_t width, std::string& error) {
  static std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<Setup>> cache;
  auto& s = cache[{rows, width}];
  if (s) return s.get();
  try {
    auto fresh = std::make_unique<Setup>();
    ModelConfig config;
    config.hidden_size = width;
    fresh->op = FusedAddRmsNormOp::make(config, rows, RmsNormVariant{});
    fresh->backend = make_cuda_backend();
    fresh->ws =
        fresh->backend->allocate(footprint_layout(fresh->op), fresh->op.weight_pool_bytes());
    fresh->backend->poison(fresh->ws);
    const auto x = pattern(rows * width, 1.0f);
    const auto w = pattern(width, 0.25f);
    fresh->backend->upload(fresh->ws, fresh->op.input, x.data());
    fresh->backend->upload(fresh->ws, fresh->op.residual, x.data());
    fresh->backend->upload(fresh->ws, fresh->op.weight, w.data());
    const size_t copy = traffic_bytes(rows, width) / 2;
    if (cudaMalloc(&fresh->copy_src, copy) != cudaSuccess ||
        cudaMalloc(&fresh->copy_dst, copy) != cudaSuccess ||
        cudaEventCreate(&fresh->start) != cudaSuccess ||
        cudaEventCreate(&fresh->stop) != cudaSuccess) {
      error = std::string("CUDA setup failed: ") + cudaGetErrorString(cudaGetLastError());
      return nullptr;
    }
    cudaMemset(fresh->copy_src, 1, copy);
    s = std::move(fresh);
    return s.get();
  } catch (const std::exception& e) {
    error = e.what();
    return nullptr;
  }
}

// Milliseconds of one enqueue of `work`, timed with events on the default stream.
template <class F>
float event_ms(Setup& s, F work) {
  cudaEventRecord(s.start);
  work();
  cudaEventRecord(s.stop);
  cudaEventSynchronize(s.stop);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, s.start, s.stop);
  return ms;
}

// Mean milliseconds over 50 calls after 5 warm-up calls.
template <class F>
double mean_ms(Setup& s, F work) {
  for (int i = 0; i < 5; ++i) work();
  return event_ms(s,
                  [&] {
                    for (int i = 0; i < 50; ++i) work();
                  }) /
         50.0;
}

Setup* setup_or_skip(benchmark::State& state) {
  const std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) {
    state.SkipWithError(("skipped: " + reason).c_str());
    return nullptr;
  }
  std::string error;
  Setup* s =
      setup(static_cast<uint64_t>(state.range(0)), static_cast<uint64_t>(state.range(1)), error);
  if (s == nullptr) state.SkipWithError(error.c_str());
  return s;
}

void finish(benchmark::State& state, uint64_t rows, uint64_t width) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic_bytes(rows, width)));
}

void BM_CudaRmsNorm(benchmark::State& state) {
  Setup* s = setup_or_skip(state);
  if (s == nullptr) return;
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto width = static_cast<uint64_t>(state.range(1));
  auto kernel = [&] { s->backend->fused_add_rmsnorm(s->ws, s->op); };
  auto copy = [&] {
    cudaMemcpy(s->copy_dst, s->copy_src, traffic_bytes(rows, width) / 2, cudaMemcpyDeviceToDevice);
  };
  for (auto _ : state) state.SetIterationTime(event_ms(*s, kernel) / 1e3);
  finish(state, rows, width);
  state.counters["copy_fraction"] = mean_ms(*s, copy) / mean_ms(*s, kernel);
  state.counters["kernel_us"] = 1e3 * mean_ms(*s, kernel);
}

void BM_CudaMemcpyD2D(benchmark::State& state) {
  Setup* s = setup_or_skip(state);
  if (s == nullptr) return;
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto width = static_cast<uint64_t>(state.range(1));
  auto copy = [&] {
    cudaMemcpy(s->copy_dst, s->copy_src, traffic_bytes(rows, width) / 2, cudaMemcpyDeviceToDevice);
  };
  for (auto _ : state) state.SetIterationTime(event_ms(*s, copy) / 1e3);
  finish(state, rows, width);
}

// Decode-sized and prefill-sized passes; 4095 takes the kernel's scalar path.
void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {64, 1024, 8192})
    for (int64_t width : {4095, 4096, 7168}) b->Args({rows, width});
  b->ArgNames({"rows", "width"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_CudaMemcpyD2D)->Apply(shapes);
BENCHMARK(BM_CudaRmsNorm)->Apply(shapes);

}  // namespace
}  // namespace bufferlab
