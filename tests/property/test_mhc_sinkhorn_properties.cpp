// Properties of the Sinkhorn-form mHC ops (docs/spec/numerics.md §3, §9) on the CPU backend, over
// the cases of properties/mhc_generators.h (hc 1..16, iterations 1..50, hc_eps 0 and 1e-6,
// comb logit ranges 0.01..60, zero / huge streams, NaN / ±Inf):
//   - pre, post (both forms), head and expand agree with the faithful FP64 oracle through the
//     judges (oracle/mhc_judge.h) under their derived bounds, on poisoned arenas, at random
//     row counts and at T = 64 and 65;
//   - the Sinkhorn convergence property exactly as docs/spec/numerics.md §3 states it: entries ≥ 0,
//   column
//     sums (FP64-summed) within (hc + 1)·2^-24 of 1, row sums within the Birkhoff–Hopf bound
//     plus its derived FP32 slack (oracle::sinkhorn_row_bound) — and the FP64 oracle within
//     the same bound at u = 2^-53; permutation equivariance of the FP64 oracle within 1e-12,
//     each ordering of the backend judged against the oracle; a doubly-stochastic (circulant)
//     input stays within a derived bound of K / rowsum; a token with a NaN / ±Inf stream
//     value has NaN outputs, is counted, and leaves every other token bit-identical to a clean
//     run;
//   - in-place hc_post equals out-of-place bit for bit, in both forms.
// Every property has a planted-bug twin (suite MhcSinkhornPlanted) that must fail with the
// expected finding: a comb entry moved beyond its class bound, a block input left poisoned,
// the M-SKCOL and B13 kernel mutants, a post / head / expand element off, a write-before-read
// in-place hazard, an unpermuted comb bias, a transposed comb, a leaked NaN.
//
// Cost: each generator caps gen::mhc_op_cost at 2^26 multiply-adds (formulas in
// mhc_generators.h); the judges' work is a small multiple of it.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/oracle/seeded_random.h"
#include "bufferlab/properties/mhc_generators.h"
#include "contains.h"
#include "cpu_backend.h"
#include "findings.h"
#include "mhc_property_support.h"
#include "report_checks.h"

// A namespace of its own, so the using-directive below stays in this file.
namespace bufferlab::mhc_sinkhorn_properties {
namespace {

using gen::MhcCase;
using gen::MhcOpKind;
using oracle::Mode;
using namespace testing::mhc;  // the helpers both mHC property files share (tests/support)
using testing::cpu_backend;
using testing::require_passed;
using U = uint64_t;

constexpr double kU32 = 0x1p-24;  // the backend's FP32 unit roundoff
constexpr double kU64 = 0x1p-53;  // the oracle's FP64 unit roundoff
constexpr double kEquivariance =
    1e-12;  // docs/spec/numerics.md §3: the FP64 oracle under permutation

MhcCase draw_finite(MhcOpKind kind) {
  MhcCase c = draw(kind);
  c.profile.nonfinite.clear();
  return c;
}

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

// A uniform value in [0, 1) of (seed, k): SplitMix64's finaliser, so a case draws one seed
// rather than one rc value per matrix entry.
double hashed_uniform(U seed, U k) {
  const U z = oracle::splitmix64_mix(seed + (k + 1) * oracle::kSplitMix64Step);
  return static_cast<double>(z >> 11) * 0x1p-53;
}

// hc×hc comb logits uniform in [0, L].
std::vector<double> random_logits(U hc, double L, U seed) {
  std::vector<double> l(hc * hc);
  for (U k = 0; k < l.size(); ++k) l[k] = L * hashed_uniform(seed, k);
  return l;
}

// ---- running the ops ----------------------------------------------------------------------

struct PreRun {
  MhcPreOp op;
  oracle::MhcPreInputs in;
  oracle::MhcPreOutputs out;
};

PreRun run_pre(Backend& b, const ModelConfig& config, U rows, oracle::MhcPreInputs in) {
  PreRun r{MhcPreOp::make(config, rows), std::move(in), {}};
  const U pool = oracle::place_mhc_weights(r.op);
  const Workspace ws = oracle::allocate_mhc_footprint(b, r.op, pool);
  r.out = oracle::run_mhc_pre(b, ws, r.op, r.in);
  return r;
}

PreRun run_pre(Backend& b, const MhcCase& c) {
  return run_pre(b, c.config, c.rows, gen::mhc_pre_inputs(c));
}

std::vector<float> run_post(Backend& b, const MhcCase& c, const oracle::MhcPostInputs& in,
                            bool in_place) {
  MhcPostOp op = MhcPostOp::make(c.config, c.rows);
  const U pool = in_place ? 0 : oracle::place_mhc_post_out_of_place(op);
  const Workspace ws = oracle::allocate_mhc_footprint(b, op, pool);
  return oracle::run_mhc_post(b, ws, op, in);
}

oracle::MhcHeadOutputs run_head(Backend& b, const MhcCase& c, const oracle::MhcHeadInputs& in) {
  MhcHeadOp op = MhcHeadOp::make(c.config, c.rows);
  const U pool = oracle::place_mhc_weights(op);
  const Workspace ws = oracle::allocate_mhc_footprint(b, op, pool);
  return oracle::run_mhc_head(b, ws, op, in);
}

std::vector<float> run_expand(Backend& b, const MhcCase& c, const std::vector<uint16_t>& in) {
  const MhcExpandOp op = MhcExpandOp::make(c.config, c.rows);
  const Workspace ws = oracle::allocate_mhc_footprint(b, op, 0);
  return oracle::run_mhc_expand(b, ws, op, in);
}

// ---- agreement with the oracle, every op ----------------------------------------------------

RC_GTEST_PROP(MhcSinkhornProperty, CpuPreAgreesWithOracle, ()) {
  const MhcCase c = draw(MhcOpKind::pre);
  const PreRun r = run_pre(cpu_backend(), c);
  require_passed(oracle::judge_mhc_pre(r.op, r.in, r.out, "cpu", c.seed));
}

RC_GTEST_PROP(MhcSinkhornProperty, CpuPostAgreesWithOracle, ()) {
  const MhcCase c = draw(MhcOpKind::post);
  RC_TAG(c.r() > 0 ? "lowrank form" : "sinkhorn form");
  const auto in = gen::mhc_post_inputs(c);
  const auto out = run_post(cpu_backend(), c, in, /*in_place=*/true);
  require_passed(oracle::judge_mhc_post(MhcPostOp::make(c.config, c.rows), in, out, "cpu", c.seed));
}

RC_GTEST_PROP(MhcSinkhornProperty, CpuHeadAgreesWithOracle, ()) {
  const MhcCase c = draw(MhcOpKind::head);
  const auto in = gen::mhc_head_inputs(c);
  const auto out = run_head(cpu_backend(), c, in);
  require_passed(oracle::judge_mhc_head(MhcHeadOp::make(c.config, c.rows), in, out, "cpu", c.seed));
}

RC_GTEST_PROP(MhcSinkhornProperty, CpuExpandIsExact, ()) {
  const MhcCase c = draw(MhcOpKind::expand);
  const auto in = gen::mhc_expand_input(c);
  const auto out = run_expand(cpu_backend(), c, in);
  require_passed(
      oracle::judge_mhc_expand(MhcExpandOp::make(c.config, c.rows), in, out, "cpu", c.seed));
}

// T = 64 and 65 (the low-rank split / GEMM switch; docs/spec/numerics.md §4) in every CI run: each
// op of the Sinkhorn form at both row counts (the low-rank form's are in
// test_mhc_lowrank_properties.cpp). Cost: as each op's generator, rows fixed, h halved.
RC_GTEST_PROP(MhcSinkhornProperty, EveryOpAgreesAt64And65Rows, ()) {
  gen::MhcRanges ranges = gen::ci_mhc_ranges();
  ranges.min_rows = 64;
  ranges.max_rows = 65;
  const MhcOpKind kind =
      *rc::gen::element(MhcOpKind::pre, MhcOpKind::post, MhcOpKind::head, MhcOpKind::expand);
  const MhcCase c = draw(kind, ranges);
  RC_TAG(gen::to_string(kind), c.rows);
  const U seed = c.seed;
  switch (kind) {
    case MhcOpKind::pre: {
      const PreRun r = run_pre(cpu_backend(), c);
      require_passed(oracle::judge_mhc_pre(r.op, r.in, r.out, "cpu", seed));
      break;
    }
    case MhcOpKind::post: {
      const auto in = gen::mhc_post_inputs(c);
      const auto out = run_post(cpu_backend(), c, in, true);
      require_passed(
          oracle::judge_mhc_post(MhcPostOp::make(c.config, c.rows), in, out, "cpu", seed));
      break;
    }
    case MhcOpKind::head: {
      const auto in = gen::mhc_head_inputs(c);
      require_passed(oracle::judge_mhc_head(MhcHeadOp::make(c.config, c.rows), in,
                                            run_head(cpu_backend(), c, in), "cpu", seed));
      break;
    }
    default: {
      const auto in = gen::mhc_expand_input(c);
      require_passed(oracle::judge_mhc_expand(MhcExpandOp::make(c.config, c.rows), in,
                                              run_expand(cpu_backend(), c, in), "cpu", seed));
    }
  }
}

// ---- Sinkhorn convergence (docs/spec/numerics.md §3), stated tolerances
// ----------------------------------

// The comb properties of docs/spec/numerics.md §3 on an hc×hc comb per token, summed in FP64,
// tokens whose kernel K is NaN (non-finite streams) skipped: every entry a finite value ≥ 0; every
// column sum within col_tol of 1; every row sum within row_bound(t) of 1. The check names are the
// judge's.
template <class T, class RowBound>
Findings sinkhorn_findings(const std::vector<T>& comb, const std::vector<double>& kernel, U rows,
                           U hc, double col_tol, RowBound row_bound) {
  Findings f;
  auto at = [](U t, const char* what, U k) { return fmt::format("token {}, {} {}", t, what, k); };
  for (U t = 0; t < rows; ++t) {
    if (std::isnan(kernel[t * hc * hc])) continue;
    const T* C = comb.data() + t * hc * hc;
    for (U k = 0; k < hc * hc; ++k)
      if (!(std::isfinite(C[k]) && C[k] >= 0))
        f.push_back({"hc_comb entries >= 0", at(t, "entry", k)});
    const double bound = row_bound(t);
    for (U a = 0; a < hc; ++a) {
      double col = 0.0, row = 0.0;
      for (U b = 0; b < hc; ++b) {
        col += static_cast<double>(C[b * hc + a]);
        row += static_cast<double>(C[a * hc + b]);
      }
      if (!(std::fabs(col - 1.0) <= col_tol))
        f.push_back(
            {"hc_comb column sums", at(t, "column", a) + fmt::format(": 1 {:+.3g}", col - 1)});
      if (!(std::fabs(row - 1.0) <= bound))
        f.push_back({"hc_comb row sums (Birkhoff-Hopf bound)",
                     at(t, "row", a) + fmt::format(": 1 {:+.3g} > {:.3g}", row - 1, bound)});
    }
  }
  return f;
}

// A backend's comb against the stated tolerances: columns (hc + 1)·2^-24, rows the
// Birkhoff–Hopf bound of the oracle's K at u = 2^-24 widened by the token's comb_log_error
// (the backend's K differs from the oracle's by at most that in log; mhc_pre_bounds).
Findings backend_sinkhorn_findings(const PreRun& r, const oracle::MhcPreReference& ref) {
  const U rows = r.op.shape().rows, hc = r.op.shape().hc, iters = r.op.shape().iters;
  const oracle::MhcPreBounds b = oracle::mhc_pre_bounds(r.op, r.in, ref);
  return sinkhorn_findings(
      r.out.comb, ref.kernel, rows, hc, oracle::col_sum_tolerance_fp32(hc), [&](U t) {
        const std::span<const double> K(ref.kernel.data() + t * hc * hc, hc * hc);
        return oracle::sinkhorn_row_bound(K, hc, iters, r.op.hc_eps, kU32, b.comb_log_error[t])
            .row_bound;
      });
}

// The convergence frontier is reported, not asserted: how far each case got.
void tag_convergence(const std::vector<double>& comb, const std::vector<double>& kernel, U rows,
                     U hc, double logit_range) {
  double worst = 0.0;
  for (U t = 0; t < rows; ++t)
    if (!std::isnan(kernel[t * hc * hc]))
      worst = std::max(worst, oracle::max_row_sum_error(
                                  std::span<const double>(comb.data() + t * hc * hc, hc * hc), hc));
  const char* range = logit_range < 1 ? "L<1" : logit_range < 10 ? "L<10" : "L>=10";
  RC_TAG(range, worst <= 1e-6   ? "rows within 1e-6"
                : worst <= 1e-3 ? "rows within 1e-3"
                                : "rows > 1e-3");
}

RC_GTEST_PROP(MhcSinkhornProperty, CpuCombConvergesWithinStatedTolerances, ()) {
  const MhcCase c = draw(MhcOpKind::pre);
  const PreRun r = run_pre(cpu_backend(), c);
  const auto ref = oracle::mhc_pre(r.op, r.in, Mode::faithful);
  tag_convergence(ref.comb, ref.kernel, c.rows, c.hc(), c.profile.logit_range);
  const Findings f = backend_sinkhorn_findings(r, ref);
  log_findings(f);
  RC_ASSERT(f.empty());
}

// The FP64 oracle's Sinkhorn of random K (logit range 0.01..60, eps 0 or 1e-6, 1..50
// iterations): entries ≥ 0, columns within γ_(2hc)(2^-53) of 1 (the exact column
// normalisation's sum, division and the checking sum), rows within the Birkhoff–Hopf bound at
// u = 2^-53. Cost: T·iters·4·hc² ≤ 16·50·1024 per case.
RC_GTEST_PROP(MhcSinkhornProperty, OracleConvergesWithinBirkhoffHopfBound, ()) {
  const MhcCase c = draw(MhcOpKind::pre);
  const U hc = c.hc(), iters = c.config.hc_sinkhorn_iters, rows = std::min<U>(c.rows, 16);
  const double eps = c.config.hc_eps;
  std::vector<double> K, C;
  for (U t = 0; t < rows; ++t) {
    const auto logits = random_logits(hc, c.profile.logit_range, c.seed + t * hc * hc);
    const auto k = oracle::sinkhorn_kernel(logits, hc, eps);
    const auto comb = oracle::sinkhorn(k, hc, iters, eps);
    K.insert(K.end(), k.begin(), k.end());
    C.insert(C.end(), comb.begin(), comb.end());
  }
  tag_convergence(C, K, rows, hc, c.profile.logit_range);
  const Findings f = sinkhorn_findings(C, K, rows, hc, oracle::gamma(2.0 * hc, kU64), [&](U t) {
    return oracle::sinkhorn_row_bound(std::span<const double>(K.data() + t * hc * hc, hc * hc), hc,
                                      iters, eps, kU64)
        .row_bound;
  });
  log_findings(f);
  RC_ASSERT(f.empty());
}

// ---- permutation equivariance -----------------------------------------------------------------

// Fisher–Yates over rc draws: p[i'] = the old stream that new stream i' holds.
std::vector<U> draw_permutation(U n) {
  std::vector<U> p(n);
  for (U i = 0; i < n; ++i) p[i] = i;
  for (U i = n; i > 1; --i) std::swap(p[i - 1], p[*rc::gen::inRange<U>(0, i)]);
  return p;
}

// The pre step's inputs with the streams permuted by p: x'[t, i'] = x[t, p[i']], fn's column
// blocks likewise, and fn's rows and the bias permuted so that pre'_i' = pre_p[i'], post'_i' =
// post_p[i'] and comb logit'_(i'j') = logit_(p[i'] p[j']). `comb_columns` = false leaves the
// comb rows' column order alone (the planted bug of the equivariance twin).
oracle::MhcPreInputs permute_streams(const MhcPreOp& op, const oracle::MhcPreInputs& in,
                                     const std::vector<U>& p, bool comb_columns = true) {
  const U rows = op.shape().rows, hc = op.shape().hc, h = op.shape().h, K = hc * h;
  const U mix = op.shape().mix;
  auto row_of = [&](U m) {
    if (m < hc) return p[m];
    if (m < 2 * hc) return hc + p[m - hc];
    const U i = (m - 2 * hc) / hc, j = (m - 2 * hc) % hc;
    return 2 * hc + p[i] * hc + (comb_columns ? p[j] : j);
  };
  oracle::MhcPreInputs out = in;
  for (U t = 0; t < rows; ++t)
    for (U i = 0; i < hc; ++i)
      std::copy_n(in.streams.begin() + static_cast<std::ptrdiff_t>((t * hc + p[i]) * h), h,
                  out.streams.begin() + static_cast<std::ptrdiff_t>((t * hc + i) * h));
  for (U m = 0; m < mix; ++m) {
    out.bias[m] = in.bias[row_of(m)];
    for (U i = 0; i < hc; ++i)
      std::copy_n(in.fn.begin() + static_cast<std::ptrdiff_t>(row_of(m) * K + p[i] * h), h,
                  out.fn.begin() + static_cast<std::ptrdiff_t>(m * K + i * h));
  }
  return out;
}

// The exact FP64 oracle on the permuted inputs (b) against the permuted oracle results (a):
// pre, post, K and comb within 1e-12 (docs/spec/numerics.md §3); the block input Σ_i pre_i·x_i (a
// sum over streams, unchanged by the permutation) within 1e-12 relative to Σ_i pre_i·|x_i| (it
// scales with x: huge streams are ~1e30).
Findings permutation_findings(const MhcPreOp& op, const oracle::MhcPreInputs& in,
                              const oracle::MhcPreInputs& permuted, const std::vector<U>& p) {
  const U rows = op.shape().rows, hc = op.shape().hc, h = op.shape().h;
  const auto a = oracle::mhc_pre(op, in, Mode::exact);
  const auto b = oracle::mhc_pre(op, permuted, Mode::exact);
  Findings f;
  auto near = [](double x, double y, double tol) {
    return (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= tol;
  };
  for (U t = 0; t < rows; ++t) {
    for (U i = 0; i < hc; ++i) {
      const U ti = t * hc + i, tp = t * hc + p[i];
      if (!near(b.pre[ti], a.pre[tp], kEquivariance))
        f.push_back({"pre not permutation-equivariant", fmt::format("token {}, stream {}", t, i)});
      if (!near(b.post[ti], a.post[tp], kEquivariance))
        f.push_back({"post not permutation-equivariant", fmt::format("token {}, stream {}", t, i)});
      for (U j = 0; j < hc; ++j) {
        const U e = (t * hc + i) * hc + j, ep = (t * hc + p[i]) * hc + p[j];
        if (!near(b.kernel[e], a.kernel[ep], kEquivariance))
          f.push_back(
              {"K not permutation-equivariant", fmt::format("token {}, i {}, j {}", t, i, j)});
        if (!near(b.comb[e], a.comb[ep], kEquivariance))
          f.push_back(
              {"hc_comb not permutation-equivariant",
               fmt::format("token {}, i {}, j {}: {} vs {}", t, i, j, b.comb[e], a.comb[ep])});
      }
    }
    for (U d = 0; d < h; ++d) {
      double scale = 0.0;
      for (U i = 0; i < hc; ++i)
        scale += std::fabs(a.pre[t * hc + i] * in.streams[(t * hc + i) * h + d]);
      if (!near(b.block_in[t * h + d], a.block_in[t * h + d], kEquivariance * scale))
        f.push_back(
            {"block input not permutation-invariant", fmt::format("token {}, dim {}", t, d)});
    }
  }
  return f;
}

RC_GTEST_PROP(MhcSinkhornProperty, PermutedStreamsGiveThePermutedResult, ()) {
  const MhcCase c = draw(MhcOpKind::pre);
  const MhcPreOp op = MhcPreOp::make(c.config, c.rows);
  const auto in = gen::mhc_pre_inputs(c);
  const auto p = draw_permutation(c.hc());
  const auto permuted = permute_streams(op, in, p);
  const Findings f = permutation_findings(op, in, permuted, p);
  log_findings(f);
  RC_ASSERT(f.empty());
  // The backend: FP32 Sinkhorn moves by tens of ULPs under permutation, so each ordering is
  // judged against the oracle's bound on its own.
  for (const auto* inputs : {&in, &permuted}) {
    const PreRun r = run_pre(cpu_backend(), c.config, c.rows, *inputs);
    require_passed(oracle::judge_mhc_pre(r.op, r.in, r.out, "cpu", c.seed));
  }
}

// ---- a doubly-stochastic input is a near fixed point -------------------------------------------

// Circulant comb logits l_ij = c_((j − i) mod hc) with s2 = 0 (the logits are the bias, exact):
// every row of K = softmax + eps is a rotation of d = softmax(c) + eps, so K's row and column
// sums are all S = Σ d and D = K / S is doubly stochastic; the spec's Sinkhorn returns D in
// exact arithmetic (every normalisation divides every row / column by the same number).
//
// Bound on a computed comb C. C = diag(a)·(K∘E)·diag(b) with |log E| ≤ e (the Sinkhorn class
// of the judge: e = k + (2·iters + 1)·u', k the token's comb_log_error, u' = u/(1 − u)), its row
// sums within ε_r and column sums within ε_c of 1 (the asserted tolerances: sinkhorn_row_bound
// and (hc + 1)·2^-24 for the backend; at u = 2^-53, k = 0 and γ_(2hc)(2^-53) for the oracle).
// With M = D∘E and α = a·S: α = ρ/(M b), b = σ/(Mᵀα) (ρ, σ the row / column sums). Birkhoff–
// Hopf on M (κ = tanh(Δ(M)/4), Δ(M) ≤ Δ(K) + 4e) and osc(M·1), osc(Mᵀ·1) ≤ 2e (D is doubly
// stochastic) give osc(α) ≤ osc(ρ) + κ·osc(b) + 2e and osc(b) ≤ osc(σ) + κ·osc(α) + 2e, so
//   osc(b) ≤ (osc(σ) + 2e + κ·(osc(ρ) + 2e)) / (1 − κ²),   osc(ρ) ≤ log((1 + ε_r)/(1 − ε_r)).
// Row i of C/D, g_ij = α_i·E_ij·b_j, has D-weighted mean ρ_i, so every g_ij is within
// osc(b) + 2e of a value in [1 − ε_r, 1 + ε_r]: |C_ij − D_ij| ≤ D_ij·expm1(−log(1 − ε_r) +
// osc(b) + 2e). D is formed in FP64 from one rotation of d: 4·γ_(2hc+8)(2^-53) joins e.
struct FixedPointTolerance {
  double u = 0.0;        // unit roundoff of the Sinkhorn's arithmetic
  double col_tol = 0.0;  // ε_c
};

// The relative bound above for token t (+Inf where ε_r ≥ 1 or κ rounds to 1: no bound).
double fixed_point_rel_bound(const MhcPreOp& op, std::span<const double> K, double k,
                             const FixedPointTolerance& tol) {
  const U hc = op.shape().hc, iters = op.shape().iters;
  const double e =
      k + (2.0 * iters + 1.0) * tol.u / (1.0 - tol.u) + 4.0 * oracle::gamma(2.0 * hc + 8.0, kU64);
  const double eps_r = oracle::sinkhorn_row_bound(K, hc, iters, op.hc_eps, tol.u, k).row_bound;
  const double kappa = std::tanh((oracle::projective_diameter(K, hc) + 4.0 * e) / 4.0);
  if (!(eps_r < 1.0) || !(kappa < 1.0)) return INFINITY;
  const double osc_r = std::log1p(eps_r) - std::log1p(-eps_r);
  const double osc_c = std::log1p(tol.col_tol) - std::log1p(-tol.col_tol);
  const double osc_b = (osc_c + 2 * e + kappa * (osc_r + 2 * e)) / (1.0 - kappa * kappa);
  return std::expm1(-std::log1p(-eps_r) + osc_b + 2 * e);
}

// k_log: the backend's comb_log_error per token (empty for the oracle: k = 0).
Findings fixed_point_findings(const MhcPreOp& op, const std::vector<double>& d_rows,
                              const std::vector<double>& kernel, const std::vector<double>& k_log,
                              const std::vector<double>& comb, const FixedPointTolerance& tol) {
  const U rows = op.shape().rows, hc = op.shape().hc;
  Findings f;
  for (U t = 0; t < rows; ++t) {
    if (std::isnan(kernel[t * hc * hc])) continue;
    const std::span<const double> K(kernel.data() + t * hc * hc, hc * hc);
    const double rel = fixed_point_rel_bound(op, K, k_log.empty() ? 0.0 : k_log[t], tol);
    const double* drow = d_rows.data() + t * hc;
    for (U i = 0; i < hc; ++i)
      for (U j = 0; j < hc; ++j) {
        const double D = drow[(j + hc - i) % hc];
        const double got = comb[(t * hc + i) * hc + j];
        if (!(std::fabs(got - D) <= D * rel))
          f.push_back({"hc_comb not near K/rowsum",
                       fmt::format("token {}, i {}, j {}: {} vs {} (bound {:.3g})", t, i, j, got, D,
                                   D * rel)});
      }
  }
  return f;
}

struct CirculantCase {
  MhcCase c;
  oracle::MhcPreInputs in;
  std::vector<double> d_rows;  // [rows, hc]: D's first row per token (one per token: the
                               // bias is shared, so every token has the same D)
};

// Logit ranges up to 8: Δ(K) ≤ 2L, so 1/(1 − κ²) ≤ cosh²(L/2) ≈ 750 at L = 8 — beyond, the
// bound above grows like e^L and says little.
CirculantCase circulant_case() {
  CirculantCase cc{draw_finite(MhcOpKind::pre), {}, {}};
  MhcCase& c = cc.c;
  const U hc = c.hc();
  c.profile.logit_range = std::min(c.profile.logit_range, 8.0);
  cc.in = gen::mhc_pre_inputs(c);
  cc.in.scale[2] = 0.0f;
  std::vector<double> logits(hc);  // c_k, k = (j − i) mod hc
  for (U k = 0; k < hc; ++k) logits[k] = c.profile.logit_range * hashed_uniform(~c.seed, k);
  for (U i = 0; i < hc; ++i)
    for (U j = 0; j < hc; ++j)
      cc.in.bias[2 * hc + i * hc + j] = static_cast<float>(logits[(j + hc - i) % hc]);
  // d = softmax(c) + eps of the FP32 bias as the oracle sees it, D = d / Σ d.
  std::vector<double> row(hc);
  for (U j = 0; j < hc; ++j) row[j] = cc.in.bias[2 * hc + j];
  const auto d = oracle::sinkhorn_kernel(
      [&] {
        std::vector<double> sq(hc * hc);
        for (U i = 0; i < hc; ++i)
          for (U j = 0; j < hc; ++j) sq[i * hc + j] = row[(j + hc - i) % hc];
        return sq;
      }(),
      hc, c.config.hc_eps);
  double S = 0.0;
  for (U j = 0; j < hc; ++j) S += d[j];
  for (U t = 0; t < c.rows; ++t)
    for (U j = 0; j < hc; ++j) cc.d_rows.push_back(d[j] / S);
  return cc;
}

RC_GTEST_PROP(MhcSinkhornProperty, DoublyStochasticInputIsNearFixedPoint, ()) {
  const CirculantCase cc = circulant_case();
  const MhcCase& c = cc.c;
  const MhcPreOp op = MhcPreOp::make(c.config, c.rows);
  const auto ref = oracle::mhc_pre(op, cc.in, Mode::faithful);
  const Findings fo = fixed_point_findings(op, cc.d_rows, ref.kernel, {}, ref.comb,
                                           {kU64, oracle::gamma(2.0 * c.hc(), kU64)});
  log_findings(fo);
  RC_ASSERT(fo.empty());

  const PreRun r = run_pre(cpu_backend(), c.config, c.rows, cc.in);
  require_passed(oracle::judge_mhc_pre(r.op, r.in, r.out, "cpu", c.seed));
  const auto b = oracle::mhc_pre_bounds(r.op, r.in, ref);
  const Findings fb =
      fixed_point_findings(op, cc.d_rows, ref.kernel, b.comb_log_error, oracle::widen(r.out.comb),
                           {kU32, oracle::col_sum_tolerance_fp32(c.hc())});
  log_findings(fb);
  RC_ASSERT(fb.empty());
}

// ---- non-finite tokens -------------------------------------------------------------------------

// One output tensor of a run with planted NaN / ±Inf and of the clean run of the same case,
// [rows, width] as raw bits (FP32 or BF16).
struct TokenTensor {
  std::string name;
  std::vector<uint32_t> dirty, clean;
  U width = 0;
  bool bf16 = false;
};

// T: float (FP32) or uint16_t (BF16 bits).
template <class T>
TokenTensor token_tensor(std::string name, const std::vector<T>& dirty, const std::vector<T>& clean,
                         U width) {
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;
  TokenTensor t{std::move(name), {}, {}, width, sizeof(T) == 2};
  for (T v : dirty) t.dirty.push_back(std::bit_cast<Bits>(v));
  for (T v : clean) t.clean.push_back(std::bit_cast<Bits>(v));
  return t;
}

// A token with a non-finite stream value: every output element NaN; the count = the number of
// such tokens; every other token bit-identical to the clean run (docs/spec/numerics.md §3).
Findings isolation_findings(const std::vector<TokenTensor>& tensors, const std::set<U>& bad,
                            U counted) {
  Findings f;
  if (counted != bad.size())
    f.push_back(
        {"non-finite token count", fmt::format("{} counted, {} planted", counted, bad.size())});
  for (const TokenTensor& x : tensors)
    for (U e = 0; e < x.dirty.size(); ++e) {
      const U t = e / x.width, col = e % x.width;
      const uint32_t v = x.dirty[e];
      const bool nan =
          x.bf16 ? bf16_is_nan(static_cast<uint16_t>(v)) : std::isnan(std::bit_cast<float>(v));
      if (bad.count(t) && !nan)
        f.push_back(
            {x.name + ": non-finite token not NaN", fmt::format("token {}, col {}", t, col)});
      if (!bad.count(t) && v != x.clean[e])
        f.push_back({x.name + ": other token differs from the clean run",
                     fmt::format("token {}, col {}", t, col)});
    }
  return f;
}

std::vector<TokenTensor> pre_tensors(const PreRun& dirty, const PreRun& clean, U hc, U h) {
  return {token_tensor("hc_post", dirty.out.post, clean.out.post, hc),
          token_tensor("hc_comb", dirty.out.comb, clean.out.comb, hc * hc),
          token_tensor("norm_output (block input)", dirty.out.block_in, clean.out.block_in, h)};
}

RC_GTEST_PROP(MhcSinkhornProperty, NonFiniteTokensAreNanCountedAndIsolated, ()) {
  const bool head = *rc::gen::arbitrary<bool>();
  const MhcCase c = draw_nonfinite(head ? MhcOpKind::head : MhcOpKind::pre);
  MhcCase clean = c;
  clean.profile.nonfinite.clear();
  Findings f;
  if (head) {
    const auto out = run_head(cpu_backend(), c, gen::mhc_head_inputs(c));
    const auto ref = run_head(cpu_backend(), clean, gen::mhc_head_inputs(clean));
    f = isolation_findings({token_tensor("hidden_states (head)", out.output, ref.output, c.h())},
                           bad_tokens(c.profile), out.diagnostics.nonfinite_tokens);
  } else {
    const PreRun dirty = run_pre(cpu_backend(), c), ref = run_pre(cpu_backend(), clean);
    f = isolation_findings(pre_tensors(dirty, ref, c.hc(), c.h()), bad_tokens(c.profile),
                           dirty.out.diagnostics.nonfinite_tokens);
    require_passed(oracle::judge_mhc_pre(dirty.op, dirty.in, dirty.out, "cpu", c.seed));
  }
  log_findings(f);
  RC_ASSERT(f.empty());
}

// ---- hc_post in place = out of place --------------------------------------------------------

// The first element whose bits differ, as (token, stream, dim).
std::optional<std::string> first_bit_difference(const std::vector<float>& a,
                                                const std::vector<float>& b, U hc, U h) {
  for (U e = 0; e < a.size(); ++e)
    if (bits(a[e]) != bits(b[e]))
      return fmt::format("token {}, stream {}, dim {}: {} vs {}", e / (hc * h), e / h % hc, e % h,
                         a[e], b[e]);
  return std::nullopt;
}

RC_GTEST_PROP(MhcSinkhornProperty, PostInPlaceEqualsOutOfPlaceBitForBit, ()) {
  const MhcCase c = draw(MhcOpKind::post);
  RC_TAG(c.r() > 0 ? "lowrank form" : "sinkhorn form");
  const auto in = gen::mhc_post_inputs(c);
  const auto in_place = run_post(cpu_backend(), c, in, true);
  const auto out_of_place = run_post(cpu_backend(), c, in, false);
  const auto diff = first_bit_difference(in_place, out_of_place, c.hc(), c.h());
  if (diff) RC_LOG() << "in place differs from out of place at " << *diff << "\n";
  RC_ASSERT(!diff);
  require_passed(
      oracle::judge_mhc_post(MhcPostOp::make(c.config, c.rows), in, out_of_place, "cpu", c.seed));
}

// ==== Planted bugs: each property's check must fail with the expected finding =================

std::vector<std::string> failing_checks(const oracle::AgreementReport& r) {
  std::vector<std::string> names;
  for (const auto& c : r.checks)
    if (!c.passed()) names.push_back(c.name);
  return names;
}

// The comb entries the class check judges, as (token, i, j): hc = 1: the one entry (judged by
// the column sums); hc ≥ 2: every entry of a cross ratio (i', j'), i', j' ≥ 1, whose four
// entries (i', j'), (i', 0), (0, j'), (0, 0) are normal FP32 — a cross ratio with a subnormal
// entry is not judged (bounds.h: a subnormal holds no relative bound), so an error planted
// only there could not fail the check.
std::vector<std::array<U, 3>> judged_entries(const MhcCase& c, const std::vector<float>& comb) {
  const U hc = c.hc();
  std::vector<std::array<U, 3>> out;
  for (const U t : finite_tokens(c)) {
    const float* C = comb.data() + t * hc * hc;
    if (hc == 1) {
      out.push_back({t, 0, 0});
      continue;
    }
    std::set<std::pair<U, U>> in_ratio;
    for (U a = 1; a < hc; ++a)
      for (U b = 1; b < hc; ++b) {
        if (oracle::fp32_subnormal(C[a * hc + b]) || oracle::fp32_subnormal(C[a * hc]) ||
            oracle::fp32_subnormal(C[b]) || oracle::fp32_subnormal(C[0]))
          continue;
        in_ratio.insert({{a, b}, {a, 0}, {0, b}, {0, 0}});
      }
    for (const auto& [i, j] : in_ratio) out.push_back({t, i, j});
  }
  return out;
}

// One judged comb entry (judged_entries) multiplied by exp(4·B), B = 4·(k + (2·iters + 1)·u')
// the class bound of its token: its cross ratios move by 4·B, past the judge's bound B
// (hc ≥ 2); hc = 1 has no cross ratio and fails the column sum.
RC_GTEST_PROP(MhcSinkhornPlanted, CombEntryBeyondItsClassBoundFails, ()) {
  const MhcCase c = draw(MhcOpKind::pre);
  PreRun r = run_pre(cpu_backend(), c);
  const auto judged = judged_entries(c, r.out.comb);
  RC_PRE(!judged.empty());
  const auto ref = oracle::mhc_pre(r.op, r.in, Mode::faithful);
  const auto b = oracle::mhc_pre_bounds(r.op, r.in, ref);
  const auto [t, i, j] = *rc::gen::elementOf(judged);
  const U hc = c.hc();
  const double B =
      4.0 * (b.comb_log_error[t] + (2.0 * c.config.hc_sinkhorn_iters + 1.0) * kU32 / (1.0 - kU32));
  float& entry = r.out.comb[(t * hc + i) * hc + j];
  const float moved = static_cast<float>(entry * std::exp(4.0 * B));
  RC_PRE(std::isfinite(moved) && entry > 0.0f);
  entry = moved;
  const auto report = oracle::judge_mhc_pre(r.op, r.in, r.out, "planted", c.seed);
  RC_LOG() << oracle::format_report(report);
  const auto names = failing_checks(report);
  for (const auto& n : names) RC_ASSERT(contains(n, "hc_comb"));
  const std::string expected = hc >= 2 ? "hc_comb Sinkhorn class" : "hc_comb column sums";
  RC_ASSERT(std::find(names.begin(), names.end(), expected) != names.end());
  if (hc >= 2) {
    const auto* cls = &*std::find_if(report.checks.begin(), report.checks.end(),
                                     [&](const auto& x) { return x.name == expected; });
    RC_ASSERT(cls->first_bad->row == t);
  }
}

RC_GTEST_PROP(MhcSinkhornPlanted, BlockInputLeftPoisonedFailsAtItsTokenAndDim, ()) {
  const MhcCase c = draw(MhcOpKind::pre);
  PreRun r = run_pre(cpu_backend(), c);
  const U t = *rc::gen::inRange<U>(0, c.rows), d = *rc::gen::inRange<U>(0, c.h());
  r.out.block_in[t * c.h() + d] = 0xFFFF;
  const auto report = oracle::judge_mhc_pre(r.op, r.in, r.out, "planted", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("norm_output (block input)"));
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(contains(bad->first_bad->reason, "unwritten"));
  RC_ASSERT(contains(bad->first_bad->reason, fmt::format("(token {}, dim {})", t, d)));
}

// M-SKCOL (no final exact column normalisation) with hc_eps = 1e-6: the last eps column step
// leaves column sums σ/(eps + σ), and some column has σ ≤ 1 (Σσ ≤ hc·(1 + hc·eps)), so it is
// off by ≥ eps/(1 + (hc + 1)·eps) ≈ 1e-6 less its FP32 rounding ≤ (hc + 1)·2^-24: beyond the
// tolerance (hc + 1)·2^-24 while 2·(hc + 1)·2^-24 < 1e-6/(1 + 1e-5), i.e. hc ≤ 7.
RC_GTEST_PROP(MhcSinkhornPlanted, MSkcolFailsColumnSums, ()) {
  MhcCase c = draw(MhcOpKind::pre);
  c.config.hc_mult = std::min<U>(c.hc(), 7);
  c.config.hc_eps = 1e-6;
  c.profile.nonfinite.clear();
  const auto backend = make_cpu_backend();
  backend->set_kernel_mutant(Mutant::M_SKCOL);
  const PreRun r = run_pre(*backend, c);
  const auto report = oracle::judge_mhc_pre(r.op, r.in, r.out, "M-SKCOL", c.seed);
  RC_LOG() << oracle::format_report(report);
  RC_ASSERT(!report.passed());
  RC_ASSERT(report.first_failure()->name == std::string("hc_comb column sums"));
  const auto f = backend_sinkhorn_findings(r, oracle::mhc_pre(r.op, r.in, Mode::faithful));
  RC_ASSERT(has_finding(f, "hc_comb column sums"));
}

// The FP64 oracle's Sinkhorn stopped after one round fails the 50-round row bound wherever the
// first round leaves a row error above that bound.
RC_GTEST_PROP(MhcSinkhornPlanted, TruncatedOracleSinkhornFailsTheRowBound, ()) {
  const U hc = *rc::gen::inRange<U>(2, 17);
  const double L = *rc::gen::element(1.0, 4.0, 8.0);
  const auto logits = random_logits(hc, L, *rc::gen::arbitrary<U>());
  const double eps = *rc::gen::element(0.0, 1e-6);
  const auto K = oracle::sinkhorn_kernel(logits, hc, eps);
  const auto C = oracle::sinkhorn(K, hc, 1, eps);
  const double bound = oracle::sinkhorn_row_bound(K, hc, 50, eps, kU64).row_bound;
  RC_PRE(oracle::max_row_sum_error(C, hc) > 2.0 * bound);
  const Findings f =
      sinkhorn_findings(C, K, 1, hc, oracle::gamma(2.0 * hc, kU64), [&](U) { return bound; });
  RC_ASSERT(has_finding(f, "hc_comb row sums (Birkhoff-Hopf bound)"));
}

// Permuting the comb rows of the bias but not their columns breaks equivariance.
RC_GTEST_PROP(MhcSinkhornPlanted, UnpermutedCombColumnsBreakEquivariance, ()) {
  MhcCase c = draw_finite(MhcOpKind::pre);
  RC_PRE(c.hc() >= 2);
  const MhcPreOp op = MhcPreOp::make(c.config, c.rows);
  const auto in = gen::mhc_pre_inputs(c);
  auto p = draw_permutation(c.hc());
  // Visible: the bug yields comb[p(i)][j] where comb[p(i)][p(j)] is due (a rank-one K, e.g.,
  // scales to the uniform matrix, whatever the column order).
  const auto a = oracle::mhc_pre(op, in, Mode::exact);
  const U hc = c.hc();
  double visible = 0.0;
  for (U t = 0; t < c.rows; ++t)
    for (U i = 0; i < hc; ++i)
      for (U j = 0; j < hc; ++j)
        visible = std::max(visible, std::fabs(a.comb[(t * hc + p[i]) * hc + j] -
                                              a.comb[(t * hc + p[i]) * hc + p[j]]));
  RC_PRE(visible > 1e-9);
  const Findings f = permutation_findings(op, in, permute_streams(op, in, p, false), p);
  RC_ASSERT(has_finding(f, "hc_comb not permutation-equivariant"));
}

// A transposed comb of a circulant input is doubly stochastic too, but not K / rowsum.
RC_GTEST_PROP(MhcSinkhornPlanted, TransposedCombIsNotNearFixedPoint, ()) {
  const CirculantCase cc = circulant_case();
  const MhcCase& c = cc.c;
  const U hc = c.hc();
  RC_PRE(hc >= 3);
  const PreRun r = run_pre(cpu_backend(), c.config, c.rows, cc.in);
  const auto ref = oracle::mhc_pre(r.op, r.in, Mode::faithful);
  const auto b = oracle::mhc_pre_bounds(r.op, r.in, ref);
  std::vector<double> transposed(r.out.comb.size());
  for (U t = 0; t < c.rows; ++t)
    for (U i = 0; i < hc; ++i)
      for (U j = 0; j < hc; ++j)
        transposed[(t * hc + i) * hc + j] = r.out.comb[(t * hc + j) * hc + i];
  const FixedPointTolerance tol{kU32, oracle::col_sum_tolerance_fp32(hc)};
  RC_ASSERT(fixed_point_findings(r.op, cc.d_rows, ref.kernel, b.comb_log_error,
                                 oracle::widen(r.out.comb), tol)
                .empty());
  // D_ji − D_ij = d_(i−j) − d_(j−i): visible where some pair differs by more than twice the
  // bound (token 0: every token has the same D and K, only k differs).
  double gap = 0.0;
  for (U k = 1; k < hc; ++k)
    gap = std::max(gap, std::fabs(cc.d_rows[k] - cc.d_rows[hc - k]) /
                            std::max(cc.d_rows[k], cc.d_rows[hc - k]));
  double rel = 0.0;
  for (U t = 0; t < c.rows; ++t)
    rel = std::max(rel, fixed_point_rel_bound(
                            r.op, std::span<const double>(ref.kernel.data() + t * hc * hc, hc * hc),
                            b.comb_log_error[t], tol));
  RC_PRE(gap > 2.0 * rel);
  const Findings f =
      fixed_point_findings(r.op, cc.d_rows, ref.kernel, b.comb_log_error, transposed, tol);
  RC_ASSERT(has_finding(f, "hc_comb not near K/rowsum"));
}

// A NaN leaked into another token, and a non-finite token's output left finite.
RC_GTEST_PROP(MhcSinkhornPlanted, LeakedOrMissingNanFailsIsolation, ()) {
  const MhcCase c = draw_nonfinite(MhcOpKind::pre);
  RC_PRE(c.rows >= 2);
  MhcCase clean = c;
  clean.profile.nonfinite.clear();
  PreRun dirty = run_pre(cpu_backend(), c);
  const PreRun ref = run_pre(cpu_backend(), clean);
  const auto bad = bad_tokens(c.profile);
  const auto good = finite_tokens(c);
  RC_PRE(!good.empty());
  const bool leak = *rc::gen::arbitrary<bool>();
  const U t = leak ? *rc::gen::elementOf(good) : *bad.begin();
  const U i = *rc::gen::inRange<U>(0, c.hc());
  dirty.out.post[t * c.hc() + i] = leak ? NAN : 0.5f;
  const Findings f = isolation_findings(pre_tensors(dirty, ref, c.hc(), c.h()), bad,
                                        dirty.out.diagnostics.nonfinite_tokens);
  RC_ASSERT(has_finding(f, leak ? "hc_post: other token differs from the clean run"
                                : "hc_post: non-finite token not NaN"));
  const Findings miscount = isolation_findings(pre_tensors(ref, ref, c.hc(), c.h()), bad, 0);
  RC_ASSERT(has_finding(miscount, "non-finite token count"));
}

// What a write-before-read in-place kernel computes: stream j from the streams with 0..j−1
// already overwritten (emulated with the backend, one stream at a time); it differs from the
// out-of-place result bit for bit (Sinkhorn form, hc ≥ 2, normal streams and comb logit range
// ≤ 4, so every comb entry is ≥ e^-4/hc-ish and comb_ij·(x'_i − x_i) is far above one ULP of
// the output).
RC_GTEST_PROP(MhcSinkhornPlanted, WriteBeforeReadInPlaceDiffers, ()) {
  MhcCase c = draw_finite(MhcOpKind::post);
  c.config.hc_lowrank = 0;
  c.profile.magnitude = oracle::MhcStreamMagnitude::normal;
  c.profile.logit_range = std::min(c.profile.logit_range, 4.0);
  RC_PRE(c.hc() >= 2);
  const U hc = c.hc(), h = c.h(), rows = c.rows;
  const auto in = gen::mhc_post_inputs(c);
  const auto correct = run_post(cpu_backend(), c, in, false);
  auto hazard_in = in;
  std::vector<float> hazard = correct;
  for (U j = 1; j < hc; ++j) {
    for (U t = 0; t < rows; ++t)  // stream j − 1 already overwritten
      std::copy_n(hazard.begin() + static_cast<std::ptrdiff_t>((t * hc + j - 1) * h), h,
                  hazard_in.streams.begin() + static_cast<std::ptrdiff_t>((t * hc + j - 1) * h));
    const auto step = run_post(cpu_backend(), c, hazard_in, false);
    for (U t = 0; t < rows; ++t)
      std::copy_n(step.begin() + static_cast<std::ptrdiff_t>((t * hc + j) * h), h,
                  hazard.begin() + static_cast<std::ptrdiff_t>((t * hc + j) * h));
  }
  RC_ASSERT(first_bit_difference(hazard, correct, hc, h).has_value());
}

// B13 (every written stream value rounded to BF16) fails the post judge wherever the rounding
// moves a value by more than twice its bound.
RC_GTEST_PROP(MhcSinkhornPlanted, B13FailsThePostJudge, ()) {
  MhcCase c = draw_finite(MhcOpKind::post);
  const MhcPostOp op = MhcPostOp::make(c.config, c.rows);
  const auto in = gen::mhc_post_inputs(c);
  const auto want = oracle::mhc_post(op, in);
  const auto bound = oracle::mhc_post_bounds(op, in);
  bool visible = false;
  for (U e = 0; e < want.size() && !visible; ++e)
    visible = std::fabs(oracle::round_bf16(want[e]) - want[e]) > 2.0 * bound[e];
  RC_PRE(visible);
  const auto backend = make_cpu_backend();
  backend->set_kernel_mutant(Mutant::B13);
  const bool in_place = *rc::gen::arbitrary<bool>();
  const auto out = run_post(*backend, c, in, in_place);
  const auto report = oracle::judge_mhc_post(op, in, out, "B13", c.seed);
  RC_ASSERT(!report.passed());
  RC_ASSERT(report.first_failure()->name == std::string("hc_streams (post)"));
}

RC_GTEST_PROP(MhcSinkhornPlanted, PostElementBeyondItsBoundFailsAtItsCoordinates, ()) {
  const MhcCase c = draw_finite(MhcOpKind::post);
  const MhcPostOp op = MhcPostOp::make(c.config, c.rows);
  const auto in = gen::mhc_post_inputs(c);
  auto out = run_post(cpu_backend(), c, in, true);
  const auto want = oracle::mhc_post(op, in);
  const auto bound = oracle::mhc_post_bounds(op, in);
  const U e = *rc::gen::inRange<U>(0, out.size());
  RC_PRE(std::isfinite(want[e]) && std::fabs(want[e]) + bound[e] < 1e38);
  out[e] = beyond_f32(want[e], bound[e]);
  const auto report = oracle::judge_mhc_post(op, in, out, "planted", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("hc_streams (post)"));
  RC_ASSERT(bad->failures == 1u);
  const U hc = c.hc(), h = c.h();
  RC_ASSERT(contains(bad->first_bad->reason, fmt::format("(token {}, stream {}, dim {})",
                                                         e / (hc * h), e / h % hc, e % h)));
}

RC_GTEST_PROP(MhcSinkhornPlanted, HeadOutputLeftPoisonedFailsAtItsTokenAndDim, ()) {
  const MhcCase c = draw(MhcOpKind::head);
  const auto in = gen::mhc_head_inputs(c);
  auto out = run_head(cpu_backend(), c, in);
  const U t = *rc::gen::inRange<U>(0, c.rows), d = *rc::gen::inRange<U>(0, c.h());
  out.output[t * c.h() + d] = 0xFFFF;
  const auto report =
      oracle::judge_mhc_head(MhcHeadOp::make(c.config, c.rows), in, out, "planted", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("hidden_states (head)"));
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(contains(bad->first_bad->reason, fmt::format("(token {}, dim {})", t, d)));
}

RC_GTEST_PROP(MhcSinkhornPlanted, ExpandOneUlpOffFailsAtItsCoordinates, ()) {
  const MhcCase c = draw(MhcOpKind::expand);
  const auto in = gen::mhc_expand_input(c);
  auto out = run_expand(cpu_backend(), c, in);
  const U e = *rc::gen::inRange<U>(0, out.size()), hc = c.hc(), h = c.h();
  out[e] = std::nextafter(out[e], INFINITY);
  const auto report =
      oracle::judge_mhc_expand(MhcExpandOp::make(c.config, c.rows), in, out, "planted", c.seed);
  RC_ASSERT(!report.passed());
  const auto* bad = report.first_failure();
  RC_ASSERT(bad->name == std::string("hc_streams (expand)"));
  RC_ASSERT(bad->failures == 1u);
  RC_ASSERT(contains(bad->first_bad->reason, fmt::format("(token {}, stream {}, dim {})",
                                                         e / (hc * h), e / h % hc, e % h)));
}

}  // namespace
}  // namespace bufferlab::mhc_sinkhorn_properties
