// Google Benchmark: the CUDA Gated DeltaNet and Mamba-2 SSD cores (docs/spec/numerics.md §5–§6,
// ops/gdn.h, ops/mamba2.h) through the Backend interface, timed with CUDA events (manual time): the
// chunked form against the token-by-token recurrence on the same workspace and inputs, and
// each against the H200 roofline. Not pass/fail.
//
//   BM_CudaGdnChunked     gdn_chunk wu + state + output, one sequence of T tokens
//   BM_CudaGdnRecurrent   gdn_recurrent over the same rows
//   BM_CudaSsdChunked     mamba2_chunk cumsum + bmm + scan, one sequence of T tokens
//   BM_CudaSsdRecurrent   mamba2_recurrent over the same rows
// Shapes (named in the benchmark name, mirrored by scripts/torch_gdn_mamba2.py): qwen3-next-80b
// GDN (nk 16, kd 128, nv 32, vd 128) at T = 64, 256, 1024; SSD of nemotron-h-56b (H 256,
// P 64, N 256, G 8) at T = 256 and tiny-mamba (H 6, P 24, N 40, G 2) at T = 256 and 1024.
//
// Setup, once per shape (the two paths of a shape run back to back on one workspace): the
// oracle harness plans both paths, the workspace holds the union of their operands (shared
// offsets: conv output, gates, output rows, pool), and the seeded generator's inputs go
// through the whole chunked call once (run_gdn / run_mamba2). Timed: the core ops alone; the
// state carries over between calls (bounded: every decay is ≤ 1).
//
// Roofline: compulsory bytes (each operand once: the f32 conv rows or the bf16 xBC rows, the
// gates or dt column, the state read and written, the bf16 output; the scratch arrays are the
// algorithm's own traffic, not counted) over 4.3 TB/s, and flops (2 per multiply-add of the
// FLOP model of bench/cpu/bench_gdn_mamba2.cpp, the same formulas) over the FP32 CUDA-core peak:
// these kernels compute in FP32 without tensor cores. Counters: kernel_us, tokens_per_s, gbps,
// tflops, roofline_fraction = max(bytes / 4.3e12, flops / 67e12) / time; the chunked
// benchmarks add recurrent_us and speedup_vs_recurrent (recurrent / chunked, same run).
//
// Without a usable GPU every benchmark reports "skipped: <reason>"; an op the backend cannot
// run reports "not run: <error>".
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench_cuda_rig.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"

namespace bufferlab {
namespace {

using namespace bench;  // NOLINT(google-build-using-namespace): the shared rig

constexpr double kC = 64.0;  // chunk length of both chunked algorithms

double u(uint64_t x) { return static_cast<double>(x); }
uint64_t arg(const benchmark::State& state, int i) { return static_cast<uint64_t>(state.range(i)); }

struct Cost {
  double bytes = 0, flops = 0;
};

// The FLOP model (multiply-adds) of bench_gdn_mamba2.cpp; see its header for the terms.
double gdn_chunked_macs(uint64_t tokens, uint64_t nv, uint64_t kd, uint64_t vd) {
  const double k = u(kd), v = u(vd);
  const double region =
      kC * kC * k + kC * kC * (k + v) / 2 + 2 * kC * k * v + kC * k * v + kC * kC * v;
  return region * std::ceil(u(tokens) / kC) * u(nv);
}

double mamba2_chunked_macs(uint64_t tokens, const Mamba2Geometry& g) {
  const double P = u(g.P), N = u(g.N);
  return std::ceil(u(tokens) / kC) *
         (u(g.H) * (2 * kC * P * N + kC * kC * P / 2) + u(g.G) * kC * kC * N);
}

template <class F>
void with_device(benchmark::State& state, F body) {
  Device* d = device_or_skip(state);
  if (d == nullptr) return;
  try {
    body(*d);
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("not run: ") + e.what()).c_str());
  }
}

using Work = std::function<void()>;

// Times `op` (one warm-up call first); `recurrent`, when given, is timed after it for the
// same-run ratio.
void run_timed(benchmark::State& state, Device& d, uint64_t tokens, Cost cost, const Work& op,
               const Work* recurrent = nullptr) {
  op();
  d.backend->synchronize();
  for (auto _ : state) state.SetIterationTime(event_ms(d, op) / 1e3);
  const double s = mean_ms(d, op) / 1e3;
  state.counters["kernel_us"] = 1e6 * s;
  state.counters["tokens_per_s"] = u(tokens) / s;
  state.counters["gbps"] = cost.bytes / s / 1e9;
  state.counters["tflops"] = cost.flops / s / 1e12;
  state.counters["roofline_fraction"] =
      std::max(cost.bytes / kCopyBytesPerS, cost.flops / kFp32FlopsPerS) / s;
  if (recurrent != nullptr) {
    const double r = mean_ms(d, *recurrent) / 1e3;
    state.counters["recurrent_us"] = 1e6 * r;
    state.counters["speedup_vs_recurrent"] = r / s;
  }
  d.backend->synchronize();
  state.SetBytesProcessed(static_cast<int64_t>(cost.bytes) *
                          static_cast<int64_t>(state.iterations()));
}

template <class Plan>
std::vector<Access> both_paths(const Plan& chunked, const Plan& recurrent) {
  std::vector<Access> all = chunked.accesses();
  const std::vector<Access> rec = recurrent.accesses();
  all.insert(all.end(), rec.begin(), rec.end());
  return all;
}

// ---------------------------------------------------------------- GDN

void BM_CudaGdn(benchmark::State& state, bool chunked) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), nv = arg(state, 1);
    ModelConfig c = preset("qwen3-next-80b");
    c.linear_num_value_heads = nv;
    const oracle::GdnDims dims = oracle::GdnDims::of(c, 1, T);
    const oracle::GdnPlan pc = oracle::plan_gdn(dims, oracle::GdnPath::chunked);
    const oracle::GdnPlan pr = oracle::plan_gdn(dims, oracle::GdnPath::recurrent);
    use_workspace(d, "gdn/" + std::to_string(T) + "/" + std::to_string(nv), both_paths(pc, pr),
                  std::max(pc.pool_bytes, pr.pool_bytes), [&] {
                    oracle::run_gdn(*d.backend, d.ws, pc,
                                    oracle::generate_gdn_inputs(dims, 0x6D6E + T));
                  });
    const GdnGeometry& g = dims.geom;
    const Cost cost{
        u(T * g.conv_dim * 4 + T * g.nv * 2 * 4 + 2 * g.nv * g.kd * g.vd * 4 + T * g.value_dim * 2),
        2 * (chunked ? gdn_chunked_macs(T, g.nv, g.kd, g.vd)
                     : 4.0 * u(g.kd) * u(g.vd) * u(T) * u(g.nv))};
    const Work chunk = [&] {
      for (const GdnChunkOp& op : pc.chunk) d.backend->gdn_chunk(d.ws, op);
    };
    const Work recur = [&] { d.backend->gdn_recurrent(d.ws, pr.recurrent); };
    if (chunked)
      run_timed(state, d, T, cost, chunk, &recur);
    else
      run_timed(state, d, T, cost, recur);
  });
}

// ---------------------------------------------------------------- Mamba-2 SSD

void BM_CudaSsd(benchmark::State& state, const std::string& model, bool chunked) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0);
    const oracle::Mamba2Dims dims = oracle::Mamba2Dims::of(preset(model), 1, T);
    const oracle::Mamba2Plan pc = oracle::plan_mamba2(dims, oracle::Mamba2Path::chunked);
    const oracle::Mamba2Plan pr = oracle::plan_mamba2(dims, oracle::Mamba2Path::recurrent);
    use_workspace(d, "ssd/" + model + "/" + std::to_string(T), both_paths(pc, pr),
                  std::max(pc.pool_bytes, pr.pool_bytes), [&] {
                    oracle::run_mamba2(*d.backend, d.ws, pc,
                                       oracle::generate_mamba2_inputs(dims, 0x55D + T));
                  });
    const Mamba2Geometry& g = dims.geom;
    const Cost cost{
        u(T * g.d_xbc * 2 + T * g.H * 2 + 2 * g.H * g.P * g.N * 4 + T * g.d_inner * 2),
        2 * (chunked ? mamba2_chunked_macs(T, g) : 3.0 * u(g.P) * u(g.N) * u(g.H) * u(T))};
    const Work chunk = [&] {
      for (const Mamba2ChunkOp& op : pc.chunk) d.backend->mamba2_chunk(d.ws, op);
    };
    const Work recur = [&] { d.backend->mamba2_recurrent(d.ws, pr.recurrent); };
    if (chunked)
      run_timed(state, d, T, cost, chunk, &recur);
    else
      run_timed(state, d, T, cost, recur);
  });
}

// Registered shape by shape (chunked, then recurrent) so each shape's workspace is set up
// once: use_workspace keeps one live workspace and replaces it when the key changes.
[[maybe_unused]] const bool kRegistered = [] {
  for (int64_t tokens : {64, 256, 1024})
    for (bool chunked : {true, false})
      benchmark::RegisterBenchmark(chunked ? "BM_CudaGdnChunked" : "BM_CudaGdnRecurrent",
                                   BM_CudaGdn, chunked)
          ->Args({tokens, 32})
          ->ArgNames({"tokens", "nv"})
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  const std::pair<const char*, std::vector<int64_t>> ssd[] = {{"nemotron-h-56b", {256}},
                                                              {"tiny-mamba", {256, 1024}}};
  for (const auto& [model, lengths] : ssd)
    for (int64_t tokens : lengths)
      for (bool chunked : {true, false}) {
        std::string tag = model;
        std::replace(tag.begin(), tag.end(), '-', '_');
        const std::string name =
            std::string(chunked ? "BM_CudaSsdChunked/" : "BM_CudaSsdRecurrent/") + tag;
        benchmark::RegisterBenchmark(name.c_str(), BM_CudaSsd, std::string(model), chunked)
            ->Arg(tokens)
            ->ArgName("tokens")
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  return true;
}();

}  // namespace
}  // namespace bufferlab
