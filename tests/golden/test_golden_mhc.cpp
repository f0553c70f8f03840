// Golden mHC pre step, Sinkhorn form (docs/golden.md): transformers' DeepseekV4HyperConnection
// (post, comb, collapsed), evaluated in FP64 on stored FP32 streams, fn, bias and scale, against
// the FP64 oracle (oracle::mhc_pre, exact) and every backend's hc_pre_sinkhorn
// (docs/spec/numerics.md §3).
//
// Convention adapter: transformers' Sinkhorn ends with a column normalisation WITH hc_eps
// (columns sum to S/(S + eps)); ours adds a last exact column normalisation (divide by Σ_i, no
// eps). The test applies that last step to transformers' comb in FP64 — exactly the step the
// definition adds — and compares the result.
//
// Bounds (derived, none tuned):
//   - post and the block input: oracle::mhc_pre_bounds (oracle/src/mhc_bounds.cpp) for the
//     backend's roundoffs, against the oracle's exact value; the block input's bound is against
//     bf16(y), so half a BF16 ULP more reaches y. The FP64 evaluation of the reference is bounded
//     by the same function with u = 2^-53 (its block input bound minus one BF16 ULP of |y|:
//     stored_bf16 adds ulp(|y| + e) ≥ ulp(|y|) to e).
//   - comb: |log(C / C_exact)| ≤ the smaller of two derived bounds of the Sinkhorn's
//     elementwise forward error: λ (gen::sinkhorn_log_error, properties/src/mhc_deep_stack.cpp:
//     Birkhoff–Hopf contraction of the scaling vectors' oscillation) and β
//     (oracle::sinkhorn_entry_log_bound, oracle/src/mhc_sinkhorn_entry_bound.cpp: the scaling
//     vectors' log errors add per normalisation; the bound the oracle's comb check asserts), each
//     with the kernel's log error k of mhc_pre_bounds: (k_b, u_b) for a backend, (k_64, 2^-53)
//     for each FP64 evaluation (the oracle, and transformers followed by the adapter's exact
//     column step — the final step both bounds account for). β holds while no iterate is FP32
//     subnormal: asserted for every token (oracle::sinkhorn_min_iterate), not assumed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/properties/sinkhorn_log_error.h"
#include "golden_case.h"

namespace bufferlab::golden {
namespace {

const oracle::BoundModel kFp64{oracle::kFp64UnitRoundoff, oracle::kFp64UnitRoundoff, 2.0};

struct MhcCase {
  GoldenCase g;
  uint64_t rows = g.param("rows"), hc = g.param("hc"), h = g.param("h");
  MhcPreOp op;
  oracle::MhcPreInputs in;
  oracle::MhcPreReference exact;
  oracle::MhcPreBounds fp64;   // an FP64 evaluation against the exact values
  std::vector<double> comb;    // transformers' comb after the adapter's exact column step
  std::vector<double> lambda;  // per token: the comb log bound of one FP64 evaluation

  explicit MhcCase(const std::string& name) : g(load_golden(name)) {
    ModelConfig c;
    c.hidden_size = h;
    c.vocab_size = 16;
    c.hc_mult = hc;
    c.hc_sinkhorn_iters = g.param("sinkhorn_iters");
    c.hc_eps = g.real("hc_eps");
    c.rms_norm_eps = g.real("rms_eps");
    op = MhcPreOp::make(c, rows);
    in.streams = g.at("streams").as_f32();
    in.fn = g.at("fn").as_f32();
    in.bias = g.at("bias").as_f32();
    in.scale = g.at("scale").as_f32();
    exact = oracle::mhc_pre(op, in, oracle::Mode::exact);
    fp64 = oracle::mhc_pre_bounds(op, in, exact, kFp64);
    comb = g.values("comb");
    for (uint64_t t = 0; t < rows; ++t)
      for (uint64_t j = 0; j < hc; ++j) {
        double sum = 0.0;
        for (uint64_t i = 0; i < hc; ++i) sum += comb[(t * hc + i) * hc + j];
        for (uint64_t i = 0; i < hc; ++i) comb[(t * hc + i) * hc + j] /= sum;
      }
    for (uint64_t t = 0; t < rows; ++t)
      lambda.push_back(comb_log_bound(t, fp64.comb_log_error[t], oracle::kFp64UnitRoundoff));
  }
  // min(λ, β) for a kernel log error k and unit roundoff u (file comment).
  double comb_log_bound(uint64_t t, double k, double u) const {
    return std::min(gen::sinkhorn_log_error(shape(t), k, u),
                    oracle::sinkhorn_entry_log_bound(hc, op.shape().iters, u, k));
  }
  gen::SinkhornShape shape(uint64_t t) const {
    const std::span<const double> K(exact.kernel.data() + t * hc * hc, hc * hc);
    return gen::sinkhorn_shape(K, hc, op.shape().iters, op.hc_eps, fp64.comb_log_error[t]);
  }
  // The FP64 term of a block input element: the FP64 bound without its BF16 ULP.
  double block_in_fp64(uint64_t i) const {
    return fp64.block_in[i] - oracle::bf16_ulp_at(exact.block_in[i]);
  }
};

struct Checks {
  BoundedCheck post, comb, block_in;
};

// post [rows, hc], comb [rows, hc, hc] and block_in [rows, h] against transformers'; the
// callables give each element's bound against the exact value (the golden's FP64 term is added
// here); comb in log space.
template <class PostTol, class CombTol, class BlockTol>
Checks judge(const MhcCase& c, const std::vector<double>& post, const std::vector<double>& comb,
             const std::vector<double>& block_in, PostTol post_tol, CombTol comb_log_tol,
             BlockTol block_tol, const std::string& who) {
  Checks r{BoundedCheck(who + " hc_post vs DeepseekV4HyperConnection"),
           BoundedCheck(who + " hc_comb (log) vs DeepseekV4HyperConnection"),
           BoundedCheck(who + " block input vs DeepseekV4HyperConnection")};
  const std::vector<double>& gp = c.g.values("post");
  const std::vector<double>& gy = c.g.values("collapsed");
  for (uint64_t i = 0; i < gp.size(); ++i)
    r.post.add(post[i], gp[i], post_tol(i) + c.fp64.post[i],
               fmt::format("token {} stream {}", i / c.hc, i % c.hc));
  for (uint64_t i = 0; i < c.comb.size(); ++i) {
    const uint64_t t = i / (c.hc * c.hc);
    r.comb.add(std::log(comb[i]), std::log(c.comb[i]), comb_log_tol(t) + c.lambda[t],
               fmt::format("token {} comb[{}][{}]", t, (i / c.hc) % c.hc, i % c.hc));
  }
  for (uint64_t i = 0; i < gy.size(); ++i)
    r.block_in.add(block_in[i], gy[i], block_tol(i) + c.block_in_fp64(i),
                   fmt::format("token {} dim {}", i / c.h, i % c.h));
  return r;
}

void expect_all(const Checks& r) {
  expect_passed(r.post);
  expect_passed(r.comb);
  expect_passed(r.block_in);
}

const char* const kCases[] = {"mhc_deepseek_v4", "mhc_deepseek_v4_range12",
                              "mhc_deepseek_v4_range60"};

TEST(GoldenMhc, OracleMatchesDeepseekV4HyperConnection) {
  for (const char* name : kCases) {
    const MhcCase c(name);
    // The oracle's own FP64 terms: those of one FP64 evaluation.
    expect_all(judge(
        c, c.exact.post, c.exact.comb, c.exact.block_in, [&](uint64_t i) { return c.fp64.post[i]; },
        [&](uint64_t t) { return c.lambda[t]; }, [&](uint64_t i) { return c.block_in_fp64(i); },
        c.g.name + " oracle (exact)"));
  }
}

// β's domain (oracle/src/mhc_sinkhorn_entry_bound.cpp): no iterate within e^(β32 + 2·β64) of
// FP32's subnormal range, β32 taken with u = 2^-23 and the device bound model's kernel error (at
// least every backend's).
TEST(GoldenMhc, EntryBoundDomainHoldsForEveryToken) {
  for (const char* name : kCases) {
    const MhcCase c(name);
    const oracle::MhcPreBounds bb =
        oracle::mhc_pre_bounds(c.op, c.in, c.exact, oracle::device_bounds());
    const uint64_t iters = c.op.shape().iters;
    const double b64 = oracle::sinkhorn_entry_log_bound(c.hc, iters, oracle::kFp64UnitRoundoff);
    BoundedCheck check(c.g.name + " Sinkhorn iterates above FP32's subnormal range");
    for (uint64_t t = 0; t < c.rows; ++t) {
      const std::span<const double> K(c.exact.kernel.data() + t * c.hc * c.hc, c.hc * c.hc);
      const double b32 = oracle::sinkhorn_entry_log_bound(
          c.hc, iters, oracle::kFp32UnitRoundoff * 2.0, bb.comb_log_error[t]);
      const double lo = oracle::sinkhorn_min_iterate(K, c.hc, iters, c.op.hc_eps);
      check.require(lo * std::exp(-(b32 + 2.0 * b64)) >= oracle::kFp32MinNormal,
                    fmt::format("token {}: smallest iterate {}", t, lo));
    }
    expect_passed(check);
  }
}

TEST(GoldenMhc, BackendsMatchDeepseekV4HyperConnection) {
  for (const char* name : kCases) {
    const MhcCase c(name);
    for (const GoldenBackend& b : golden_backends()) {
      SCOPED_TRACE(b.name);
      MhcPreOp op = c.op;
      const uint64_t pool = oracle::place_mhc_weights(op);
      const Workspace ws = oracle::allocate_mhc_footprint(*b.backend, op, pool);
      const oracle::MhcPreOutputs out = oracle::run_mhc_pre(*b.backend, ws, op, c.in);
      const oracle::MhcPreBounds bb = oracle::mhc_pre_bounds(op, c.in, c.exact, b.bm);
      std::vector<double> lam(c.rows);
      for (uint64_t t = 0; t < c.rows; ++t)
        lam[t] = c.comb_log_bound(t, bb.comb_log_error[t], b.bm.fp32_u);
      std::vector<double> post(out.post.begin(), out.post.end()),
          comb(out.comb.begin(), out.comb.end()), block;
      for (uint16_t v : out.block_in) block.push_back(bf16_bits_to_f32(v));
      expect_all(judge(
          c, post, comb, block, [&](uint64_t i) { return bb.post[i]; },
          [&](uint64_t t) { return lam[t]; },
          [&](uint64_t i) {
            return bb.block_in[i] + 0.5 * oracle::bf16_ulp_at(c.exact.block_in[i]);
          },
          c.g.name + " " + b.name));
    }
  }
}

// Planted bugs, on the wide-range case (at range 3 the 19th and 20th iterates agree to FP64
// precision: no check can tell them apart there). One Sinkhorn iteration too few is seen by the
// oracle-side judge. The backend-side bound λ(k_b, 2^-24) is a-priori and loose at range 12
// (≈ 0.013 in log, against a measured 1e-6): it sees the iteration count only up to 8 of 20
// iterations (measured: 8 fail 14 of 128 entries, 9 pass), so it is shown the loop skipped
// (one column normalisation, then the exact one).
TEST(GoldenMhc, PlantedTooFewSinkhornIterationsAreCaught) {
  const MhcCase c("mhc_deepseek_v4_range12");
  const auto none = [](uint64_t) { return 0.0; };
  const auto with_iters = [&](uint64_t iters) {
    MhcPreOp op = c.op;
    op.dims.iters = iters;
    return oracle::mhc_pre(op, c.in, oracle::Mode::exact);
  };
  const oracle::MhcPreReference short_by_one = with_iters(c.op.shape().iters - 1);
  expect_caught(judge(
                    c, short_by_one.post, short_by_one.comb, short_by_one.block_in, none,
                    [&](uint64_t t) { return c.lambda[t]; }, none,
                    "planted iters - 1 (oracle side)")
                    .comb);
  const oracle::MhcPreReference skipped = with_iters(1);
  const oracle::MhcPreBounds bb = oracle::mhc_pre_bounds(c.op, c.in, c.exact, oracle::cpu_bounds());
  std::vector<double> stored;
  for (double v : skipped.comb) stored.push_back(static_cast<float>(v));
  expect_caught(judge(
                    c, skipped.post, stored, skipped.block_in, none,
                    [&](uint64_t t) {
                      return c.comb_log_bound(t, bb.comb_log_error[t], oracle::kFp32UnitRoundoff);
                    },
                    none, "planted Sinkhorn loop skipped (CPU bound)")
                    .comb);
}

}  // namespace
}  // namespace bufferlab::golden
