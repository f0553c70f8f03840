// Google Benchmark: the CPU mHC ops (docs/spec/numerics.md §3–§4, ops/mhc.h) against two baselines
// measured in the same run — a naive single-thread scalar loop of the same math and storage
// roundings, and this machine's copy bandwidth (an OpenMP memcpy of the stream bytes). Not
// pass/fail.
//
//   BM_MhcPreCpu           Backend::mhc_pre (Sinkhorn form, 20 iterations)
//   BM_MhcPostCpu          Backend::hc_post, Sinkhorn form, in place on the streams
//   BM_MhcHeadCpu          Backend::mhc_head
//   BM_MhcLowRankSplitCpu  the split path's three stages (norm, down, collapse), T = 64
//   BM_MhcLowRankSlabCpu   one GEMM-path slab's five stages (norm, down, inject, up,
//                          collapse), T = 2048
// Shapes: hc = 4, h = 2048 (hc·h = 8192 stream values per token), r = 16 for the low-rank
// form; T = 64 (decode) and 1024 (prefill) for pre / post / head.
//
// Traffic counted per call: the T·hc·h·4 stream bytes the op reads (post also writes them,
// pre/head also read the weights: the count is the stream read alone, the part that scales
// with T). Counters:
//   bytes_per_second   stream bytes per second
//   copy_fraction      memcpy time of the same bytes / ours (1.0 = reading the streams as fast
//                      as a copy moves them)
//   speedup_vs_naive   naive time / ours; naive_us the naive loop's time per call
// Each ratio compares timings taken the same way, back to back (seconds_per_call), so a busy
// machine slows both alike; the slowest naive loops (T = 1024 pre, the slab) are one cold call.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_rig.h"
#include "bench_timing.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/pool_placement.h"
#include "cpu_backend.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using bench::copy_seconds;
using bench::sigmoidf;
using bench::siluf;

constexpr uint64_t kMhc = 4, kHidden = 2048, kRank = 16;

// ---------------------------------------------------------------- inputs and workspaces

// Seeded inputs: the tests' generator (tests/support/seeded_values.h), one for the project.
using testing::seeded_bf16_values;
using testing::seeded_values;

ModelConfig config(uint64_t r = 0) {
  ModelConfig c;
  c.hidden_size = kHidden;
  c.vocab_size = 16;
  c.hc_mult = kMhc;
  c.hc_lowrank = r;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  return c;
}

uint64_t stream_bytes(uint64_t tokens) { return tokens * kMhc * kHidden * 4; }

// The benchmark of `ours` against the naive loop on the same workspace
// (bench::time_against_naive; naive_s: its time at this T), then the stream traffic.
template <class Ours, class Naive>
void time_against_naive(benchmark::State& state, uint64_t tokens, std::optional<double>& naive_s,
                        Ours ours, Naive naive, bool warm_up = true) {
  const auto t = bench::time_against_naive(state, naive_s, ours, naive, warm_up);
  if (!t) return;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream_bytes(tokens)));
  state.counters["copy_fraction"] = copy_seconds(stream_bytes(tokens)) / t->own;
  state.counters["threads"] = omp_get_max_threads();
}

// ---------------------------------------------------------------- naive loops (one thread)

// 2^-max(e, 0) for max|x| = m·2^e (the huge-stream scale of ops/mhc.h), one element at a time.
float naive_inverse_scale(const float* x, uint64_t n) {
  float m = 0.0f;
  for (uint64_t k = 0; k < n; ++k) m = std::max(m, std::fabs(x[k]));
  int e = 0;
  (void)std::frexp(m, &e);
  return e > 0 ? std::ldexp(1.0f, -e) : 1.0f;
}

// r·(row·x) for `rows` rows of w [rows, K] over one token, the flattened RMS first.
void naive_mix(const float* x, uint64_t K, const float* w, uint64_t rows, float eps, float* out) {
  const float s = naive_inverse_scale(x, K);
  float ss = 0.0f;
  for (uint64_t k = 0; k < K; ++k) ss += (x[k] * s) * (x[k] * s);
  const float rs = 1.0f / std::sqrt(ss / static_cast<float>(K) + eps * s * s);
  for (uint64_t m = 0; m < rows; ++m) {
    float acc = 0.0f;
    for (uint64_t k = 0; k < K; ++k) acc += w[m * K + k] * (x[k] * s);
    out[m] = rs * acc;
  }
}

void naive_sinkhorn(float* c, uint64_t hc, uint64_t iters, float eps) {
  for (uint64_t i = 0; i < hc; ++i) {
    float m = c[i * hc], sum = 0.0f;
    for (uint64_t j = 1; j < hc; ++j) m = std::max(m, c[i * hc + j]);
    for (uint64_t j = 0; j < hc; ++j) sum += (c[i * hc + j] = std::exp(c[i * hc + j] - m));
    for (uint64_t j = 0; j < hc; ++j) c[i * hc + j] = c[i * hc + j] / sum + eps;
  }
  auto cols = [&](float e) {
    for (uint64_t j = 0; j < hc; ++j) {
      float sum = 0.0f;
      for (uint64_t i = 0; i < hc; ++i) sum += c[i * hc + j];
      for (uint64_t i = 0; i < hc; ++i) c[i * hc + j] /= e + sum;
    }
  };
  cols(eps);
  for (uint64_t t = 1; t < iters; ++t) {
    for (uint64_t i = 0; i < hc; ++i) {
      float sum = 0.0f;
      for (uint64_t j = 0; j < hc; ++j) sum += c[i * hc + j];
      for (uint64_t j = 0; j < hc; ++j) c[i * hc + j] /= eps + sum;
    }
    cols(eps);
  }
  cols(0.0f);
}

// out[d] = Σ_i pre[i]·x[i·h + d] over one token's hc streams, stored as BF16.
void naive_weighted_sum(const float* x, const float* pre, uint64_t hc, uint64_t h, uint16_t* out) {
  for (uint64_t d = 0; d < h; ++d) {
    float y = 0.0f;
    for (uint64_t i = 0; i < hc; ++i) y += pre[i] * x[i * h + d];
    out[d] = f32_to_bf16_bits(y);
  }
}

void naive_pre(const Workspace& ws, const MhcPreOp& op) {
  const MhcPreOp::Bound b = op.bind(ws);
  const auto& s = op.shape();
  const uint64_t hc = s.hc, h = s.h, K = hc * h;
  const float eps = static_cast<float>(op.rms_eps), hc_eps = static_cast<float>(op.hc_eps);
  std::vector<float> m(s.mix), pre(hc);
  for (uint64_t t = 0; t < s.rows; ++t) {
    const float* x = b.streams + t * K;
    naive_mix(x, K, b.fn, s.mix, eps, m.data());
    for (uint64_t i = 0; i < hc; ++i) {
      pre[i] = sigmoidf(m[i] * b.scale[0] + b.bias[i]) + hc_eps;
      b.post[t * hc + i] = 2.0f * sigmoidf(m[hc + i] * b.scale[1] + b.bias[hc + i]);
    }
    float* c = b.comb + t * hc * hc;
    for (uint64_t k = 0; k < hc * hc; ++k) c[k] = m[2 * hc + k] * b.scale[2] + b.bias[2 * hc + k];
    naive_sinkhorn(c, hc, s.iters, hc_eps);
    naive_weighted_sum(x, pre.data(), hc, h, b.block_in + t * h);
  }
}

void naive_head(const Workspace& ws, const MhcHeadOp& op) {
  const MhcHeadOp::Bound b = op.bind(ws);
  const auto& s = op.shape();
  const uint64_t hc = s.hc, h = s.h, K = hc * h;
  std::vector<float> pre(hc);
  for (uint64_t t = 0; t < s.rows; ++t) {
    const float* x = b.streams + t * K;
    naive_mix(x, K, b.fn, hc, static_cast<float>(op.rms_eps), pre.data());
    for (uint64_t i = 0; i < hc; ++i)
      pre[i] = sigmoidf(pre[i] * b.scale[0] + b.bias[i]) + static_cast<float>(op.hc_eps);
    naive_weighted_sum(x, pre.data(), hc, h, b.output + t * h);
  }
}

// In place: each column's hc inputs are loaded before any output of it is written.
void naive_post(const Workspace& ws, const MhcPostOp& op) {
  const MhcPostOp::Bound b = op.bind(ws);
  const auto& s = op.shape();
  const uint64_t hc = s.hc, h = s.h;
  float x[kMaxMhcMult];
  for (uint64_t t = 0; t < s.rows; ++t)
    for (uint64_t d = 0; d < h; ++d) {
      for (uint64_t i = 0; i < hc; ++i) x[i] = b.streams[(t * hc + i) * h + d];
      const float bo = bf16_bits_to_f32(b.block_out[t * h + d]);
      for (uint64_t j = 0; j < hc; ++j) {
        float acc = b.post[t * hc + j] * bo;
        for (uint64_t i = 0; i < hc; ++i) acc += b.comb[(t * hc + i) * hc + j] * x[i];
        b.out[(t * hc + j) * h + d] = acc;
      }
    }
}

// Per-stream RMS norm of one token into out via store(k, value).
template <class Store>
void naive_norm(const float* x, const float* w, uint64_t hc, uint64_t h, float eps, Store store) {
  for (uint64_t i = 0; i < hc; ++i) {
    const float* xi = x + i * h;
    const float s = naive_inverse_scale(xi, h);
    float ss = 0.0f;
    for (uint64_t d = 0; d < h; ++d) ss += (xi[d] * s) * (xi[d] * s);
    const float rs = 1.0f / std::sqrt(ss / static_cast<float>(h) + eps * s * s);
    for (uint64_t d = 0; d < h; ++d) store(i * h + d, ((xi[d] * s) * rs) * (1.0f + w[i * h + d]));
  }
}

// ---------------------------------------------------------------- Sinkhorn form

struct PreSetup {
  MhcPreOp pre;
  MhcPostOp post;
  MhcHeadOp head;
  std::optional<testing::Rig> rig;  // holds the ops' footprint, poisoned
};

// One workspace per T holding the pre, post and head operands (weights placed one after the
// other); comb = 1/hc everywhere so the in-place post keeps the streams bounded.
std::unique_ptr<PreSetup> make_pre_setup(uint64_t tokens) {
  auto s = std::make_unique<PreSetup>();
  const ModelConfig c = config();
  s->pre = MhcPreOp::make(c, tokens);
  s->post = MhcPostOp::make(c, tokens);
  s->head = MhcHeadOp::make(c, tokens);
  const uint64_t pool = oracle::place_in_pool(
      {&s->pre.fn, &s->pre.scale, &s->pre.bias, &s->head.fn, &s->head.scale, &s->head.bias});
  s->rig.emplace(
      testing::cpu_backend(),
      std::vector<std::vector<Access>>{s->pre.accesses(), s->post.accesses(), s->head.accesses()},
      pool);
  const uint64_t K = kMhc * kHidden, m = s->pre.shape().mix;
  const auto fn_scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(K)));
  s->rig->put(s->pre.streams, seeded_values(tokens * K, 1, 1.0f));
  s->rig->put(s->pre.fn, seeded_values(m * K, 2, fn_scale));
  s->rig->put(s->pre.scale, std::vector<float>{0.8f, 1.1f, 1.5f});
  s->rig->put(s->pre.bias, seeded_values(m, 3, 0.5f));
  s->rig->put(s->head.fn, seeded_values(kMhc * K, 4, fn_scale));
  s->rig->put(s->head.scale, std::vector<float>{0.9f});
  s->rig->put(s->head.bias, seeded_values(kMhc, 5, 0.5f));
  s->rig->put(s->post.post, seeded_values(tokens * kMhc, 6, 0.5f, 1.0f));
  s->rig->put(s->post.comb, std::vector<float>(tokens * kMhc * kMhc, 1.0f / kMhc));
  s->rig->put(s->post.block_out, seeded_bf16_values(tokens * kHidden, 7, 0.01f));
  return s;
}

PreSetup& pre_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<PreSetup>> cache;
  return bench::cached_setup(cache, tokens, [&] { return make_pre_setup(tokens); });
}

// Our op on its Rig as the benchmarks time it (the diagnostics kept alive).
void run_ours(Backend& b, const Workspace& ws, const MhcPreOp& op) {
  benchmark::DoNotOptimize(b.mhc_pre(ws, op));
}
void run_ours(Backend& b, const Workspace& ws, const MhcPostOp& op) { b.mhc_post(ws, op); }
void run_ours(Backend& b, const Workspace& ws, const MhcHeadOp& op) {
  benchmark::DoNotOptimize(b.mhc_head(ws, op));
}

// The benchmark of one Sinkhorn-form op (s.*op) at T = range(0) against its naive loop; the
// naive times are cached per Op, one benchmark each.
template <class Op>
void time_sinkhorn_form(benchmark::State& state, Op PreSetup::*op,
                        void (*naive)(const Workspace&, const Op&), bool warm_up = true) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  PreSetup& s = pre_setup(tokens);
  static std::map<uint64_t, std::optional<double>> naive_s;
  time_against_naive(
      state, tokens, naive_s[tokens], [&] { run_ours(*s.rig->backend, s.rig->ws, s.*op); },
      [&] { naive(s.rig->ws, s.*op); }, warm_up);
}

void BM_MhcPreCpu(benchmark::State& state) {
  time_sinkhorn_form(state, &PreSetup::pre, naive_pre, state.range(0) < 1024);
}
void BM_MhcPostCpu(benchmark::State& state) {
  time_sinkhorn_form(state, &PreSetup::post, naive_post);
}
void BM_MhcHeadCpu(benchmark::State& state) {
  time_sinkhorn_form(state, &PreSetup::head, naive_head);
}

// Every benchmark here: the argument is T, timed by the wall clock.
void tokens_real_time(benchmark::internal::Benchmark* b) { b->ArgName("tokens")->UseRealTime(); }

void token_shapes(benchmark::internal::Benchmark* b) {
  tokens_real_time(b->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond));
}

BENCHMARK(BM_MhcPreCpu)->Apply(token_shapes);
BENCHMARK(BM_MhcPostCpu)->Apply(token_shapes);
BENCHMARK(BM_MhcHeadCpu)->Apply(token_shapes);

// ---------------------------------------------------------------- low-rank form

using SplitOp = MhcLowRankSplitOp;
using SlabOp = MhcLowRankSlabOp;

// One low-rank form's stages and a Rig holding their footprint (poisoned).
template <class Op>
struct LowRankSetup {
  std::vector<Op> ops;
  std::optional<testing::Rig> rig;
};
using SplitSetup = LowRankSetup<SplitOp>;  // norm, down, collapse
using SlabSetup = LowRankSetup<SlabOp>;    // norm, down, inject, up, collapse of slab 0

// A seeded upload into op 0's `tensor` (bench::put_seeded).
template <class Op>
struct Fill {
  TensorRef Op::*tensor;
  uint64_t seed;
  float scale;
};

// Every stage reads op 0's `weights` (placed in the pool one after the other); `fills` go into
// op 0's tensors.
template <class Op>
std::unique_ptr<LowRankSetup<Op>> lowrank_setup(std::vector<Op> ops,
                                                std::initializer_list<TensorRef Op::*> weights,
                                                std::initializer_list<Fill<Op>> fills) {
  auto s = std::make_unique<LowRankSetup<Op>>();
  s->ops = std::move(ops);
  const Op& t = s->ops[0];
  uint64_t pool = 0;
  for (TensorRef Op::*w : weights) {
    pool = oracle::place_in_pool({&(s->ops[0].*w)}, pool);
    for (Op& op : s->ops) op.*w = t.*w;
  }
  s->rig.emplace(testing::cpu_backend(), bench::accesses_of(s->ops), pool);
  for (const Fill<Op>& f : fills) bench::put_seeded(*s->rig, t.*f.tensor, f.seed, f.scale);
  return s;
}

SplitSetup& split_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<SplitSetup>> cache;
  return bench::cached_setup(cache, tokens, [&] {
    std::vector<SplitOp> ops;
    for (SplitOp::Stage st : {SplitOp::Stage::norm, SplitOp::Stage::down, SplitOp::Stage::collapse})
      ops.push_back(SplitOp::make(st, config(kRank), tokens));
    return lowrank_setup(std::move(ops),
                         {&SplitOp::norm_w, &SplitOp::w_down_inject, &SplitOp::w_up},
                         {{&SplitOp::streams, 11, 2.0f},
                          {&SplitOp::norm_w, 12, 0.3f},
                          {&SplitOp::w_down_inject, 13, 0.02f},
                          {&SplitOp::w_up, 14, 0.4f}});
  });
}

void naive_split(SplitSetup& s) {
  const uint64_t T = s.ops[0].shape().rows, hc = kMhc, h = kHidden, r = kRank, K = hc * h;
  const MhcLowRankSplitOp::Bound n = s.ops[0].bind(s.rig->ws), d = s.ops[1].bind(s.rig->ws),
                                 c = s.ops[2].bind(s.rig->ws);
  const float hcf = static_cast<float>(hc), eps = static_cast<float>(s.ops[0].rms_eps);
  for (uint64_t t = 0; t < T; ++t) {
    float* normed = n.normed + t * K;
    naive_norm(n.streams + t * K, n.norm_w, hc, h, eps,
               [&](uint64_t k, float v) { normed[k] = v; });
    for (uint64_t j = 0; j < r + hc; ++j) {
      float acc = 0.0f;
      for (uint64_t k = 0; k < K; ++k) acc += d.w_down_inject[j * K + k] * normed[k];
      if (j < r)
        d.low[t * r + j] = siluf(acc / hcf);
      else
        d.post[t * hc + j - r] = 2.0f * sigmoidf(acc / hcf);
    }
    for (uint64_t e = 0; e < h; ++e) {
      float y = 0.0f;
      for (uint64_t i = 0; i < hc; ++i) {
        float up = 0.0f;
        for (uint64_t j = 0; j < r; ++j) up += c.w_up[(i * h + e) * r + j] * c.low[t * r + j];
        y += sigmoidf(up) * normed[i * h + e];
      }
      c.block_in[t * h + e] = f32_to_bf16_bits(y / hcf);
    }
  }
}

void run_ours(Backend& b, const Workspace& ws, const SplitOp& op) {
  benchmark::DoNotOptimize(b.mhc_lowrank_split(ws, op));
}
void run_ours(Backend& b, const Workspace& ws, const SlabOp& op) {
  benchmark::DoNotOptimize(b.mhc_lowrank_slab(ws, op));
}

// The benchmark of one low-rank form's stages at T = range(0) against its naive loop; the naive
// times are cached per Op, one benchmark each.
template <class Op>
void time_lowrank_form(benchmark::State& state, LowRankSetup<Op>& (*setup)(uint64_t),
                       void (*naive)(LowRankSetup<Op>&), bool warm_up) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  LowRankSetup<Op>& s = setup(tokens);
  static std::map<uint64_t, std::optional<double>> naive_s;
  time_against_naive(
      state, tokens, naive_s[tokens],
      [&] {
        for (const Op& op : s.ops) run_ours(*s.rig->backend, s.rig->ws, op);
      },
      [&] { naive(s); }, warm_up);
}

void BM_MhcLowRankSplitCpu(benchmark::State& state) {
  time_lowrank_form(state, split_setup, naive_split, true);
}

BENCHMARK(BM_MhcLowRankSplitCpu)->Arg(64)->Unit(benchmark::kMicrosecond)->Apply(tokens_real_time);

SlabSetup& slab_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<SlabSetup>> cache;
  return bench::cached_setup(cache, tokens, [&] {
    std::vector<SlabOp> ops;
    for (SlabOp::Stage st : {SlabOp::Stage::norm, SlabOp::Stage::down, SlabOp::Stage::inject,
                             SlabOp::Stage::up, SlabOp::Stage::collapse})
      ops.push_back(SlabOp::make(st, config(kRank), tokens, 0, tokens));
    return lowrank_setup(std::move(ops),
                         {&SlabOp::norm_w, &SlabOp::w_down, &SlabOp::w_inject, &SlabOp::w_up},
                         {{&SlabOp::streams, 21, 2.0f},
                          {&SlabOp::norm_w, 22, 0.3f},
                          {&SlabOp::w_down, 23, 0.02f},
                          {&SlabOp::w_inject, 24, 0.02f},
                          {&SlabOp::w_up, 25, 0.4f}});
  });
}

// The same stages one element at a time: BF16 operands widened per multiply, FP32 sums.
void naive_slab(SlabSetup& s) {
  const uint64_t T = s.ops[0].shape().rows, hc = kMhc, h = kHidden, r = kRank, K = hc * h;
  MhcLowRankSlabOp::Bound b[5];
  for (int i = 0; i < 5; ++i) b[i] = s.ops[static_cast<size_t>(i)].bind(s.rig->ws);
  const float hcf = static_cast<float>(hc), eps = static_cast<float>(s.ops[0].rms_eps);
  auto f = bf16_bits_to_f32;
  uint16_t* normed = b[0].normed;
  for (uint64_t t = 0; t < T; ++t)
    naive_norm(b[0].streams + t * K, b[0].norm_w, hc, h, eps,
               [&](uint64_t k, float v) { normed[t * K + k] = f32_to_bf16_bits(v); });
  for (uint64_t t = 0; t < T; ++t) {
    for (uint64_t j = 0; j < r; ++j) {
      float acc = 0.0f;
      for (uint64_t k = 0; k < K; ++k) acc += f(normed[t * K + k]) * f(b[1].w_down[j * K + k]);
      b[1].low[t * r + j] = f32_to_bf16_bits(siluf(acc / hcf));
    }
    for (uint64_t i = 0; i < hc; ++i) {
      float acc = 0.0f;
      for (uint64_t k = 0; k < K; ++k) acc += f(normed[t * K + k]) * f(b[2].w_inject[i * K + k]);
      b[2].inj_pre[t * hc + i] = f32_to_bf16_bits(acc);
    }
    for (uint64_t k = 0; k < K; ++k) {
      float acc = 0.0f;
      for (uint64_t j = 0; j < r; ++j) acc += f(b[1].low[t * r + j]) * f(b[3].w_up[k * r + j]);
      b[3].up_pre[t * K + k] = f32_to_bf16_bits(acc);
    }
    for (uint64_t d = 0; d < h; ++d) {
      float y = 0.0f;
      for (uint64_t i = 0; i < hc; ++i)
        y += sigmoidf(f(b[3].up_pre[t * K + i * h + d])) * f(normed[t * K + i * h + d]);
      b[4].block_in[t * h + d] = f32_to_bf16_bits(y / hcf);
    }
    for (uint64_t i = 0; i < hc; ++i)
      b[4].post[t * hc + i] = 2.0f * sigmoidf(f(b[2].inj_pre[t * hc + i]) / hcf);
  }
}

void BM_MhcLowRankSlabCpu(benchmark::State& state) {
  time_lowrank_form(state, slab_setup, naive_slab, false);
}

BENCHMARK(BM_MhcLowRankSlabCpu)->Arg(2048)->Unit(benchmark::kMillisecond)->Apply(tokens_real_time);

}  // namespace
}  // namespace bufferlab
