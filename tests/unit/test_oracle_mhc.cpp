// The FP64 mHC oracle (oracle/mhc.h): hand-checked small cases, the Sinkhorn identities, the
// Birkhoff–Hopf row bound on random cases (and the spec's formula failing with eps > 0), the
// derived bounds and the judges — passing on the CPU backend, failing on planted bugs and on
// the kernel mutants M-SKCOL and B13.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/presets.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/oracle/seeded_random.h"
#include "fp32_sinkhorn.h"
#include "mhc_config.h"
#include "report_lookup.h"

namespace bufferlab::oracle {
namespace {

using bufferlab::testing::check_failed;

constexpr double kU64 = 0x1p-53;

using bufferlab::testing::fp32_sinkhorn_iterations;
using bufferlab::testing::mhc_config;

// The random Sinkhorn cases draw from the project's one generator (oracle/seeded_random.h).
using Rng = oracle::SplitMix64;

std::vector<double> random_logits(Rng& rng, uint64_t hc, double range) {
  std::vector<double> l(hc * hc);
  for (double& v : l) v = rng.uniform() * range;
  return l;
}

std::string names(const AgreementReport& r) {
  std::string s;
  for (const auto& c : r.checks)
    if (!c.passed()) s += c.name + "; ";
  return s;
}

// --- hand-checked cases ---------------------------------------------------------------------

TEST(OracleMhcSinkhorn, TwoByTwoByHand) {
  // softmax rows [1/4, 3/4] and [1/2, 1/2]; eps = 0.
  const std::vector<double> logits = {0.0, std::log(3.0), 0.0, 0.0};
  const std::vector<double> K = sinkhorn_kernel(logits, 2, 0.0);
  EXPECT_NEAR(K[0], 0.25, 1e-15);
  EXPECT_NEAR(K[1], 0.75, 1e-15);
  EXPECT_NEAR(K[2], 0.5, 1e-15);
  // One iteration = the column normalisation: [[1/3, 3/5], [2/3, 2/5]], rows 14/15 and 16/15.
  const std::vector<double> C1 = sinkhorn(K, 2, 1, 0.0);
  EXPECT_NEAR(C1[0], 1.0 / 3, 1e-15);
  EXPECT_NEAR(C1[1], 3.0 / 5, 1e-15);
  EXPECT_NEAR(C1[2], 2.0 / 3, 1e-15);
  EXPECT_NEAR(C1[3], 2.0 / 5, 1e-15);
  EXPECT_NEAR(max_row_sum_error(C1, 2), 1.0 / 15, 1e-15);
  // Two: rows → [5/14, 9/14], [5/8, 3/8]; columns → [[4/11, 12/19], [7/11, 7/19]].
  const std::vector<double> C2 = sinkhorn(K, 2, 2, 0.0);
  EXPECT_NEAR(C2[0], 4.0 / 11, 1e-15);
  EXPECT_NEAR(C2[1], 12.0 / 19, 1e-15);
  EXPECT_NEAR(C2[2], 7.0 / 11, 1e-15);
  EXPECT_NEAR(C2[3], 7.0 / 19, 1e-15);
  EXPECT_NEAR(max_row_sum_error(C2, 2), 1.0 / 209, 1e-15);
  // Δ = log 3, ρ₀ = (14/15, 16/15): the spec's bound at t = 1 is exp(κ²·log(8/7)) − 1.
  const SinkhornBound b = sinkhorn_row_bound(K, 2, 2, 0.0);
  EXPECT_NEAR(b.delta, std::log(3.0), 1e-14);
  EXPECT_NEAR(b.log_rho0, std::log(8.0 / 7.0), 1e-14);
  const double kappa = std::tanh(std::log(3.0) / 4);
  EXPECT_NEAR(b.spec_bound, std::expm1(kappa * kappa * std::log(8.0 / 7.0)), 1e-15);
  EXPECT_NEAR(b.row_bound, b.spec_bound, 1e-14);  // eps = 0, u = 0: the spec's formula
  EXPECT_LE(1.0 / 209, b.row_bound);
  // M-SKCOL with eps: the columns sum to σ/(eps + σ), not 1.
  const std::vector<double> skcol = sinkhorn(sinkhorn_kernel(logits, 2, 1e-3), 2, 3, 1e-3, false);
  EXPECT_GT(max_col_sum_error(skcol, 2), 4e-4);
}

TEST(OracleMhcPre, HcOneByHand) {
  MhcPreOp op = MhcPreOp::make(mhc_config(1, 2, 0, 3), 1);
  op.rms_eps = 0.0;
  // x = [3, 4]: r = 1/sqrt(25/2). fn rows [pre | post | comb] = [1,0], [0,1], [1,1].
  const MhcPreInputs in{{3.0f, 4.0f}, {1, 0, 0, 1, 1, 1}, {1.0f, 2.0f, 5.0f}, {0.5f, -1.0f, 7.0f}};
  const MhcPreReference ref = mhc_pre(op, in, Mode::exact);
  const double r = 1.0 / std::sqrt(12.5);
  EXPECT_NEAR(ref.mix[0], 3 * r, 1e-15);
  EXPECT_NEAR(ref.mix[1], 4 * r, 1e-15);
  EXPECT_NEAR(ref.mix[2], 7 * r, 1e-15);
  const double pre = 1.0 / (1.0 + std::exp(-(3 * r + 0.5))) + 1e-6;
  EXPECT_NEAR(ref.pre[0], pre, 1e-15);
  EXPECT_NEAR(ref.post[0], 2.0 / (1.0 + std::exp(-(4 * r * 2.0 - 1.0))), 1e-15);
  EXPECT_EQ(ref.comb[0], 1.0);  // a 1×1 Sinkhorn ends at exactly 1
  EXPECT_NEAR(ref.kernel[0], 1.0 + 1e-6, 1e-15);
  EXPECT_NEAR(ref.block_in[0], 3 * pre, 1e-14);
  EXPECT_NEAR(ref.block_in[1], 4 * pre, 1e-14);
  const MhcPreReference f = mhc_pre(op, in, Mode::faithful);
  EXPECT_EQ(f.block_in[0], round_bf16(3 * pre));
  EXPECT_EQ(f.block_in[1], round_bf16(4 * pre));
}

TEST(OracleMhcPre, HcTwoByHandMixOrder) {
  // fn = 0: every mix value is 0, so pre/post/comb come from the biases alone, in the order
  // [pre (hc) | post (hc) | comb (hc·hc, row-major)].
  MhcPreOp op = MhcPreOp::make(mhc_config(2, 3, 0, 2, 0.0), 1);
  MhcPreInputs in;
  in.streams = {1, 2, 3, -4, 5, -6};
  in.fn.assign(8 * 6, 0.0f);
  in.scale = {1, 1, 1};
  in.bias = {0.0f, 1.0f, 2.0f, -2.0f, 0.0f, static_cast<float>(std::log(3.0)), 0.0f, 0.0f};
  const MhcPreReference ref = mhc_pre(op, in, Mode::exact);
  const double s0 = 0.5, s1 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(ref.pre[0], s0, 1e-15);
  EXPECT_NEAR(ref.pre[1], s1, 1e-15);
  EXPECT_NEAR(ref.post[0], 2.0 / (1.0 + std::exp(-2.0)), 1e-15);
  EXPECT_NEAR(ref.post[1], 2.0 / (1.0 + std::exp(2.0)), 1e-15);
  // log 3 rounded to FP32: K row 0 = [1/(1 + 3'), 3'/(1 + 3')] with 3' = e^(fl(log 3)).
  const double three = std::exp(static_cast<double>(static_cast<float>(std::log(3.0))));
  EXPECT_NEAR(ref.kernel[1], three / (1 + three), 1e-15);
  EXPECT_NEAR(ref.comb[3], 7.0 / 19, 1e-7);  // the 2×2 hand case, 2 iterations
  EXPECT_NEAR(ref.comb[0], 4.0 / 11, 1e-7);
  for (int d = 0; d < 3; ++d)
    EXPECT_NEAR(ref.block_in[d], s0 * in.streams[d] + s1 * in.streams[3 + d], 1e-15);
}

TEST(OracleMhcPre, NonFiniteTokenIsNaNAndCounted) {
  const MhcPreOp op = MhcPreOp::make(mhc_config(3, 4), 3);
  MhcInputProfile p;
  p.nonfinite = {{1, 2, 3, INFINITY}};
  const MhcPreInputs in = generate_mhc_pre_inputs(op, 5, p);
  const MhcPreReference ref = mhc_pre(op, in, Mode::faithful);
  EXPECT_EQ(ref.nonfinite_tokens, 1u);
  for (uint64_t k = 0; k < 9; ++k) {
    EXPECT_TRUE(std::isnan(ref.comb[9 + k]));
    EXPECT_FALSE(std::isnan(ref.comb[k]));
    EXPECT_FALSE(std::isnan(ref.comb[18 + k]));
  }
  for (uint64_t d = 0; d < 4; ++d) EXPECT_TRUE(std::isnan(ref.block_in[4 + d]));
  EXPECT_FALSE(std::isnan(ref.block_in[0]));
}

TEST(OracleMhcPre, HugeStreamsAreScaleInvariant) {
  // r·(fn·x) is invariant under x → c·x (up to eps): 1e30 streams give the same weights.
  MhcPreOp op = MhcPreOp::make(mhc_config(4, 8), 2);
  op.rms_eps = 0.0;  // with eps, r moves by eps/(2·mean x²) relative
  MhcPreInputs in = generate_mhc_pre_inputs(op, 7);
  MhcPreInputs huge = in;
  for (float& x : huge.streams) x *= 0x1p100f;
  const MhcPreReference a = mhc_pre(op, in, Mode::exact), b = mhc_pre(op, huge, Mode::exact);
  for (size_t k = 0; k < a.comb.size(); ++k) EXPECT_NEAR(a.comb[k], b.comb[k], 1e-12);
  for (size_t k = 0; k < a.block_in.size(); ++k)
    EXPECT_NEAR(b.block_in[k], a.block_in[k] * 0x1p100, 1e-12 * 0x1p100);
}

TEST(OracleMhcPost, FormsByHand) {
  MhcPostOp op = MhcPostOp::make(mhc_config(2, 1), 1);
  const MhcPostInputs in{
      {0.5f, 2.0f}, {0.25f, 0.75f, 0.75f, 0.25f}, {f32_to_bf16_bits(4.0f)}, {8.0f, 16.0f}};
  const std::vector<double> out = mhc_post(op, in);
  EXPECT_EQ(out[0], 0.5 * 4 + 0.25 * 8 + 0.75 * 16);  // j = 0: post_0·b + Σ_i comb_i0·x_i
  EXPECT_EQ(out[1], 2.0 * 4 + 0.75 * 8 + 0.25 * 16);
  op.dims.lowrank = true;
  const std::vector<double> lr = mhc_post(op, MhcPostInputs{in.post, {}, in.block_out, in.streams});
  EXPECT_EQ(lr[0], 8 + 0.5 * 4);
  EXPECT_EQ(lr[1], 16 + 2.0 * 4);
}

TEST(OracleMhcLowRank, StagesByHand) {
  // hc = 1, h = 2, r = 1: x = [3, 4] → n = x·sqrt(2)/5 (eps 0), w = 0.
  const MhcLowRankDims d{1, 1, 2, 1, 0.0};
  const std::vector<float> x = {3, 4}, w = {0, 0};
  const std::vector<double> n = mhc_lowrank_norm(d, x, w);
  EXPECT_NEAR(n[0], 3 * std::sqrt(2.0) / 5, 1e-15);
  const std::vector<double> low = mhc_lowrank_down(d, n, std::vector<double>{1.0, 1.0});
  const double g = (3 + 4) * std::sqrt(2.0) / 5;
  EXPECT_NEAR(low[0], g / (1 + std::exp(-g)), 1e-15);
  const std::vector<double> up = mhc_lowrank_up(d, low, std::vector<double>{2.0, -1.0});
  EXPECT_NEAR(up[1], -low[0], 1e-15);
  const std::vector<double> y = mhc_lowrank_collapse(d, n, up);
  EXPECT_NEAR(y[1], n[1] / (1 + std::exp(low[0])), 1e-15);
  EXPECT_NEAR(mhc_lowrank_post(d, std::vector<double>{0.0})[0], 1.0, 0.0);
  // A non-finite value: the whole token NaN, counted.
  uint64_t bad = 0;
  const std::vector<double> nn = mhc_lowrank_norm(d, std::vector<float>{NAN, 1}, w, &bad);
  EXPECT_EQ(bad, 1u);
  EXPECT_TRUE(std::isnan(nn[1]));
  EXPECT_THROW(mhc_lowrank_norm(d, std::vector<float>{1}, w), Error);
}

// --- Sinkhorn identities --------------------------------------------------------------------

TEST(OracleMhcSinkhorn, DoublyStochasticIsAFixedPoint) {
  for (uint64_t hc : {2u, 4u, 7u, 16u})
    for (double eps : {0.0, 1e-6}) {
      // 0.5·P1 + 0.3·P2 + 0.2·J/hc with two cyclic shifts: doubly stochastic, positive.
      std::vector<double> K(hc * hc, 0.2 / static_cast<double>(hc));
      for (uint64_t i = 0; i < hc; ++i) {
        K[i * hc + (i + 1) % hc] += 0.5;
        K[i * hc + (i + 3) % hc] += 0.3;
      }
      const std::vector<double> C = sinkhorn(K, hc, 20, eps);
      for (uint64_t k = 0; k < hc * hc; ++k) EXPECT_NEAR(C[k], K[k], 1e-14) << hc << " " << eps;
    }
}

TEST(OracleMhcSinkhorn, PermutationEquivariantAndColumnsExact) {
  Rng rng(11);
  for (int c = 0; c < 200; ++c) {
    const uint64_t hc = 2 + rng.below(15);
    const double eps = c % 2 ? 1e-6 : 0.0;
    const double range = std::exp(std::log(0.01) + rng.uniform() * std::log(6000.0));
    const uint64_t iters = 1 + rng.below(30);
    const std::vector<double> l = random_logits(rng, hc, range);
    std::vector<uint64_t> perm(hc);
    std::iota(perm.begin(), perm.end(), 0);
    for (uint64_t i = hc - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
    // Permuting the streams permutes rows and columns of the comb logits alike.
    std::vector<double> lp(hc * hc);
    for (uint64_t i = 0; i < hc; ++i)
      for (uint64_t j = 0; j < hc; ++j) lp[i * hc + j] = l[perm[i] * hc + perm[j]];
    const std::vector<double> C = sinkhorn(sinkhorn_kernel(l, hc, eps), hc, iters, eps);
    const std::vector<double> Cp = sinkhorn(sinkhorn_kernel(lp, hc, eps), hc, iters, eps);
    for (uint64_t i = 0; i < hc; ++i)
      for (uint64_t j = 0; j < hc; ++j)
        ASSERT_NEAR(Cp[i * hc + j], C[perm[i] * hc + perm[j]], 1e-12) << "case " << c;
    // The final exact column normalisation: columns sum to 1 up to FP64 rounding.
    ASSERT_LE(max_col_sum_error(C, hc), 2.0 * static_cast<double>(hc + 1) * kU64) << "case " << c;
  }
}

// --- the Birkhoff–Hopf row bound -------------------------------------------------------------

// hc 2..16, logit ranges 0.01..60 (log-uniform), eps 0 and 1e-6, iters 1..50: the FP64
// oracle's row error is within the bound with the FP64 slack (u = 2^-53).
TEST(OracleMhcSinkhorn, RowBoundHoldsOnRandomCases) {
  Rng rng(2024);
  uint64_t checked = 0, tight = 0;
  for (int c = 0; c < 12000; ++c) {
    const uint64_t hc = 2 + rng.below(15);
    const double range = std::exp(std::log(0.01) + rng.uniform() * std::log(6000.0));
    const double eps = c % 2 ? 1e-6 : 0.0;
    const uint64_t iters = 1 + rng.below(50);
    const std::vector<double> K = sinkhorn_kernel(random_logits(rng, hc, range), hc, eps);
    const double err = max_row_sum_error(sinkhorn(K, hc, iters, eps), hc);
    const SinkhornBound b = sinkhorn_row_bound(K, hc, iters, eps, kU64);
    ASSERT_LE(err, b.row_bound) << "case " << c << ": hc " << hc << ", range " << range << ", eps "
                                << eps << ", iters " << iters;
    ++checked;
    if (err > 0.1 * b.row_bound) ++tight;
  }
  EXPECT_EQ(checked, 12000u);
  EXPECT_GT(tight, 100u);  // the bound is not vacuous: often within 10x of the error
}

// The spec's formula exp(κ^(2t)·log(max ρ₀/min ρ₀)) − 1 does not hold when eps > 0: a column
// of K summing to a few eps is normalised to σ/(eps + σ) ≈ 2/3 only, an oscillation the formula
// does not see. The corrected bound holds.
TEST(OracleMhcSinkhorn, SpecFormulaFailsWithEpsCorrectedBoundHolds) {
  const std::vector<double> logits = {40.0, 0.0, 40.0, 25.0};
  const std::vector<double> K = sinkhorn_kernel(logits, 2, 1e-6);
  const double err = max_row_sum_error(sinkhorn(K, 2, 2, 1e-6), 2);
  const SinkhornBound b = sinkhorn_row_bound(K, 2, 2, 1e-6, kU64);
  EXPECT_GT(err, 10.0 * b.spec_bound);  // 0.0121 vs 4.9e-4
  EXPECT_LE(err, b.row_bound);
  EXPECT_GT(b.log_col0, 0.3);
  // Without eps the recursion is the spec's formula (plus the FP64 evaluation slack).
  const std::vector<double> K0 = sinkhorn_kernel(logits, 2, 0.0);
  const SinkhornBound b0 = sinkhorn_row_bound(K0, 2, 5, 0.0);
  EXPECT_NEAR(b0.row_bound, b0.spec_bound, 1e-13 + 1e-12 * b0.spec_bound);
  EXPECT_EQ(b0.log_col0, sinkhorn_row_bound(K0, 2, 1, 0.0).log_col0);
}

// An FP32 Sinkhorn (the backends' arithmetic) of the FP32 rounding of K is within the bound
// with u = 2^-24 and k_log_error = the rounding of K.
TEST(OracleMhcSinkhorn, RowBoundCoversFp32Arithmetic) {
  Rng rng(77);
  for (int c = 0; c < 3000; ++c) {
    const uint64_t hc = 2 + rng.below(15);
    const double range = std::exp(std::log(0.01) + rng.uniform() * std::log(6000.0));
    const double eps = c % 2 ? 1e-6 : 0.0;
    const uint64_t iters = 1 + rng.below(50);
    const std::vector<double> K = sinkhorn_kernel(random_logits(rng, hc, range), hc, eps);
    std::vector<float> C(K.begin(), K.end());
    double k_err = 0.0;
    for (size_t k = 0; k < K.size(); ++k) k_err = std::max(k_err, std::fabs(std::log(C[k] / K[k])));
    fp32_sinkhorn_iterations(C.data(), hc, iters, static_cast<float>(eps));
    const std::vector<double> Cd(C.begin(), C.end());
    ASSERT_LE(max_col_sum_error(Cd, hc), col_sum_tolerance_fp32(hc)) << "case " << c;
    ASSERT_LE(max_row_sum_error(Cd, hc),
              sinkhorn_row_bound(K, hc, iters, eps, 0x1p-24, k_err).row_bound)
        << "case " << c << ": hc " << hc << ", range " << range << ", iters " << iters;
  }
}

TEST(OracleMhcSinkhorn, BadSizesAreErrors) {
  EXPECT_THROW(sinkhorn(std::vector<double>(5, 1.0), 2, 3, 0.0), Error);
  EXPECT_THROW(sinkhorn(std::vector<double>(4, 1.0), 2, 0, 0.0), Error);
  EXPECT_THROW(sinkhorn_kernel(std::vector<double>(3, 1.0), 2, 0.0), Error);
  EXPECT_THROW(sinkhorn_row_bound(std::vector<double>(4, 1.0), 2, 0, 0.0), Error);
  const MhcPreOp op = MhcPreOp::make(mhc_config(2, 4), 2);
  MhcPreInputs in = generate_mhc_pre_inputs(op, 1);
  in.bias.pop_back();
  EXPECT_THROW(mhc_pre(op, in, Mode::exact), Error);
}

TEST(OracleMhcInputs, DeterministicWithRangeSpread) {
  const MhcPreOp op = MhcPreOp::make(mhc_config(4, 16), 3);
  MhcInputProfile p;
  p.logit_range = 30.0;
  const MhcPreInputs a = generate_mhc_pre_inputs(op, 9, p), b = generate_mhc_pre_inputs(op, 9, p);
  EXPECT_EQ(a.streams, b.streams);
  EXPECT_EQ(a.bias, b.bias);
  const MhcPreReference ref = mhc_pre(op, a, Mode::exact);
  for (uint64_t t = 0; t < 3; ++t)
    for (uint64_t i = 0; i < 4; ++i) {
      double lo = INFINITY, hi = -INFINITY;
      for (uint64_t j = 0; j < 4; ++j) {
        const uint64_t m = 8 + i * 4 + j;
        const double l = ref.mix[t * op.shape().mix + m] * a.scale[2] + a.bias[m];
        lo = std::min(lo, l), hi = std::max(hi, l);
      }
      EXPECT_NEAR(hi - lo, 30.0, 30.0 * 0.25);
    }
  p.magnitude = MhcStreamMagnitude::zero;
  for (float x : generate_mhc_pre_inputs(op, 9, p).streams) EXPECT_EQ(x, 0.0f);
  p.nonfinite = {{5, 0, 0, NAN}};
  EXPECT_THROW(generate_mhc_pre_inputs(op, 9, p), Error);
}

// --- judges on the CPU backend ---------------------------------------------------------------

struct PreRun {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  MhcPreOp op;
  uint64_t pool = 0;
  Workspace ws;
  explicit PreRun(const ModelConfig& c, uint64_t rows) : op(MhcPreOp::make(c, rows)) {
    pool = place_mhc_weights(op);
    ws = allocate_mhc_footprint(*backend, op, pool);
  }
  AgreementReport judge(const MhcPreInputs& in, MhcPreOutputs* keep = nullptr) {
    MhcPreOutputs out = run_mhc_pre(*backend, ws, op, in);
    AgreementReport r = judge_mhc_pre(op, in, out, backend->name(), 0);
    if (keep) *keep = std::move(out);
    return r;
  }
};

TEST(OracleMhcJudge, PreAgreesOnCpuAcrossRangesAndMagnitudes) {
  for (uint64_t hc : {1u, 2u, 4u, 16u})
    for (double range : {0.01, 4.0, 60.0}) {
      PreRun run(mhc_config(hc, 24), 5);
      MhcInputProfile p;
      p.logit_range = range;
      p.nonfinite = {{3, hc - 1, 7, NAN}};
      const AgreementReport r = run.judge(generate_mhc_pre_inputs(run.op, hc * 7 + 1, p));
      EXPECT_TRUE(r.passed()) << format_report(r);
    }
  PreRun run(mhc_config(4, 24), 4);
  for (MhcStreamMagnitude m : {MhcStreamMagnitude::zero, MhcStreamMagnitude::huge}) {
    MhcInputProfile p;
    p.magnitude = m;
    p.nonfinite = {{1, 0, 0, -INFINITY}};
    const AgreementReport r = run.judge(generate_mhc_pre_inputs(run.op, 3, p));
    EXPECT_TRUE(r.passed()) << format_report(r);
  }
}

TEST(OracleMhcJudge, PreFailsOnPlantedBugs) {
  PreRun run(mhc_config(4, 24), 3);
  const MhcPreInputs in = generate_mhc_pre_inputs(run.op, 21);
  MhcPreOutputs out;
  ASSERT_TRUE(run.judge(in, &out).passed());
  const MhcPreReference ref = mhc_pre(run.op, in, Mode::faithful);
  const MhcPreBounds b = mhc_pre_bounds(run.op, in, ref);
  {  // a comb entry moved by far more than its bounds
    MhcPreOutputs bad = out;
    bad.comb[4 * 4 + 6] *= 1.001f;
    const AgreementReport r = judge_mhc_pre(run.op, in, bad, "planted", 0);
    EXPECT_TRUE(check_failed(r, "hc_comb column sums")) << names(r);
    EXPECT_TRUE(check_failed(r, "hc_comb Sinkhorn class")) << names(r);
    const TensorComparison* f = r.first_failure();
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->first_bad->reason.find("token 1"), std::string::npos) << f->first_bad->reason;
  }
  {  // a post weight moved by 3 of its bounds
    MhcPreOutputs bad = out;
    bad.post[5] = static_cast<float>(ref.post[5] + 3.0 * b.post[5] + 1e-7);
    const AgreementReport r = judge_mhc_pre(run.op, in, bad, "planted", 0);
    EXPECT_TRUE(check_failed(r, "hc_post")) << names(r);
    EXPECT_NE(r.first_failure()->first_bad->reason.find("(token 1, stream 1)"), std::string::npos)
        << r.first_failure()->first_bad->reason;
  }
  {  // a poisoned (unwritten) element of each output
    MhcPreOutputs bad = out;
    bad.block_in[7] = 0xFFFF;
    bad.comb[3] = std::bit_cast<float>(0xFFFFFFFFu);
    const AgreementReport r = judge_mhc_pre(run.op, in, bad, "planted", 0);
    EXPECT_TRUE(check_failed(r, "norm_output (block input)")) << names(r);
    EXPECT_TRUE(check_failed(r, "hc_comb entries >= 0")) << names(r);
  }
  {  // a kernel that stops after 2 Sinkhorn iterations of the 20 the op asks for. At logit
     // range 1 (κ ≤ tanh(1/2)) the bound after 20 is at the FP32 floor; at range 4 it is
     // still ~0.26 (Birkhoff–Hopf is a worst case), too loose to see this bug.
    MhcInputProfile narrow;
    narrow.logit_range = 1.0;
    const MhcPreInputs in1 = generate_mhc_pre_inputs(run.op, 21, narrow);
    MhcPreOp short_op = run.op;
    short_op.dims.iters = 2;
    const MhcPreOutputs early = run_mhc_pre(*run.backend, run.ws, short_op, in1);
    const AgreementReport r = judge_mhc_pre(run.op, in1, early, "planted", 0);
    EXPECT_TRUE(check_failed(r, "hc_comb row sums (Birkhoff-Hopf bound)")) << format_report(r);
  }
  {  // a wrong non-finite count
    MhcPreOutputs bad = out;
    bad.diagnostics.nonfinite_tokens = 1;
    EXPECT_TRUE(
        check_failed(judge_mhc_pre(run.op, in, bad, "planted", 0), "non-finite token count"));
  }
}

TEST(OracleMhcJudge, SkcolMutantFailsTheColumnSums) {
  PreRun run(mhc_config(4, 24, 0, 20, 1e-6), 4);
  const MhcPreInputs in = generate_mhc_pre_inputs(run.op, 5);
  run.backend->set_kernel_mutant(Mutant::M_SKCOL);
  const AgreementReport r = run.judge(in);
  EXPECT_TRUE(check_failed(r, "hc_comb column sums")) << format_report(r);
  EXPECT_FALSE(check_failed(r, "hc_comb Sinkhorn class"));  // still D1·K·D2
  EXPECT_EQ(r.first_failure()->name, "hc_comb column sums");
}

TEST(OracleMhcJudge, PostAgreesInAndOutOfPlaceAndCatchesB13) {
  for (uint64_t r : {0u, 8u}) {
    auto backend = make_cpu_backend();
    MhcPostOp op = MhcPostOp::make(mhc_config(4, 32, r), 6);
    const MhcPostInputs in = generate_mhc_post_inputs(op, 13);
    Workspace ws = allocate_mhc_footprint(*backend, op, 0);
    const std::vector<float> in_place = run_mhc_post(*backend, ws, op, in);
    const AgreementReport a = judge_mhc_post(op, in, in_place, "cpu", 13);
    EXPECT_TRUE(a.passed()) << format_report(a);

    MhcPostOp oop = op;
    const uint64_t pool = place_mhc_post_out_of_place(oop);
    Workspace ws2 = allocate_mhc_footprint(*backend, oop, pool);
    const std::vector<float> out_of_place = run_mhc_post(*backend, ws2, oop, in);
    ASSERT_EQ(in_place.size(), out_of_place.size());
    EXPECT_EQ(0, std::memcmp(in_place.data(), out_of_place.data(), 4 * in_place.size()));

    backend->set_kernel_mutant(Mutant::B13);
    const AgreementReport m = judge_mhc_post(op, in, run_mhc_post(*backend, ws, op, in), "cpu", 13);
    EXPECT_FALSE(m.passed()) << "B13 (BF16 streams) must fail the post bound";
    EXPECT_NE(m.first_failure()->first_bad->reason.find("stream"), std::string::npos);
  }
}

TEST(OracleMhcJudge, HeadAndExpandAgreeOnCpu) {
  auto backend = make_cpu_backend();
  MhcHeadOp head = MhcHeadOp::make(mhc_config(4, 40), 5);
  const uint64_t pool = place_mhc_weights(head);
  Workspace ws = allocate_mhc_footprint(*backend, head, pool);
  MhcInputProfile p;
  p.nonfinite = {{2, 3, 39, NAN}};
  const MhcHeadInputs in = generate_mhc_head_inputs(head, 8, p);
  MhcHeadOutputs out = run_mhc_head(*backend, ws, head, in);
  const AgreementReport r = judge_mhc_head(head, in, out, "cpu", 8);
  EXPECT_TRUE(r.passed()) << format_report(r);
  out.output[0] = f32_to_bf16_bits(bf16_bits_to_f32(out.output[0]) * 1.1f + 0.01f);
  EXPECT_FALSE(judge_mhc_head(head, in, out, "planted", 8).passed());

  const MhcExpandOp expand = MhcExpandOp::make(mhc_config(3, 16), 4);
  Workspace ws2 = allocate_mhc_footprint(*backend, expand, 0);
  const std::vector<uint16_t> x = generate_mhc_expand_input(expand, 2);
  std::vector<float> streams = run_mhc_expand(*backend, ws2, expand, x);
  EXPECT_TRUE(judge_mhc_expand(expand, x, streams, "cpu", 2).passed());
  streams[16 * 3 + 5] = std::nextafter(streams[16 * 3 + 5], 1e9f);
  const AgreementReport bad = judge_mhc_expand(expand, x, streams, "planted", 2);
  ASSERT_FALSE(bad.passed());
  EXPECT_NE(bad.first_failure()->first_bad->reason.find("(token 1, stream 0, dim 5)"),
            std::string::npos);
}

MhcLowRankRun lowrank_run(Backend& backend, const ModelConfig& c, uint64_t rows,
                          MhcLowRankPath path, const MhcLowRankInputs& in, uint64_t m = 0) {
  const MhcLowRankPlan plan = plan_mhc_lowrank(c, rows, path, m);
  Workspace ws = allocate_mhc_footprint(backend, plan);
  return run_mhc_lowrank(backend, ws, plan, in);
}

TEST(OracleMhcJudge, LowRankPathsAgreeOnCpuAndWithEachOther) {
  auto backend = make_cpu_backend();
  const ModelConfig c = mhc_config(4, 32, 8);
  const MhcLowRankDims d{40, 4, 32, 8, c.rms_norm_eps};
  MhcInputProfile p;
  p.nonfinite = {{7, 2, 3, INFINITY}};
  const MhcLowRankInputs in = generate_mhc_lowrank_inputs(d, 17, p);
  const MhcLowRankRun split = lowrank_run(*backend, c, d.rows, MhcLowRankPath::split, in);
  const AgreementReport rs = judge_mhc_lowrank(split, in, "cpu", 17);
  EXPECT_TRUE(rs.passed()) << format_report(rs);
  EXPECT_EQ(split.diagnostics.nonfinite_tokens, 1u);
  const MhcLowRankRun slab = lowrank_run(*backend, c, d.rows, MhcLowRankPath::slab, in);
  const AgreementReport rb = judge_mhc_lowrank(slab, in, "cpu", 17);
  EXPECT_TRUE(rb.passed()) << format_report(rb);
  const TensorComparison paths =
      compare_mhc_lowrank_paths(d, in, split.collapse.block_in, slab.collapse.block_in);
  EXPECT_TRUE(paths.passed()) << paths.name << ": "
                              << (paths.first_bad ? paths.first_bad->reason : "");
  EXPECT_GT(paths.max_abs, 0.0);  // the paths differ (BF16 vs FP32), within the bound
}

TEST(OracleMhcJudge, LowRankSlabsOfAPartialLastSlab) {
  // Slabs are min(m, 2048) rows: 2100 rows of a narrow model run as a 2048-row slab and a
  // partial 52-row one, both at the same carve offsets.
  auto backend = make_cpu_backend();
  const ModelConfig c = mhc_config(2, 8, 2);
  const MhcLowRankDims d{2100, 2, 8, 2, c.rms_norm_eps};
  const MhcLowRankInputs in = generate_mhc_lowrank_inputs(d, 3);
  const MhcLowRankRun slab = lowrank_run(*backend, c, d.rows, MhcLowRankPath::slab, in);
  EXPECT_EQ(slab.collapse.block_in.size(), d.rows * d.h);
  const AgreementReport r = judge_mhc_lowrank(slab, in, "cpu", 3);
  EXPECT_TRUE(r.passed()) << format_report(r);
}

// The caller-provided workspace of the CLI's `compare`: the real BufferSizes layout of a
// preset, m = 100 (one 100-row slab; the split path at 48 rows).
TEST(OracleMhcJudge, RealPresetLayoutAgreesOnCpu) {
  auto backend = make_cpu_backend();
  const ModelConfig c = preset("tiny-mhc-lowrank");
  const uint64_t m = 100;
  const Layout layout = Layout::build(BufferSizes::from_config(c, m, 256, 16, 4));
  for (auto [path, rows] :
       {std::pair{MhcLowRankPath::split, uint64_t{48}}, std::pair{MhcLowRankPath::slab, m}}) {
    const MhcLowRankPlan plan = plan_mhc_lowrank(c, rows, path, m);
    Workspace ws = backend->allocate(layout, plan.pool_bytes);
    const MhcLowRankInputs in = generate_mhc_lowrank_inputs(plan.dims, 31);
    const AgreementReport r =
        judge_mhc_lowrank(run_mhc_lowrank(*backend, ws, plan, in), in, "cpu", 31);
    EXPECT_TRUE(r.passed()) << format_report(r);
  }
  ModelConfig sinkhorn_form = c;
  sinkhorn_form.hc_lowrank = 0;
  MhcPreOp op = MhcPreOp::make(sinkhorn_form, m);
  const uint64_t pool = place_mhc_weights(op);
  Workspace ws = backend->allocate(
      Layout::build(BufferSizes::from_config(sinkhorn_form, m, 256, 16, 4)), pool);
  const MhcPreInputs in = generate_mhc_pre_inputs(op, 31);
  const AgreementReport r = judge_mhc_pre(op, in, run_mhc_pre(*backend, ws, op, in), "cpu", 31);
  EXPECT_TRUE(r.passed()) << format_report(r);
}

TEST(OracleMhcJudge, LowRankFailsOnPlantedBugs) {
  auto backend = make_cpu_backend();
  const ModelConfig c = mhc_config(4, 32, 8);
  const MhcLowRankDims d{6, 4, 32, 8, c.rms_norm_eps};
  const MhcLowRankInputs in = generate_mhc_lowrank_inputs(d, 29);
  const MhcLowRankRun slab = lowrank_run(*backend, c, d.rows, MhcLowRankPath::slab, in);
  ASSERT_TRUE(judge_mhc_lowrank(slab, in, "cpu", 29).passed());
  {  // up_pre off by 4 BF16 ULPs: the up stage fails; collapse, judged on what it read, not
    MhcLowRankRun bad = slab;
    uint16_t& v = bad.up.up_pre.bf16[2 * 128 + 37];
    v = static_cast<uint16_t>(v + 4);
    bad.collapse.up_pre.bf16[2 * 128 + 37] = v;
    const AgreementReport r = judge_mhc_lowrank(bad, in, "planted", 29);
    EXPECT_TRUE(check_failed(r, "hc_up_pre (up)")) << names(r);
    EXPECT_FALSE(check_failed(r, "norm_output (collapse)")) << names(r);
    EXPECT_NE(r.first_failure()->first_bad->reason.find("(token 2, stream 1, dim 5)"),
              std::string::npos)
        << r.first_failure()->first_bad->reason;
  }
  {  // a stage that read something else than what was stored
    MhcLowRankRun bad = slab;
    bad.collapse.normed.bf16[3] ^= 1;
    EXPECT_TRUE(check_failed(judge_mhc_lowrank(bad, in, "planted", 29),
                             "hc_normed intact (collapse input)"));
  }
  {  // poison in the split path's post
    const MhcLowRankRun split = lowrank_run(*backend, c, d.rows, MhcLowRankPath::split, in);
    MhcLowRankRun bad = split;
    bad.down.post[9] = std::bit_cast<float>(0xFFFFFFFFu);
    EXPECT_TRUE(check_failed(judge_mhc_lowrank(bad, in, "planted", 29), "hc_post (down)"));
  }
  EXPECT_THROW(plan_mhc_lowrank(c, 65, MhcLowRankPath::split), Error);
}

}  // namespace
}  // namespace bufferlab::oracle
