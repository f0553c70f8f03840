// Golden causal conv1d + SiLU (docs/golden.md): transformers' causal_conv1d_update of Qwen3-Next
// (the GDN conv, no bias) and of Nemotron-H (the Mamba-2 conv, with bias) — the depthwise conv
// over the carried tail of K − 1 inputs and L new ones, then SiLU, and the updated tail —
// evaluated in FP64 on stored BF16 inputs, against the FP64 oracle and every backend's conv op
// (docs/spec/numerics.md §5, §6).
//
// Bounds. An FP64 evaluation of out = silu(b + Σ_j w_j·x_j) errs in the argument by
// γ_(2K+2)(2^-53)·(|b| + Σ|w·x|) (K products, K additions, the bias) and silu is 1.1-Lipschitz,
// then silu's own exp, add, division and product: ε = γ_(2K+6)(2^-53)·(1.1·(|b| + Σ|w·x|) +
// |out|). Oracle vs golden: 2ε. A backend: the oracle's stage bound (gdn_detail::conv_bounds for
// the FP32 GDN output; mamba2_detail::conv_bounds for the BF16 xBC, against bf16(out), so half
// a BF16 ULP more) + 2ε. The updated tail holds copied BF16 inputs: it must be equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/gdn_stages.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "bufferlab/oracle/pool_placement.h"
#include "gdn_mamba2_geometry.h"
#include "golden_case.h"
#include "workspace_rig.h"

namespace bufferlab::golden {
namespace {

constexpr double kSiluLipschitz = 1.1;  // sup |silu'| = 1.0998…

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// The FP64 term ε of each output [L, C] from the argument magnitudes |b| + Σ|w·x|.
std::vector<double> fp64_terms(const std::vector<double>& abs_arg, const std::vector<double>& out,
                               uint64_t K) {
  const double gam = oracle::gamma(2.0 * static_cast<double>(K) + 6.0, oracle::kFp64UnitRoundoff);
  std::vector<double> e(out.size());
  for (uint64_t i = 0; i < out.size(); ++i)
    e[i] = gam * (kSiluLipschitz * abs_arg[i] + std::fabs(out[i]));
  return e;
}

BoundedCheck judge(const std::vector<double>& got, const std::vector<double>& want,
                   const std::vector<double>& bound, const std::vector<double>& eps, uint64_t C,
                   const std::string& name) {
  BoundedCheck check(name);
  for (uint64_t i = 0; i < want.size(); ++i)
    check.add(got[i], want[i], bound[i] + 2.0 * eps[i],
              fmt::format("token {} channel {}", i / C, i % C));
  return check;
}

BoundedCheck judge_tail(const std::vector<uint16_t>& got, const std::vector<double>& want,
                        const std::string& name) {
  BoundedCheck check(name);
  for (uint64_t i = 0; i < want.size(); ++i)
    check.add(bf16_bits_to_f32(got[i]), want[i], 0.0, fmt::format("tail element {}", i));
  return check;
}

// ---- GDN: Qwen3-Next ------------------------------------------------------------------------

struct GdnConvCase {
  GoldenCase g = load_golden("gdn_conv_qwen3_next");
  uint64_t L = g.param("L"), K = g.param("kernel"), C = g.param("channels");
  GdnGeometry geom =
      testing::gdn_geometry(g.param("nk"), g.param("kd"), g.param("nv"), g.param("vd"), K);
  oracle::GdnDims dims{.geom = geom, .sequences = 1, .L = L};
  std::vector<uint16_t> deint, weight = bf16_bits_of(g.values("weight")),
                               state = bf16_bits_of(g.values("state_in"));
  oracle::gdn_detail::ConvRef exact;
  std::vector<double> abs_arg, eps;

  GdnConvCase() {
    deint.assign(L * geom.qkvz, 0);
    const std::vector<uint16_t> x = bf16_bits_of(g.values("x"));
    for (uint64_t t = 0; t < L; ++t)
      for (uint64_t c = 0; c < C; ++c) deint[t * geom.qkvz + c] = x[t * C + c];
    exact = oracle::gdn_detail::conv_stage(dims, deint, weight, state);
    for (uint64_t t = 0; t < L; ++t)
      for (uint64_t c = 0; c < C; ++c) {
        double s = 0.0;
        for (uint64_t j = 0; j < K; ++j)
          s += std::fabs(bf16_bits_to_f32(weight[c * K + j]) *
                         oracle::gdn_detail::conv_input(
                             dims, deint, state, 0, c,
                             static_cast<int64_t>(t + j) - static_cast<int64_t>(K - 1)));
        abs_arg.push_back(s);
      }
    eps = fp64_terms(abs_arg, exact.out, K);
  }
};

TEST(GoldenConv, GdnOracleAndBackendsMatchQwen3NextConv) {
  const GdnConvCase c;
  const std::vector<double>& want = c.g.values("out");
  const std::vector<double> zero(want.size(), 0.0);
  expect_passed(
      judge(c.exact.out, want, zero, c.eps, c.C, "GDN conv oracle vs causal_conv1d_update"));
  expect_passed(judge(c.exact.tail, c.g.values("state_out"),
                      std::vector<double>(c.exact.tail.size(), 0.0),
                      std::vector<double>(c.exact.tail.size(), 0.0), c.C,
                      "GDN conv tail oracle vs causal_conv1d_update"));
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    GdnConvOp op = GdnConvOp::make(c.geom, c.L, 1);
    const uint64_t pool = oracle::place_in_pool({&op.weight, &op.state});
    testing::Rig rig(*b.backend, {op.accesses()}, pool);
    rig.put(op.input, c.deint);
    rig.put(op.weight, c.weight);
    rig.put(op.state, c.state);
    rig.backend->gdn_conv(rig.ws, op);
    const std::vector<float> out = rig.get<float>(op.output);
    const std::vector<double> bound =
        oracle::gdn_detail::conv_bounds(c.dims, c.deint, c.weight, c.state, c.exact, b.bm).bound;
    expect_passed(judge(std::vector<double>(out.begin(), out.end()), want, bound, c.eps, c.C,
                        b.name + " GDN conv vs causal_conv1d_update"));
    expect_passed(judge_tail(rig.get<uint16_t>(op.state), c.g.values("state_out"),
                             b.name + " GDN conv tail vs causal_conv1d_update"));
  }
}

// Planted bugs: the taps reversed (a convolution where the model cross-correlates); the tail not
// updated.
TEST(GoldenConv, GdnPlantedReversedTapsAreCaught) {
  const GdnConvCase c;
  std::vector<double> wrong(c.L * c.C);
  for (uint64_t t = 0; t < c.L; ++t)
    for (uint64_t ch = 0; ch < c.C; ++ch) {
      double s = 0.0;
      for (uint64_t j = 0; j < c.K; ++j)
        s += bf16_bits_to_f32(c.weight[ch * c.K + (c.K - 1 - j)]) *
             oracle::gdn_detail::conv_input(
                 c.dims, c.deint, c.state, 0, ch,
                 static_cast<int64_t>(t + j) - static_cast<int64_t>(c.K - 1));
      wrong[t * c.C + ch] = silu(s);
    }
  expect_caught(judge(wrong, c.g.values("out"), std::vector<double>(wrong.size(), 0.0), c.eps, c.C,
                      "planted reversed taps (GDN conv)"));
  expect_caught(
      judge_tail(c.state, c.g.values("state_out"), "planted tail not updated (GDN conv)"));
}

// ---- Mamba-2: Nemotron-H --------------------------------------------------------------------

struct SsdConvCase {
  GoldenCase g = load_golden("ssd_conv_nemotron_h");
  uint64_t L = g.param("L"), K = g.param("kernel"), C = g.param("channels");
  Mamba2Geometry geom =
      testing::mamba2_geometry(g.param("H"), g.param("P"), g.param("N"), g.param("n_groups"), K);
  oracle::Mamba2Dims dims{.geom = geom, .sequences = 1, .L = L};
  oracle::Mamba2Inputs in;
  oracle::mamba2_detail::ConvResult exact;
  std::vector<double> eps;

  SsdConvCase() {
    in.zxbcdt.assign(L * geom.in_proj, 0);
    const std::vector<uint16_t> x = bf16_bits_of(g.values("x"));
    for (uint64_t t = 0; t < L; ++t)
      for (uint64_t c = 0; c < C; ++c)
        in.zxbcdt[t * geom.in_proj + geom.d_inner + c] = x[t * C + c];
    in.conv_w = bf16_bits_of(g.values("weight"));
    in.conv_b = bf16_bits_of(g.values("bias"));
    in.conv_state = bf16_bits_of(g.values("state_in"));
    exact = oracle::mamba2_detail::conv_fp64(dims, in, true);
    eps = fp64_terms(exact.abs_sum, exact.out, K);
  }
};

TEST(GoldenConv, SsdOracleAndBackendsMatchNemotronHConv) {
  const SsdConvCase c;
  const std::vector<double>& want = c.g.values("out");
  const std::vector<double> zero(want.size(), 0.0);
  expect_passed(
      judge(c.exact.out, want, zero, c.eps, c.C, "Mamba-2 conv oracle vs causal_conv1d_update"));
  expect_passed(judge(c.exact.tail, c.g.values("state_out"),
                      std::vector<double>(c.exact.tail.size(), 0.0),
                      std::vector<double>(c.exact.tail.size(), 0.0), c.C,
                      "Mamba-2 conv tail oracle vs causal_conv1d_update"));
  for (const GoldenBackend& b : golden_backends()) {
    SCOPED_TRACE(b.name);
    Mamba2ConvOp op = Mamba2ConvOp::make(c.geom, c.L, 1);
    const uint64_t pool = oracle::place_in_pool({&op.weight, &op.bias, &op.state});
    testing::Rig rig(*b.backend, {op.accesses()}, pool);
    rig.put(op.input, c.in.zxbcdt);
    rig.put(op.weight, c.in.conv_w);
    rig.put(op.bias, c.in.conv_b);
    rig.put(op.state, c.in.conv_state);
    rig.backend->mamba2_conv(rig.ws, op);
    std::vector<double> got;
    for (uint16_t v : rig.get<uint16_t>(op.output)) got.push_back(bf16_bits_to_f32(v));
    std::vector<double> bound = oracle::mamba2_detail::conv_bounds(c.exact, b.bm, c.K);
    for (uint64_t i = 0; i < bound.size(); ++i)
      bound[i] += 0.5 * oracle::bf16_ulp_at(c.exact.out[i]);
    expect_passed(
        judge(got, want, bound, c.eps, c.C, b.name + " Mamba-2 conv vs causal_conv1d_update"));
    expect_passed(judge_tail(rig.get<uint16_t>(op.state), c.g.values("state_out"),
                             b.name + " Mamba-2 conv tail vs causal_conv1d_update"));
  }
}

// Planted bugs: the conv bias dropped; the tail not updated.
TEST(GoldenConv, SsdPlantedMissingBiasIsCaught) {
  const SsdConvCase c;
  oracle::Mamba2Inputs no_bias = c.in;
  std::fill(no_bias.conv_b.begin(), no_bias.conv_b.end(), uint16_t{0});
  const oracle::mamba2_detail::ConvResult wrong = oracle::mamba2_detail::conv_fp64(c.dims, no_bias);
  expect_caught(judge(wrong.out, c.g.values("out"), std::vector<double>(wrong.out.size(), 0.0),
                      c.eps, c.C, "planted missing conv bias (Mamba-2)"));
  expect_caught(judge_tail(c.in.conv_state, c.g.values("state_out"),
                           "planted tail not updated (Mamba-2 conv)"));
}

}  // namespace
}  // namespace bufferlab::golden
