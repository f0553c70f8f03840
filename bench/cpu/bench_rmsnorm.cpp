// Google Benchmark: the CPU fused residual add + RMSNorm against two baselines measured in the
// same run — a naive single-thread scalar loop with the same storage semantics, and this
// machine's copy bandwidth (an OpenMP memcpy over the same number of bytes). Not pass/fail.
//
// Traffic counted per call (the compulsory bytes of the add variant): read x and residual,
// write residual and norm_output (2 bytes each per element), read the weight row once:
// 8·rows·width + 2·width. The memcpy baseline copies half that many bytes (a copy reads and
// writes each byte), so both rates are bytes of traffic per second. Counters:
//   bytes_per_second   traffic rate of the benchmark
//   copy_fraction      rmsnorm traffic rate / memcpy traffic rate (1.0 = at copy bandwidth)
//   speedup_vs_naive   naive time / Eigen+OpenMP time
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "bench_timing.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"

namespace bufferlab {
namespace {

using bench::parallel_memcpy;
using bench::seconds_per_call;

uint64_t traffic_bytes(uint64_t rows, uint64_t width) { return 8 * rows * width + 2 * width; }

FusedAddRmsNormOp make_op(uint64_t rows, uint64_t width) {
  ModelConfig config;
  config.hidden_size = width;
  config.rms_norm_eps = 1e-6;
  return FusedAddRmsNormOp::make(config, rows, RmsNormVariant{});
}

// One allocated, filled workspace per shape, shared by every benchmark of that shape.
struct Setup {
  FusedAddRmsNormOp op;
  std::unique_ptr<Backend> backend;
  Workspace ws;
};

Setup& setup(uint64_t rows, uint64_t width) {
  static std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<Setup>> cache;
  auto& s = cache[{rows, width}];
  if (!s) {
    s = std::make_unique<Setup>();
    s->op = make_op(rows, width);
    s->backend = make_cpu_backend();
    s->ws = s->backend->allocate(oracle::footprint_layout(s->op), s->op.weight_pool_bytes());
    const auto in = oracle::generate_rmsnorm_inputs(s->op, 1);
    oracle::run_fused_add_rmsnorm(*s->backend, s->ws, s->op, in);
  }
  return *s;
}

// The naive reference loop: one thread, one element at a time, same storage semantics.
void naive_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op) {
  const uint64_t rows = op.shape().rows, n = op.shape().width;
  const auto* x = ws.data<const uint16_t>(op.input);
  auto* res = ws.data<uint16_t>(op.residual);
  const auto* w = ws.data<const uint16_t>(op.weight);
  auto* out = ws.data<uint16_t>(op.output);
  const float eps = static_cast<float>(op.eps);
  for (uint64_t t = 0; t < rows; ++t) {
    float sum_sq = 0.0f;
    for (uint64_t j = 0; j < n; ++j) {
      const float r =
          round_to_bf16(bf16_bits_to_f32(res[t * n + j]) + bf16_bits_to_f32(x[t * n + j]));
      res[t * n + j] = f32_to_bf16_bits(r);
      sum_sq += r * r;
    }
    const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
    for (uint64_t j = 0; j < n; ++j)
      out[t * n + j] = f32_to_bf16_bits(bf16_bits_to_f32(res[t * n + j]) * inv *
                                        (1.0f + bf16_bits_to_f32(w[j])));
  }
}

struct CopyBuffers {
  std::vector<std::byte> src, dst;
};

CopyBuffers& copy_buffers(uint64_t bytes) {
  static std::map<uint64_t, CopyBuffers> cache;
  auto& b = cache[bytes];
  if (b.src.size() != bytes) {
    b.src.assign(bytes, std::byte{1});
    b.dst.assign(bytes, std::byte{0});
  }
  return b;
}

// Every timing behind a ratio: the mean over at least 0.2 s (after one warm-up call).
constexpr double kRmsNormMinSeconds = 0.2;

// Baselines measured once per shape in this run, so the ratios compare like with like.

double naive_seconds(uint64_t rows, uint64_t width) {
  static std::map<std::pair<uint64_t, uint64_t>, double> cache;
  auto [it, fresh] = cache.try_emplace({rows, width}, 0.0);
  if (fresh) {
    Setup& s = setup(rows, width);
    it->second = seconds_per_call([&] { naive_rmsnorm(s.ws, s.op); }, kRmsNormMinSeconds);
  }
  return it->second;
}

void set_traffic(benchmark::State& state, uint64_t rows, uint64_t width) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic_bytes(rows, width)));
}

void BM_RmsNormCpu(benchmark::State& state) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto width = static_cast<uint64_t>(state.range(1));
  Setup& s = setup(rows, width);
  for (auto _ : state) s.backend->fused_add_rmsnorm(s.ws, s.op);
  set_traffic(state, rows, width);
  // The three timings behind the ratios are taken the same way, back to back, so a busy
  // machine slows them alike.
  const double own =
      seconds_per_call([&] { s.backend->fused_add_rmsnorm(s.ws, s.op); }, kRmsNormMinSeconds);
  // The copy moves half the traffic bytes (a copy reads and writes each byte).
  const double copy = bench::copy_seconds(traffic_bytes(rows, width) / 2, kRmsNormMinSeconds);
  state.counters["copy_fraction"] = copy / own;
  state.counters["speedup_vs_naive"] = naive_seconds(rows, width) / own;
  state.counters["threads"] = omp_get_max_threads();
}

void BM_RmsNormNaive(benchmark::State& state) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto width = static_cast<uint64_t>(state.range(1));
  Setup& s = setup(rows, width);
  for (auto _ : state) naive_rmsnorm(s.ws, s.op);
  set_traffic(state, rows, width);
}

void BM_MemcpySameBytes(benchmark::State& state) {
  const auto rows = static_cast<uint64_t>(state.range(0));
  const auto width = static_cast<uint64_t>(state.range(1));
  CopyBuffers& b = copy_buffers(traffic_bytes(rows, width) / 2);
  for (auto _ : state) {
    parallel_memcpy(b.dst.data(), b.src.data(), b.src.size());
    benchmark::DoNotOptimize(b.dst.data());
  }
  set_traffic(state, rows, width);
}

// Decode-sized (64 rows) and prefill-sized (1024 rows) passes at two hidden sizes.
void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {64, 1024})
    for (int64_t width : {4096, 7168}) b->Args({rows, width});
  b->ArgNames({"rows", "width"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_MemcpySameBytes)->Apply(shapes)->UseRealTime();
BENCHMARK(BM_RmsNormNaive)->Apply(shapes)->UseRealTime();
BENCHMARK(BM_RmsNormCpu)->Apply(shapes)->UseRealTime();

}  // namespace
}  // namespace bufferlab
