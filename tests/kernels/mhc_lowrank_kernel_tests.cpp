// The mHC low-rank pre step (docs/spec/numerics.md §4, core ops/mhc.h) on the backend under test
// (tests/support/backend_under_test.h): the split path (FP32 scratch and weights) and the slab
// (GEMM) path (BF16 weights and intermediates), every stage judged by the oracle on the
// stage's own stored inputs (oracle::judge_mhc_lowrank, the derived bounds of mhc_bounds.cpp)
// and the two paths' block inputs against each other under oracle::mhc_lowrank_path_bounds;
// the slab's normed is the BF16 store of the very FP32 value the split path keeps; on the CPU
// also each path's block input and post end to end against the exact FP32-weight definition
// under first-order chain bounds (and the two paths within their sum). Exact
// properties without a reference: a non-finite token is NaN in every output and counted once,
// other tokens bit-identical; per-stream ×2^100 (rms_eps = 0) normalises to the same bits; zero
// streams give block input +0 and post 2σ(0) = 1 exactly. On a backend other than the CPU each
// path also against the CPU's other path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend_under_test.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/oracle/pool_placement.h"
#include "cpu_backend.h"
#include "mhc_kernel_support.h"
#include "moe_kernel_support.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab {
namespace {

using testing::expect_passed;
using testing::KernelTest;
using testing::kInf;
using testing::kNaN;
using testing::mhc_config;
using testing::Rig;
using testing::same_bits;
using testing::seeded_values;
using namespace testing::cpu_roundoff;  // NOLINT(google-build-using-namespace)

using oracle::MhcLowRankPath;
using oracle::MhcLowRankRun;
using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using SplitStage = MhcLowRankSplitOp::Stage;

// Seeded model weights: norm_w in ±norm_scale, W_down and W_inject in ±2√(3/K), W_up in
// ±2√(3/r).
oracle::MhcLowRankWeights seeded_weights(uint64_t hc, uint64_t h, uint64_t r, uint64_t seed,
                                         float norm_scale = 0.3f) {
  const uint64_t K = hc * h;
  oracle::MhcLowRankWeights w;
  w.norm_w = seeded_values(K, seed, norm_scale);
  const auto down = static_cast<float>(2.0 * std::sqrt(3.0 / static_cast<double>(K)));
  w.w_down = seeded_values(r * K, seed + 1, down);
  w.w_inject = seeded_values(hc * K, seed + 2, down);
  w.w_up = seeded_values(K * r, seed + 3,
                         static_cast<float>(2.0 * std::sqrt(3.0 / static_cast<double>(r))));
  return w;
}

oracle::MhcLowRankDims dims_of(const ModelConfig& c, uint64_t rows) {
  return {rows, c.hc_mult, c.hidden_size, c.hc_lowrank, c.rms_norm_eps};
}

// The split path over all T tokens in one pass of its three stages (any T: the CPU's split
// kernels take T > 64 too), every stage's inputs read right before it ran and its outputs
// right after, as the oracle's harness records them.
MhcLowRankRun run_split(Backend& backend, const ModelConfig& c, uint64_t T,
                        const oracle::MhcLowRankInputs& in) {
  MhcLowRankSplitOp ops[3] = {MhcLowRankSplitOp::make(SplitStage::norm, c, T),
                              MhcLowRankSplitOp::make(SplitStage::down, c, T),
                              MhcLowRankSplitOp::make(SplitStage::collapse, c, T)};
  MhcLowRankSplitOp& t = ops[0];
  const uint64_t pool = oracle::place_in_pool({&t.norm_w, &t.w_down_inject, &t.w_up});
  for (auto& op : ops) {
    op.norm_w = t.norm_w;
    op.w_down_inject = t.w_down_inject;
    op.w_up = t.w_up;
  }
  Rig rig(backend, {ops[0].accesses(), ops[1].accesses(), ops[2].accesses()}, pool);
  Floats down_inject = in.weights.w_down;
  down_inject.insert(down_inject.end(), in.weights.w_inject.begin(), in.weights.w_inject.end());
  rig.put(t.streams, in.streams);
  rig.put(t.norm_w, in.weights.norm_w);
  rig.put(t.w_down_inject, down_inject);
  rig.put(t.w_up, in.weights.w_up);
  MhcLowRankRun run;
  run.path = MhcLowRankPath::split;
  run.dims = dims_of(c, T);
  run.norm.streams = rig.get<float>(t.streams);
  run.diagnostics.nonfinite_tokens += backend.mhc_lowrank_split(rig.ws, ops[0]).nonfinite_tokens;
  run.norm.normed.f32 = rig.get<float>(t.normed);
  run.down.normed.f32 = rig.get<float>(ops[1].normed);
  run.diagnostics.nonfinite_tokens += backend.mhc_lowrank_split(rig.ws, ops[1]).nonfinite_tokens;
  run.down.low.f32 = rig.get<float>(ops[1].low);
  run.down.post = rig.get<float>(ops[1].post);
  run.collapse.normed.f32 = rig.get<float>(ops[2].normed);
  run.collapse.low.f32 = rig.get<float>(ops[2].low);
  run.diagnostics.nonfinite_tokens += backend.mhc_lowrank_split(rig.ws, ops[2]).nonfinite_tokens;
  run.collapse.block_in = rig.get<uint16_t>(ops[2].block_in);
  return run;
}

// The GEMM path over T tokens in slabs of MhcGemmCarve::slab_rows (the oracle's harness).
MhcLowRankRun run_slab(Backend& backend, const ModelConfig& c, uint64_t T,
                       const oracle::MhcLowRankInputs& in) {
  const oracle::MhcLowRankPlan plan = oracle::plan_mhc_lowrank(c, T, MhcLowRankPath::slab);
  return oracle::run_mhc_lowrank(backend, oracle::allocate_mhc_footprint(backend, plan), plan, in);
}

MhcLowRankRun run_path(Backend& backend, const ModelConfig& c, uint64_t T, MhcLowRankPath path,
                       const oracle::MhcLowRankInputs& in) {
  return path == MhcLowRankPath::split ? run_split(backend, c, T, in) : run_slab(backend, c, T, in);
}

// The stored post of a path: the down stage's on the split path, the collapse's on the slab.
const Floats& post_of(const MhcLowRankRun& run) {
  return run.path == MhcLowRankPath::split ? run.down.post : run.collapse.post;
}

// ---- the CPU's end-to-end first-order bounds, on the oracle's exact values
//
// Besides the judge's per-stage checks, each path's stored block input and post are held to
// the exact FP32-weight definition (oracle::hc_lowrank, split precision, Mode::exact) under a
// first-order bound that carries every storage rounding of the path through the chain, each
// FP32 operation of the CPU kernels included (round to nearest; on the CPU only). Relative
// roundings θw of the weights and θs of the stored intermediates: BF16 slab u8, u8; FP32 split
// 0, 0 (u = 2^-24, u8 = 2^-8; 1.01 covers the products of first-order terms):
//   n:    (x̂·rs)·(1 + w): rs relative (γ_h + 3u)/2 + 2u, three products → e32 = that + 3u;
//         θn = e32 + θs(1 + e32) with the normed store.
//   z = W_down·n:  |Δz| ≤ ((1 + θn)(1 + θw)(1 + γ_K) − 1)·Σ|W n|   (same for inj = W_inject·n)
//   low = silu(z/hc): silu' ≤ 1.1, the division u, silu in FP32 4u, the store θs.
//   up = W_up·low: Σ|W_up|·Δlow·(1 + θw) + ((1 + θw)(1 + γ_r) − 1)·Σ|W_up·low|, the store θs.
//   y = (1/hc)·Σ_i σ(up)·n: Δσ = Δup/4 + 4uσ, times |n|(1 + θn), plus σ·θn·|n|, the γ_hc sum
//         and the 1/hc product (2u: 1/hc itself rounded for hc not a power of two).
//   post = 2σ(inj/hc): inj stored (θs), the division u, 2·Δσ.
// The stored BF16 y then adds u8·(|y| + Δy).
struct ChainBounds {
  std::vector<double> y, post;  // [T, h] (the stored BF16 value's), [T, hc]
};

// |Σ_k w[k]·v[k]| terms of one row: the signed sum and the sum of magnitudes.
std::pair<double, double> dot_and_magnitude(const float* w, const double* v, uint64_t n) {
  double z = 0.0, a = 0.0;
  for (uint64_t k = 0; k < n; ++k) {
    z += double{w[k]} * v[k];
    a += std::fabs(double{w[k]} * v[k]);
  }
  return {z, a};
}

ChainBounds chain_bounds(const oracle::MhcLowRankDims& d, const oracle::MhcLowRankWeights& w,
                         const oracle::MhcLowRankReference& ref, double theta_w, double theta_s) {
  const uint64_t hc = d.hc, h = d.h, r = d.r, K = hc * h;
  const double e32 = (gamma_u(static_cast<double>(h)) + 3 * kU) / 2 + 5 * kU;
  const double theta_n = e32 + theta_s * (1 + e32);
  const double dot_rel = (1 + theta_n) * (1 + theta_w) * (1 + gamma_u(static_cast<double>(K))) - 1;
  const double up_rel = (1 + theta_w) * (1 + gamma_u(static_cast<double>(r))) - 1;
  ChainBounds b;
  b.y.resize(d.rows * h);
  b.post.resize(d.rows * hc);
  std::vector<double> dlow(r);
  for (uint64_t t = 0; t < d.rows; ++t) {
    const double* n = ref.normed.data() + t * K;
    const double* low = ref.low.data() + t * r;
    for (uint64_t j = 0; j < r; ++j) {
      const auto [z, a] = dot_and_magnitude(w.w_down.data() + j * K, n, K);
      const double q = z / static_cast<double>(hc);
      const double dq = dot_rel * a / static_cast<double>(hc) + kU * std::fabs(q);
      const double e = 1.1 * dq + 4 * kU * std::fabs(low[j]);
      dlow[j] = kSecondOrder * (e + theta_s * (std::fabs(low[j]) + e));
    }
    for (uint64_t c = 0; c < h; ++c) {
      double dy = 0.0, mag = 0.0;
      for (uint64_t i = 0; i < hc; ++i) {
        const uint64_t k = i * h + c;
        const double up = ref.up_pre[t * K + k];
        double e = 0.0, a = 0.0;
        for (uint64_t j = 0; j < r; ++j) {
          a += std::fabs(double{w.w_up[k * r + j]} * low[j]);
          e += std::fabs(double{w.w_up[k * r + j]}) * dlow[j] * (1 + theta_w);
        }
        e += up_rel * a;
        e += theta_s * (std::fabs(up) + e);
        const double g = sigma(up), an = std::fabs(n[k]);
        mag += g * an;
        dy += sigmoid_error(up, e) * an * (1 + theta_n) + g * theta_n * an;
      }
      const double err = kSecondOrder * (dy + (gamma_u(static_cast<double>(hc)) + 2 * kU) * mag) /
                         static_cast<double>(hc);
      b.y[t * h + c] = err + kU8 * (std::fabs(ref.block_in[t * h + c]) + err);
    }
    for (uint64_t i = 0; i < hc; ++i) {
      const double inj = ref.inj_pre[t * hc + i];
      double e = dot_rel * dot_and_magnitude(w.w_inject.data() + i * K, n, K).second;
      e += theta_s * (std::fabs(inj) + e);
      const double q = inj / static_cast<double>(hc);
      b.post[t * hc + i] =
          kSecondOrder * 2 * sigmoid_error(q, e / static_cast<double>(hc) + kU * std::fabs(q));
    }
  }
  return b;
}

// Both CPU paths against the exact FP32-weight definition under their chain bounds, and
// against each other within the sum of the two (block input and post).
void expect_paths_within_chain_bounds(const oracle::MhcLowRankDims& d,
                                      const oracle::MhcLowRankInputs& in,
                                      const MhcLowRankRun& split, const MhcLowRankRun& slab) {
  const oracle::MhcLowRankReference ref = oracle::hc_lowrank(
      d.rows, d.hc, d.h, d.r, d.rms_eps, in.streams, in.weights, false, oracle::Mode::exact);
  const ChainBounds b32 = chain_bounds(d, in.weights, ref, 0.0, 0.0);
  const ChainBounds b16 = chain_bounds(d, in.weights, ref, kU8, kU8);
  for (uint64_t k = 0; k < d.rows * d.h; ++k) {
    const double s = testing::bf16_float(split.collapse.block_in[k]),
                 g = testing::bf16_float(slab.collapse.block_in[k]);
    EXPECT_LE(std::fabs(s - ref.block_in[k]), b32.y[k]) << "split y " << k;
    EXPECT_LE(std::fabs(g - ref.block_in[k]), b16.y[k]) << "slab y " << k;
    ASSERT_LE(std::fabs(s - g), b32.y[k] + b16.y[k]) << "y " << k;
  }
  for (uint64_t k = 0; k < d.rows * d.hc; ++k) {
    const double s = post_of(split)[k], g = post_of(slab)[k];
    EXPECT_LE(std::fabs(s - ref.post[k]), b32.post[k]) << "split post " << k;
    EXPECT_LE(std::fabs(g - ref.post[k]), b16.post[k]) << "slab post " << k;
    ASSERT_LE(std::fabs(s - g), b32.post[k] + b16.post[k]) << "post " << k;
  }
}

class MhcLowRankKernel : public KernelTest {
 protected:
  static oracle::BoundModel bounds() { return testing::bounds_for(on_cpu()); }

  // One pass on `path` judged stage by stage; on another backend the CPU's run of the same
  // inputs counts the same non-finite tokens. Returns {backend, cpu (empty on the CPU)}.
  static std::pair<MhcLowRankRun, MhcLowRankRun> run_judged(const ModelConfig& c, uint64_t rows,
                                                            MhcLowRankPath path,
                                                            const oracle::MhcLowRankInputs& in,
                                                            uint64_t seed) {
    SCOPED_TRACE(to_string(path));
    MhcLowRankRun got = run_path(backend(), c, rows, path, in);
    expect_passed(oracle::judge_mhc_lowrank(got, in, backend().name(), seed, bounds()));
    MhcLowRankRun cpu;
    if (!on_cpu()) {
      cpu = run_path(testing::cpu_backend(), c, rows, path, in);
      EXPECT_EQ(got.diagnostics.nonfinite_tokens, cpu.diagnostics.nonfinite_tokens);
    }
    return {std::move(got), std::move(cpu)};
  }

  // Both paths on the seeded inputs of the old hand tests: no non-finite token, the slab's
  // normed the BF16 store of the split's, every stage judged, the two block inputs within the
  // path bound; on the CPU also the chain bounds above.
  static void check_lowrank_case(uint64_t T, uint64_t hc, uint64_t h, uint64_t r, uint64_t seed) {
    SCOPED_TRACE("T=" + std::to_string(T) + " hc=" + std::to_string(hc) +
                 " h=" + std::to_string(h) + " r=" + std::to_string(r));
    const ModelConfig c = mhc_config(hc, h, r);
    const oracle::MhcLowRankInputs in{seeded_values(T * hc * h, seed, 2.0f),
                                      seeded_weights(hc, h, r, seed + 10)};
    const auto [split, split_cpu] = run_judged(c, T, MhcLowRankPath::split, in, seed);
    const auto [slab, slab_cpu] = run_judged(c, T, MhcLowRankPath::slab, in, seed);
    EXPECT_EQ(split.diagnostics.nonfinite_tokens, 0u);
    EXPECT_EQ(slab.diagnostics.nonfinite_tokens, 0u);
    const Floats& n32 = split.norm.normed.f32;
    const Bits& n16 = slab.norm.normed.bf16;
    ASSERT_EQ(n16.size(), n32.size());
    for (size_t k = 0; k < n32.size(); ++k) ASSERT_EQ(n16[k], f32_to_bf16_bits(n32[k])) << k;
    expect_passed(oracle::compare_mhc_lowrank_paths(dims_of(c, T), in, split.collapse.block_in,
                                                    slab.collapse.block_in, bounds()));
    if (on_cpu()) return expect_paths_within_chain_bounds(dims_of(c, T), in, split, slab);
    // Each path against the CPU's other path (the slab side's GEMM roundoff decides the model).
    expect_passed(oracle::compare_mhc_lowrank_paths(dims_of(c, T), in, split.collapse.block_in,
                                                    slab_cpu.collapse.block_in,
                                                    oracle::cpu_bounds()));
    expect_passed(oracle::compare_mhc_lowrank_paths(dims_of(c, T), in, split_cpu.collapse.block_in,
                                                    slab.collapse.block_in, bounds()));
  }
};

// ============================================================== seeded cases

// T = 70 crosses the GEMM's 64-row tile, K = 256 two 128-deep panels, r = 20 a partial tile.
TEST_F(MhcLowRankKernel, SplitAndSlabAgreeWithinBf16Bounds) {
  check_lowrank_case(70, 4, 64, 20, 30);
}

// m = 2100: two slabs (2048 + 52 rows) on one carve; hc = 3 (1/hc inexact), K = 288.
TEST_F(MhcLowRankKernel, TwoSlabsOnOneCarve) { check_lowrank_case(2100, 3, 96, 20, 31); }

TEST_F(MhcLowRankKernel, HcOneAndSixteen) {
  check_lowrank_case(5, 1, 40, 6, 32);
  check_lowrank_case(5, kMaxMhcMult, 8, 5, 33);
}

// ============================================================== the oracle's generated inputs

// T = 64: the largest split pass; the same 64 tokens also on the slab path, the two paths
// within the derived split-vs-slab bound (and, off the CPU, each against the CPU's other path).
TEST_F(MhcLowRankKernel, OracleSplitPathT64) {
  const ModelConfig c = mhc_config(4, 128, 16);
  const uint64_t rows = 64;
  const oracle::MhcLowRankInputs in = oracle::generate_mhc_lowrank_inputs(dims_of(c, rows), 41);
  const auto [gs, cs] = run_judged(c, rows, MhcLowRankPath::split, in, 41);
  const auto [gb, cb] = run_judged(c, rows, MhcLowRankPath::slab, in, 41);
  expect_passed(oracle::compare_mhc_lowrank_paths(dims_of(c, rows), in, gs.collapse.block_in,
                                                  gb.collapse.block_in, bounds()));
  if (on_cpu()) return;
  expect_passed(oracle::compare_mhc_lowrank_paths(dims_of(c, rows), in, gs.collapse.block_in,
                                                  cb.collapse.block_in, oracle::cpu_bounds()));
  expect_passed(oracle::compare_mhc_lowrank_paths(dims_of(c, rows), in, cs.collapse.block_in,
                                                  gb.collapse.block_in, bounds()));
}

// T = 65: one past the split path, the GEMM path's smallest pass; and two slabs (2100 rows:
// 2048 + a partial 52 on the same carve).
TEST_F(MhcLowRankKernel, OracleSlabPathT65AndTwoSlabs) {
  const ModelConfig c = mhc_config(4, 96, 16);
  for (uint64_t rows : {65, 2100})
    run_judged(c, rows, MhcLowRankPath::slab,
               oracle::generate_mhc_lowrank_inputs(dims_of(c, rows), 50 + rows), 50 + rows);
}

TEST_F(MhcLowRankKernel, OracleNonFiniteHugeAndHcLimits) {
  oracle::MhcInputProfile bad;
  bad.nonfinite = {{2, 3, 0, INFINITY}, {5, 0, 17, NAN}};
  oracle::MhcInputProfile huge;
  huge.magnitude = oracle::MhcStreamMagnitude::huge;
  const ModelConfig c = mhc_config(4, 40, 8);
  for (const auto& profile : {bad, huge})
    for (auto path : {MhcLowRankPath::split, MhcLowRankPath::slab}) {
      const auto in = oracle::generate_mhc_lowrank_inputs(dims_of(c, 7), 61, profile);
      const auto [g, k] = run_judged(c, 7, path, in, 61);
      EXPECT_EQ(g.diagnostics.nonfinite_tokens, profile.nonfinite.size()) << to_string(path);
    }
  for (uint64_t hc : {1, 16})
    for (auto path : {MhcLowRankPath::split, MhcLowRankPath::slab}) {
      const ModelConfig ch = mhc_config(hc, 24, 4);
      run_judged(ch, 9, path, oracle::generate_mhc_lowrank_inputs(dims_of(ch, 9), 62 + hc),
                 62 + hc);
    }
}

// ============================================================== exact properties

// Non-finite tokens: the normed row (all streams) NaN and counted once by the norm stage; the
// later stages carry it to NaN block input and post; other tokens bit-identical (every stage's
// output). One token in the whole chain; then two tokens (NaN, +Inf) with norm_w in ±0.25.
TEST_F(MhcLowRankKernel, NonFiniteTokenIsNanAndCountedOnce) {
  const auto check = [](uint64_t T, uint64_t hc, uint64_t h, uint64_t r,
                        const oracle::MhcLowRankInputs& clean,
                        const std::vector<std::tuple<uint64_t, uint64_t, float>>& poison) {
    const uint64_t K = hc * h;
    const ModelConfig c = mhc_config(hc, h, r);
    oracle::MhcLowRankInputs dirty = clean;
    std::vector<bool> bad(T, false);
    for (const auto& [token, at, value] : poison) {
      dirty.streams[token * K + at] = value;
      bad[token] = true;
    }
    for (auto path : {MhcLowRankPath::split, MhcLowRankPath::slab}) {
      SCOPED_TRACE(to_string(path));
      const MhcLowRankRun ok = run_path(backend(), c, T, path, clean);
      const MhcLowRankRun run = run_path(backend(), c, T, path, dirty);
      EXPECT_EQ(run.diagnostics.nonfinite_tokens, poison.size());
      const bool split = path == MhcLowRankPath::split;
      const std::vector<double> normed = run.norm.normed.values();
      for (uint64_t t = 0; t < T; ++t) {
        if (bad[t]) {
          for (uint64_t k = 0; k < K; ++k) EXPECT_TRUE(std::isnan(normed[t * K + k])) << t;
          for (uint64_t d = 0; d < h; ++d)
            EXPECT_TRUE(testing::bf16_nan(run.collapse.block_in[t * h + d]));
          for (uint64_t i = 0; i < hc; ++i) EXPECT_TRUE(std::isnan(post_of(run)[t * hc + i]));
          continue;
        }
        EXPECT_TRUE(split
                        ? same_bits(run.norm.normed.f32, ok.norm.normed.f32, t * K, (t + 1) * K)
                        : same_bits(run.norm.normed.bf16, ok.norm.normed.bf16, t * K, (t + 1) * K))
            << t;
        EXPECT_TRUE(same_bits(run.collapse.block_in, ok.collapse.block_in, t * h, (t + 1) * h))
            << t;
        EXPECT_TRUE(same_bits(post_of(run), post_of(ok), t * hc, (t + 1) * hc)) << t;
      }
    }
  };
  {
    const uint64_t T = 6, hc = 4, h = 48, r = 7;
    check(T, hc, h, r, {seeded_values(T * hc * h, 40, 2.0f), seeded_weights(hc, h, r, 41)},
          {{4, 2 * h + 1, -kInf}});
  }
  const uint64_t T = 5, hc = 4, h = 72, r = 8;
  check(T, hc, h, r, {seeded_values(T * hc * h, 62, 1.0f), seeded_weights(hc, h, r, 61, 0.25f)},
        {{2, 3 * h, kInf}, {4, 7, kNaN}});
}

// Per-stream scaling: streams ×2^100 normalise to the same bits (rms_eps = 0: exactly
// scale-invariant), also when only one stream of a token is huge, so every later output keeps
// its bits too; zero streams give normed 0, block input +0 and post 2σ(0) = 1 exactly.
TEST_F(MhcLowRankKernel, HugeAndZeroStreams) {
  for (auto [T, h, r, x_scale, norm_scale, seed, w_seed] :
       {std::tuple<uint64_t, uint64_t, uint64_t, float, float, uint64_t, uint64_t>{3, 40, 6, 2.0f,
                                                                                   0.3f, 42, 43},
        {5, 72, 8, 1.0f, 0.25f, 62, 61}}) {
    const uint64_t hc = 4, K = hc * h;
    ModelConfig c = mhc_config(hc, h, r);
    c.rms_norm_eps = 0.0;
    const oracle::MhcLowRankInputs small{seeded_values(T * K, seed, x_scale),
                                         seeded_weights(hc, h, r, w_seed, norm_scale)};
    oracle::MhcLowRankInputs huge = small;
    for (uint64_t k = 0; k < T * K; ++k)
      if (k / K != 1 || (k % K) / h == 2) huge.streams[k] = std::ldexp(small.streams[k], 100);
    for (auto path : {MhcLowRankPath::split, MhcLowRankPath::slab}) {
      SCOPED_TRACE(to_string(path));
      const MhcLowRankRun a = run_path(backend(), c, T, path, small);
      const MhcLowRankRun b = run_path(backend(), c, T, path, huge);
      EXPECT_EQ(b.diagnostics.nonfinite_tokens, 0u);
      EXPECT_EQ(a.norm.normed.f32, b.norm.normed.f32);
      EXPECT_EQ(a.norm.normed.bf16, b.norm.normed.bf16);
      EXPECT_EQ(a.collapse.block_in, b.collapse.block_in);
      EXPECT_TRUE(same_bits(post_of(a), post_of(b), 0, post_of(a).size()));
    }
  }
  const uint64_t T = 3, hc = 4, h = 40, r = 6;
  const ModelConfig c = mhc_config(hc, h, r);
  const oracle::MhcLowRankInputs zero{Floats(T * hc * h, 0.0f), seeded_weights(hc, h, r, 43)};
  for (auto path : {MhcLowRankPath::split, MhcLowRankPath::slab}) {
    const MhcLowRankRun z = run_path(backend(), c, T, path, zero);
    EXPECT_EQ(z.diagnostics.nonfinite_tokens, 0u) << to_string(path);
    EXPECT_EQ(z.collapse.block_in, Bits(T * h, 0)) << to_string(path);
    EXPECT_EQ(post_of(z), Floats(T * hc, 1.0f)) << to_string(path);
  }
}

}  // namespace
}  // namespace bufferlab
