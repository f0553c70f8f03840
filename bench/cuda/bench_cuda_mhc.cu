// Google Benchmark: the CUDA mHC hyper-connection ops (ops/mhc.h) through the Backend
// interface, timed with CUDA events (manual time) against the H200 roofline of docs/gpu-runs.md
// (about 4.3 TB/s device copy) and the H200's FP32 peak (the mHC math is FP32 on CUDA cores; the
// slab GEMMs are BF16 on tensor cores, about 790 TFLOP/s). Not pass/fail.
//
//   BM_CudaMhcPre          the Sinkhorn-form pre step (flattened RMS + mix GEMV + Sinkhorn +
//                          block input), hc = 4, 20 Sinkhorn iterations
//   BM_CudaMhcHead         the head (pre weights without Sinkhorn, block input)
//   BM_CudaMhcPost         the post step, Sinkhorn and low-rank forms, in place
//   BM_CudaMhcExpand       embedding row → hc streams
//   BM_CudaMhcLowRankSplit the split path (norm, down, collapse), T ≤ 64, r = 32
//   BM_CudaMhcLowRankSlab  the GEMM path over one slab (norm, down, inject, up, collapse)
//
// Per op, the compulsory bytes (each operand read once, each output written once) and the
// flops (2 per multiply-add of the GEMVs / GEMMs). Counters: kernel_us (mean of one call),
// gbps, tflops, roofline_fraction = max(bytes / 4.3e12, flops / peak) / time with peak the FP32
// peak (BF16 for the slab chain). Shapes are named in the benchmark name so
// scripts/torch_mhc.py (run by scripts/gpu-check.sh) mirrors them.
//
// Without a usable GPU every benchmark reports "skipped: <reason>"; an op the backend cannot
// run reports "not run: <error>".
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_cuda_rig.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using namespace bench;  // NOLINT(google-build-using-namespace): the shared rig

constexpr uint64_t kMhc = 4;
constexpr uint64_t kRank = 32;

// Every access of `op`, appended (a chain's workspace holds all its stages).
template <class Op>
void append(std::vector<Access>& all, const Op& op) {
  const auto a = op.accesses();
  all.insert(all.end(), a.begin(), a.end());
}

struct Cost {
  double bytes = 0, flops = 0, peak_flops = kFp32FlopsPerS;
};

template <class F>
void run_timed(benchmark::State& state, Device& d, Cost cost, F op) {
  try {
    op();
    d.backend->synchronize();
    for (auto _ : state) state.SetIterationTime(event_ms(d, op) / 1e3);
    const double s = mean_ms(d, op) / 1e3;
    d.backend->synchronize();
    state.counters["kernel_us"] = 1e6 * s;
    state.counters["gbps"] = cost.bytes / s / 1e9;
    state.counters["tflops"] = cost.flops / s / 1e12;
    state.counters["roofline_fraction"] =
        std::max(cost.bytes / kCopyBytesPerS, cost.flops / cost.peak_flops) / s;
    state.SetBytesProcessed(static_cast<int64_t>(cost.bytes) *
                            static_cast<int64_t>(state.iterations()));
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("not run: ") + e.what()).c_str());
  }
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

double u(uint64_t x) { return static_cast<double>(x); }
uint64_t arg(const benchmark::State& state, int i) { return static_cast<uint64_t>(state.range(i)); }

ModelConfig mhc_config(uint64_t h, uint64_t r) {
  ModelConfig c;
  c.hidden_size = h;
  c.hc_mult = kMhc;
  c.hc_lowrank = r;
  return c;
}

// Streams of unit scale, small mixing weights (the comb logits stay O(1)).
template <class Op>
void fill_streams(Device& d, const Op& op, uint64_t seed) {
  upload_tiled(d, op.streams, f32_tile(op.streams.elements(), seed, 2.0f));
}

constexpr uint64_t kMaxTokens = 8192;  // pre, head, post, expand: 64, 1024, 8192 tokens

// ---------------------------------------------------------------- pre and head

void BM_CudaMhcPre(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1);
    const ModelConfig c = mhc_config(h, 0);
    MhcPreOp op = MhcPreOp::make(c, T);
    const uint64_t pool = oracle::place_in_pool({&op.fn, &op.scale, &op.bias});
    MhcPreOp big = MhcPreOp::make(c, kMaxTokens);
    big.fn = op.fn;
    big.scale = op.scale;
    big.bias = op.bias;
    use_workspace(d, "pre/" + std::to_string(h), big.accesses(), pool, [&] {
      fill_streams(d, big, 1);
      upload_tiled(d, big.fn, f32_tile(big.fn.elements(), 2, 0.02f));
      upload_tiled(d, big.scale, std::vector<float>{0.5f, 0.5f, 1.0f});
      upload_tiled(d, big.bias, f32_tile(big.bias.elements(), 3, 0.5f));
    });
    const auto& s = op.shape();
    const Cost cost{u(op.streams.bytes() + op.fn.bytes() + op.bias.bytes() + op.post.bytes() +
                      op.comb.bytes() + op.block_in.bytes()),
                    2.0 * u(T) * u(s.mix) * u(s.hc * s.h)};
    run_timed(state, d, cost, [&] { benchmark::DoNotOptimize(d.backend->mhc_pre(d.ws, op)); });
  });
}

void BM_CudaMhcHead(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1);
    const ModelConfig c = mhc_config(h, 0);
    MhcHeadOp op = MhcHeadOp::make(c, T);
    const uint64_t pool = oracle::place_in_pool({&op.fn, &op.scale, &op.bias});
    MhcHeadOp big = MhcHeadOp::make(c, kMaxTokens);
    big.fn = op.fn;
    big.scale = op.scale;
    big.bias = op.bias;
    use_workspace(d, "head/" + std::to_string(h), big.accesses(), pool, [&] {
      fill_streams(d, big, 4);
      upload_tiled(d, big.fn, f32_tile(big.fn.elements(), 5, 0.02f));
      upload_tiled(d, big.scale, std::vector<float>{0.5f});
      upload_tiled(d, big.bias, f32_tile(big.bias.elements(), 6, 0.5f));
    });
    const auto& s = op.shape();
    const Cost cost{u(op.streams.bytes() + op.fn.bytes() + op.bias.bytes() + op.output.bytes()),
                    2.0 * u(T) * u(s.hc) * u(s.hc * s.h)};
    run_timed(state, d, cost, [&] { benchmark::DoNotOptimize(d.backend->mhc_head(d.ws, op)); });
  });
}

void token_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t h : {4096, 7168})
    for (int64_t tokens : {64, 1024, 8192}) b->Args({tokens, h});
  b->ArgNames({"tokens", "hidden"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_CudaMhcPre)->Apply(token_shapes);
BENCHMARK(BM_CudaMhcHead)->Apply(token_shapes);

// ---------------------------------------------------------------- post and expand

void BM_CudaMhcPost(benchmark::State& state, bool lowrank) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1);
    const ModelConfig c = mhc_config(h, lowrank ? kRank : 0);
    const MhcPostOp op = MhcPostOp::make(c, T);
    const MhcPostOp big = MhcPostOp::make(c, kMaxTokens);
    use_workspace(
        d, std::string("post/") + (lowrank ? "lowrank/" : "sinkhorn/") + std::to_string(h),
        big.accesses(), 0, [&] {
          fill_streams(d, big, 7);
          upload_tiled(d, big.post, f32_tile(big.post.elements(), 8, 1.0f));
          // comb = 1/hc everywhere: doubly stochastic, so repeated in-place calls
          // keep the streams bounded (they grow at most linearly in the calls).
          if (!lowrank)
            upload_tiled(d, big.comb, std::vector<float>(big.comb.elements(), 1.0f / kMhc));
          upload_tiled(d, big.block_out, bf16_tile(big.block_out.elements(), 10, 1.0f));
        });
    const uint64_t comb = lowrank ? 0 : op.comb.bytes();
    const Cost cost{u(2 * op.streams.bytes() + op.post.bytes() + comb + op.block_out.bytes()),
                    2.0 * u(T) * u(kMhc) * u(h) * (lowrank ? 1.0 : u(kMhc) + 1.0)};
    run_timed(state, d, cost, [&] { d.backend->mhc_post(d.ws, op); });
  });
}

BENCHMARK_CAPTURE(BM_CudaMhcPost, sinkhorn, false)->Apply(token_shapes);
BENCHMARK_CAPTURE(BM_CudaMhcPost, lowrank, true)->Apply(token_shapes);

void BM_CudaMhcExpand(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1);
    const ModelConfig c = mhc_config(h, 0);
    const MhcExpandOp op = MhcExpandOp::make(c, T);
    const MhcExpandOp big = MhcExpandOp::make(c, kMaxTokens);
    use_workspace(d, "expand/" + std::to_string(h), big.accesses(), 0,
                  [&] { upload_tiled(d, big.input, bf16_tile(big.input.elements(), 11, 1.0f)); });
    const Cost cost{u(op.input.bytes() + op.streams.bytes()), 0.0};
    run_timed(state, d, cost, [&] { d.backend->mhc_expand(d.ws, op); });
  });
}

BENCHMARK(BM_CudaMhcExpand)->Apply(token_shapes);

// ---------------------------------------------------------------- low-rank chains

void BM_CudaMhcLowRankSplit(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1);
    const ModelConfig c = mhc_config(h, kRank);
    using Stage = MhcLowRankSplitOp::Stage;
    MhcLowRankSplitOp norm = MhcLowRankSplitOp::make(Stage::norm, c, T);
    MhcLowRankSplitOp down = MhcLowRankSplitOp::make(Stage::down, c, T);
    MhcLowRankSplitOp collapse = MhcLowRankSplitOp::make(Stage::collapse, c, T);
    const uint64_t pool = oracle::place_in_pool({&norm.norm_w, &norm.w_down_inject, &norm.w_up});
    for (MhcLowRankSplitOp* op : {&down, &collapse}) {
      op->norm_w = norm.norm_w;
      op->w_down_inject = norm.w_down_inject;
      op->w_up = norm.w_up;
    }
    std::vector<Access> all;
    for (const auto* op : {&norm, &down, &collapse}) append(all, *op);
    use_workspace(d, "split/" + std::to_string(T) + "/" + std::to_string(h), all, pool, [&] {
      fill_streams(d, norm, 12);
      upload_tiled(d, norm.norm_w, f32_tile(norm.norm_w.elements(), 13, 0.1f));
      upload_tiled(d, norm.w_down_inject, f32_tile(norm.w_down_inject.elements(), 14, 0.02f));
      upload_tiled(d, norm.w_up, f32_tile(norm.w_up.elements(), 15, 0.2f));
    });
    const uint64_t W = kMhc * h;
    const Cost cost{u(norm.streams.bytes() + norm.norm_w.bytes() + norm.w_down_inject.bytes() +
                      norm.w_up.bytes() + collapse.block_in.bytes() + down.post.bytes()),
                    2.0 * u(T) * u(W) * u(kRank + kMhc) + 2.0 * u(T) * u(W) * u(kRank)};
    run_timed(state, d, cost, [&] {
      benchmark::DoNotOptimize(d.backend->mhc_lowrank_split(d.ws, norm));
      d.backend->mhc_lowrank_split(d.ws, down);
      d.backend->mhc_lowrank_split(d.ws, collapse);
    });
  });
}

BENCHMARK(BM_CudaMhcLowRankSplit)
    ->Args({1, 4096})
    ->Args({64, 4096})
    ->Args({1, 7168})
    ->Args({64, 7168})
    ->ArgNames({"tokens", "hidden"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_CudaMhcLowRankSlab(benchmark::State& state) {
  with_device(state, [&](Device& d) {
    const uint64_t T = arg(state, 0), h = arg(state, 1);
    const ModelConfig c = mhc_config(h, kRank);
    using Stage = MhcLowRankSlabOp::Stage;
    std::vector<MhcLowRankSlabOp> ops;
    for (Stage s : {Stage::norm, Stage::down, Stage::inject, Stage::up, Stage::collapse})
      ops.push_back(MhcLowRankSlabOp::make(s, c, T, 0, T));
    MhcLowRankSlabOp& first = ops[0];
    const uint64_t pool =
        oracle::place_in_pool({&first.norm_w, &first.w_down, &first.w_inject, &first.w_up});
    for (MhcLowRankSlabOp& op : ops) {
      op.norm_w = first.norm_w;
      op.w_down = first.w_down;
      op.w_inject = first.w_inject;
      op.w_up = first.w_up;
    }
    std::vector<Access> all;
    for (const auto& op : ops) append(all, op);
    use_workspace(d, "slab/" + std::to_string(T) + "/" + std::to_string(h), all, pool, [&] {
      fill_streams(d, first, 16);
      upload_tiled(d, first.norm_w, f32_tile(first.norm_w.elements(), 17, 0.1f));
      upload_tiled(d, first.w_down, bf16_tile(first.w_down.elements(), 18, 0.02f));
      upload_tiled(d, first.w_inject, bf16_tile(first.w_inject.elements(), 19, 0.02f));
      upload_tiled(d, first.w_up, bf16_tile(first.w_up.elements(), 20, 0.2f));
    });
    const uint64_t W = kMhc * h;
    // Compulsory: streams in, weights, block input and post out (intermediates are scratch).
    const Cost cost{u(first.streams.bytes() + first.norm_w.bytes() + first.w_down.bytes() +
                      first.w_inject.bytes() + first.w_up.bytes() + ops[4].block_in.bytes() +
                      ops[4].post.bytes()),
                    2.0 * u(T) * u(W) * u(2 * kRank + kMhc), kBf16FlopsPerS};
    run_timed(state, d, cost, [&] {
      for (const auto& op : ops) benchmark::DoNotOptimize(d.backend->mhc_lowrank_slab(d.ws, op));
    });
  });
}

BENCHMARK(BM_CudaMhcLowRankSlab)
    ->Args({1024, 4096})
    ->Args({2048, 4096})
    ->Args({1024, 7168})
    ->Args({2048, 7168})
    ->ArgNames({"tokens", "hidden"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bufferlab
