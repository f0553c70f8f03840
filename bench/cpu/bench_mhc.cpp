// Google Benchmark: the CPU mHC ops (numerics §3–§4, ops/mhc.h) against two baselines
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

using bench::cached_seconds;
using bench::copy_seconds;
using bench::first_call_or_skip;
using bench::seconds_per_call;
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

void report(benchmark::State& state, uint64_t tokens, double own, double naive) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream_bytes(tokens)));
  state.counters["copy_fraction"] = copy_seconds(stream_bytes(tokens)) / own;
  state.counters["speedup_vs_naive"] = naive / own;
  state.counters["naive_us"] = 1e6 * naive;
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
    for (uint64_t d = 0; d < h; ++d) {
      float y = 0.0f;
      for (uint64_t i = 0; i < hc; ++i) y += pre[i] * x[i * h + d];
      b.block_in[t * h + d] = f32_to_bf16_bits(y);
    }
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
    for (uint64_t d = 0; d < h; ++d) {
      float y = 0.0f;
      for (uint64_t i = 0; i < hc; ++i) y += pre[i] * x[i * h + d];
      b.output[t * h + d] = f32_to_bf16_bits(y);
    }
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
PreSetup& pre_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<PreSetup>> cache;
  auto& s = cache[tokens];
  if (s) return *s;
  s = std::make_unique<PreSetup>();
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
  return *s;
}

void BM_MhcPreCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  PreSetup& s = pre_setup(tokens);
  auto ours = [&] { benchmark::DoNotOptimize(s.rig->backend->mhc_pre(s.rig->ws, s.pre)); };
  if (!first_call_or_skip(state, ours)) return;
  for (auto _ : state) ours();
  static std::map<uint64_t, double> naive_cache;
  const double naive = cached_seconds(naive_cache, tokens, [&] {
    return seconds_per_call([&] { naive_pre(s.rig->ws, s.pre); }, 0.1, tokens < 1024);
  });
  report(state, tokens, seconds_per_call(ours), naive);
}

void BM_MhcPostCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  PreSetup& s = pre_setup(tokens);
  auto ours = [&] { s.rig->backend->mhc_post(s.rig->ws, s.post); };
  if (!first_call_or_skip(state, ours)) return;
  for (auto _ : state) ours();
  static std::map<uint64_t, double> naive_cache;
  const double naive = cached_seconds(naive_cache, tokens, [&] {
    return seconds_per_call([&] { naive_post(s.rig->ws, s.post); });
  });
  report(state, tokens, seconds_per_call(ours), naive);
}

void BM_MhcHeadCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  PreSetup& s = pre_setup(tokens);
  auto ours = [&] { benchmark::DoNotOptimize(s.rig->backend->mhc_head(s.rig->ws, s.head)); };
  if (!first_call_or_skip(state, ours)) return;
  for (auto _ : state) ours();
  static std::map<uint64_t, double> naive_cache;
  const double naive = cached_seconds(naive_cache, tokens, [&] {
    return seconds_per_call([&] { naive_head(s.rig->ws, s.head); });
  });
  report(state, tokens, seconds_per_call(ours), naive);
}

void token_shapes(benchmark::internal::Benchmark* b) {
  b->Arg(64)->Arg(1024)->ArgName("tokens")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_MhcPreCpu)->Apply(token_shapes);
BENCHMARK(BM_MhcPostCpu)->Apply(token_shapes);
BENCHMARK(BM_MhcHeadCpu)->Apply(token_shapes);

// ---------------------------------------------------------------- low-rank form

using SplitStage = MhcLowRankSplitOp::Stage;
using SlabStage = MhcLowRankSlabOp::Stage;

struct SplitSetup {
  std::vector<MhcLowRankSplitOp> ops;  // norm, down, collapse
  std::optional<testing::Rig> rig;     // holds the ops' footprint, poisoned
};

SplitSetup& split_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<SplitSetup>> cache;
  auto& s = cache[tokens];
  if (s) return *s;
  s = std::make_unique<SplitSetup>();
  const ModelConfig c = config(kRank);
  for (SplitStage st : {SplitStage::norm, SplitStage::down, SplitStage::collapse})
    s->ops.push_back(MhcLowRankSplitOp::make(st, c, tokens));
  MhcLowRankSplitOp& t = s->ops[0];
  const uint64_t pool = oracle::place_in_pool({&t.norm_w, &t.w_down_inject, &t.w_up});
  for (auto& op : s->ops) {
    op.norm_w = t.norm_w;
    op.w_down_inject = t.w_down_inject;
    op.w_up = t.w_up;
  }
  s->rig.emplace(testing::cpu_backend(),
                 std::vector<std::vector<Access>>{s->ops[0].accesses(), s->ops[1].accesses(),
                                                  s->ops[2].accesses()},
                 pool);
  const uint64_t K = kMhc * kHidden;
  s->rig->put(t.streams, seeded_values(tokens * K, 11, 2.0f));
  s->rig->put(t.norm_w, seeded_values(K, 12, 0.3f));
  s->rig->put(t.w_down_inject, seeded_values((kRank + kMhc) * K, 13, 0.02f));
  s->rig->put(t.w_up, seeded_values(K * kRank, 14, 0.4f));
  return *s;
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

void BM_MhcLowRankSplitCpu(benchmark::State& state) {
  const auto tokens = static_cast<uint64_t>(state.range(0));
  SplitSetup& s = split_setup(tokens);
  auto ours = [&] {
    for (const auto& op : s.ops)
      benchmark::DoNotOptimize(s.rig->backend->mhc_lowrank_split(s.rig->ws, op));
  };
  if (!first_call_or_skip(state, ours)) return;
  for (auto _ : state) ours();
  static std::map<uint64_t, double> naive_cache;
  const double naive = cached_seconds(naive_cache, tokens,
                                      [&] { return seconds_per_call([&] { naive_split(s); }); });
  report(state, tokens, seconds_per_call(ours), naive);
}

BENCHMARK(BM_MhcLowRankSplitCpu)
    ->Arg(64)
    ->ArgName("tokens")
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

struct SlabSetup {
  std::vector<MhcLowRankSlabOp> ops;  // norm, down, inject, up, collapse of slab 0
  std::optional<testing::Rig> rig;    // holds the ops' footprint, poisoned
};

SlabSetup& slab_setup(uint64_t tokens) {
  static std::map<uint64_t, std::unique_ptr<SlabSetup>> cache;
  auto& s = cache[tokens];
  if (s) return *s;
  s = std::make_unique<SlabSetup>();
  const ModelConfig c = config(kRank);
  for (SlabStage st :
       {SlabStage::norm, SlabStage::down, SlabStage::inject, SlabStage::up, SlabStage::collapse})
    s->ops.push_back(MhcLowRankSlabOp::make(st, c, tokens, 0, tokens));
  MhcLowRankSlabOp& t = s->ops[0];
  const uint64_t pool = oracle::place_in_pool({&t.norm_w, &t.w_down, &t.w_inject, &t.w_up});
  for (auto& op : s->ops) {
    op.norm_w = t.norm_w;
    op.w_down = t.w_down;
    op.w_inject = t.w_inject;
    op.w_up = t.w_up;
  }
  s->rig.emplace(testing::cpu_backend(),
                 std::vector<std::vector<Access>>{s->ops[0].accesses(), s->ops[1].accesses(),
                                                  s->ops[2].accesses(), s->ops[3].accesses(),
                                                  s->ops[4].accesses()},
                 pool);
  const uint64_t K = kMhc * kHidden;
  s->rig->put(t.streams, seeded_values(tokens * K, 21, 2.0f));
  s->rig->put(t.norm_w, seeded_values(K, 22, 0.3f));
  s->rig->put(t.w_down, seeded_bf16_values(kRank * K, 23, 0.02f));
  s->rig->put(t.w_inject, seeded_bf16_values(kMhc * K, 24, 0.02f));
  s->rig->put(t.w_up, seeded_bf16_values(K * kRank, 25, 0.4f));
  return *s;
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
  const auto tokens = static_cast<uint64_t>(state.range(0));
  SlabSetup& s = slab_setup(tokens);
  auto ours = [&] {
    for (const auto& op : s.ops)
      benchmark::DoNotOptimize(s.rig->backend->mhc_lowrank_slab(s.rig->ws, op));
  };
  if (!first_call_or_skip(state, ours)) return;
  for (auto _ : state) ours();
  static std::map<uint64_t, double> naive_cache;
  const double naive = cached_seconds(
      naive_cache, tokens, [&] { return seconds_per_call([&] { naive_slab(s); }, 0.1, false); });
  report(state, tokens, seconds_per_call(ours), naive);
}

BENCHMARK(BM_MhcLowRankSlabCpu)
    ->Arg(2048)
    ->ArgName("tokens")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace bufferlab
