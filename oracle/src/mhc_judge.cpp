// Per-stage judgement of the mHC ops against the faithful oracle.
#include "bufferlab/oracle/mhc_judge.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/bounds.h"
#include "mhc_common.h"

namespace bufferlab::oracle {

namespace {

constexpr double kFp32U = kFp32UnitRoundoff;

// Names the first bad element's coordinates: a [rows, cols] tensor whose cols split into
// (outer, inner) = (cols / inner, inner) when inner > 0.
TensorComparison at(TensorComparison c, const char* outer_name, uint64_t inner,
                    const char* inner_name) {
  if (!c.first_bad) return c;
  Mismatch& m = *c.first_bad;
  if (inner == 0)
    m.reason += fmt::format(" at (token {}, {} {})", m.row, outer_name, m.col);
  else
    m.reason += fmt::format(" at (token {}, {} {}, {} {})", m.row, outer_name, m.col / inner,
                            inner_name, m.col % inner);
  return c;
}

// A property check with no element-wise oracle value: failures are added one by one.
void fail(TensorComparison& c, uint64_t row, uint64_t col, double got, double want, uint64_t bits,
          std::string reason) {
  ++c.failures;
  if (!c.first_bad) c.first_bad = Mismatch{row, col, got, want, bits, std::move(reason)};
}

uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

ElementBounds bounds_of(const std::vector<double>& b, std::string formula) {
  return ElementBounds{b, {}, std::move(formula)};
}

// --- Sinkhorn comb properties -------------------------------------------------------------

// Finite tokens: every entry finite and ≥ 0. Non-finite tokens: every entry NaN (written).
TensorComparison comb_entries(const MhcPreOp& op, std::span<const float> comb,
                              const MhcPreReference& ref) {
  const uint64_t rows = op.shape().rows, hc = op.shape().hc;
  TensorComparison c =
      property("hc_comb entries >= 0", rows, hc * hc,
               "finite and >= 0; NaN (written, not poison) for a non-finite token");
  for (uint64_t t = 0; t < rows; ++t) {
    const bool nan_token = std::isnan(ref.kernel[t * hc * hc]);
    for (uint64_t k = 0; k < hc * hc; ++k) {
      const float v = comb[t * hc * hc + k];
      const uint32_t b = bits_of(v);
      const std::string where = fmt::format(" at (token {}, i {}, j {})", t, k / hc, k % hc);
      if (b == 0xFFFFFFFFu)
        fail(c, t, k, v, ref.comb[t * hc * hc + k], b, "unwritten (poison)" + where);
      else if (nan_token && !std::isnan(v))
        fail(c, t, k, v, NAN, b, "non-finite token must store NaN" + where);
      else if (!nan_token && !(std::isfinite(v) && v >= 0.0f))
        fail(c, t, k, v, ref.comb[t * hc * hc + k], b,
             fmt::format("entry {} is not a finite value >= 0{}", v, where));
    }
  }
  return c;
}

// Column sums of each finite token's comb, summed in FP64: within (hc + 1)·2^-24 of 1.
TensorComparison comb_column_sums(const MhcPreOp& op, std::span<const float> comb,
                                  const MhcPreReference& ref) {
  const uint64_t rows = op.shape().rows, hc = op.shape().hc;
  const double tol = col_sum_tolerance_fp32(hc);
  TensorComparison c = property(
      "hc_comb column sums", rows, hc,
      fmt::format("|sum_i C_ij - 1| <= (hc+1)*2^-24 = {:.3g} (FP64 sum; docs/spec/numerics.md §3)",
                  tol));
  c.tol.abs = tol;
  for (uint64_t t = 0; t < rows; ++t) {
    if (std::isnan(ref.kernel[t * hc * hc])) continue;
    for (uint64_t j = 0; j < hc; ++j) {
      double s = 0.0;
      for (uint64_t i = 0; i < hc; ++i) s += comb[(t * hc + i) * hc + j];
      const double dev = std::fabs(s - 1.0);
      if (std::isfinite(dev)) c.max_abs = std::max(c.max_abs, dev);
      if (!(dev <= tol))
        fail(c, t, j, s, 1.0, 0,
             fmt::format("column sum 1 {:+.3g}: |delta| > {:.3g} at (token {}, column j {})",
                         s - 1.0, tol, t, j));
    }
  }
  return c;
}

// Row sums of each finite token's comb within the Birkhoff–Hopf bound of the oracle's K for
// an FP32 backend (u = fp32_u) whose K is within comb_log_error of the oracle's.
TensorComparison comb_row_sums(const MhcPreOp& op, std::span<const float> comb,
                               const MhcPreReference& ref, const MhcPreBounds& bounds,
                               const BoundModel& bm) {
  const uint64_t rows = op.shape().rows, hc = op.shape().hc;
  TensorComparison c = property(
      "hc_comb row sums (Birkhoff-Hopf bound)", rows, hc,
      "max_i |sum_j C_ij - 1| <= sinkhorn_row_bound(K, hc, iters, hc_eps, u, k_log_error)");
  for (uint64_t t = 0; t < rows; ++t) {
    const std::span<const double> K(ref.kernel.data() + t * hc * hc, hc * hc);
    if (std::isnan(K[0])) continue;
    const SinkhornBound b =
        sinkhorn_row_bound(K, hc, op.shape().iters, op.hc_eps, bm.fp32_u, bounds.comb_log_error[t]);
    c.tol.abs = std::max(c.tol.abs, b.row_bound);
    for (uint64_t i = 0; i < hc; ++i) {
      double s = 0.0;
      for (uint64_t j = 0; j < hc; ++j) s += comb[(t * hc + i) * hc + j];
      const double dev = std::fabs(s - 1.0);
      if (std::isfinite(dev)) c.max_abs = std::max(c.max_abs, dev);
      if (!(dev <= b.row_bound))
        fail(c, t, i, s, 1.0, 0,
             fmt::format("row sum 1 {:+.3g}: |delta| > bound {:.3g} (kappa {:.3g}) at (token {}, "
                         "row i {})",
                         s - 1.0, b.row_bound, b.kappa, t, i));
    }
  }
  return c;
}

TensorComparison comb_class(const MhcPreOp& op, std::span<const float> comb,
                            const MhcPreReference& ref, const MhcPreBounds& bounds,
                            const BoundModel& bm) {
  const uint64_t rows = op.shape().rows, hc = op.shape().hc;
  const SinkhornClassCheck k = sinkhorn_class_check(op, comb, ref, bounds, bm);
  TensorComparison c =
      property("hc_comb Sinkhorn class", rows, hc * hc,
               "|log(C_ij/K_ij) - log(C_i0/K_i0) - log(C_0j/K_0j) + log(C_00/K_00)| <= "
               "4*(k_log_error + (2*iters+1)*u)");
  c.max_rel = k.worst_ratio;
  c.failures = k.violations;
  if (k.violations > 0) {
    const uint64_t e = (k.token * hc + k.i) * hc + k.j;
    c.first_bad = Mismatch{k.token,
                           k.i * hc + k.j,
                           comb[e],
                           ref.comb[e],
                           bits_of(comb[e]),
                           fmt::format("cross ratio {:.3g} x its bound at (token {}, i {}, j {})",
                                       k.worst_ratio, k.token, k.i, k.j)};
  }
  return c;
}

// Every comb entry against the FP64 oracle's, under the scaling-vector bound of
// mhc_sinkhorn_entry_bound.cpp: |C - C64| <= C64*e^(b64)*(expm1(b32) + expm1(b64)), b32 =
// sinkhorn_entry_log_bound(hc, iters, u, k_log_error), b64 the same with 2^-53 and 0 (the
// oracle's own Sinkhorn), times 1 + 8*2^-53 for this FP64 evaluation. Tokens whose FP64 iterates
// come within e^(b32 + 2*b64) of FP32's subnormal range are outside the bound's domain and not
// compared (their FP32 roundings have no relative bound); non-finite tokens must store NaN.
TensorComparison comb_elements(const MhcPreOp& op, std::span<const float> comb,
                               const MhcPreReference& ref, const MhcPreBounds& bounds,
                               const BoundModel& bm) {
  const uint64_t rows = op.shape().rows, hc = op.shape().hc, iters = op.shape().iters;
  const uint64_t n = hc * hc;
  std::vector<double> bound(rows * n, 0.0);
  std::vector<uint8_t> mask(rows * n, 1);
  const double b64 = sinkhorn_entry_log_bound(hc, iters, kFp64UnitRoundoff);
  uint64_t outside = 0;
  for (uint64_t t = 0; t < rows; ++t) {
    const std::span<const double> K(ref.kernel.data() + t * n, n);
    if (std::isnan(K[0])) continue;  // NaN must meet NaN (bound 0)
    const double b32 = sinkhorn_entry_log_bound(hc, iters, bm.fp32_u, bounds.comb_log_error[t]);
    const double lo = sinkhorn_min_iterate(K, hc, iters, op.hc_eps);
    if (!(lo * std::exp(-(b32 + 2.0 * b64)) >= kFp32MinNormal)) {
      ++outside;
      std::fill(mask.begin() + static_cast<int64_t>(t * n),
                mask.begin() + static_cast<int64_t>((t + 1) * n), uint8_t{0});
      continue;
    }
    const double rel =
        std::exp(b64) * (std::expm1(b32) + std::expm1(b64)) * (1.0 + 8.0 * kFp64UnitRoundoff);
    for (uint64_t k = 0; k < n; ++k) bound[t * n + k] = ref.comb[t * n + k] * rel;
  }
  const std::string formula = fmt::format(
      "|C - C64| <= C64*e^b64*(expm1(b32) + expm1(b64)), b = scaling-vector bound, linear in "
      "iters (sinkhorn_entry_log_bound; docs/spec/numerics.md §3); {} token(s) outside its "
      "domain (FP32 subnormal iterates) not compared",
      outside);
  return at(compare_f32_bounded("hc_comb (backend vs FP64 Sinkhorn)", comb, ref.comb, n,
                                ElementBounds{bound, mask, formula}),
            "i", hc, "j");
}

TensorComparison count_check(uint64_t got, uint64_t want) {
  TensorComparison c = property("non-finite token count", 1, 1,
                                "HcDiagnostics.nonfinite_tokens = the oracle's count");
  c.dtype = "u64";
  if (got != want)
    fail(
        c, 0, 0, static_cast<double>(got), static_cast<double>(want), got,
        fmt::format("backend counted {} tokens with non-finite streams, the oracle {}", got, want));
  return c;
}

}  // namespace

AgreementReport judge_mhc_pre(const MhcPreOp& op, const MhcPreInputs& in, const MhcPreOutputs& out,
                              const std::string& backend, uint64_t seed, const BoundModel& bm) {
  const uint64_t hc = op.shape().hc, h = op.shape().h;
  AgreementReport r{"hc_pre", op.params(), backend, seed, {}, {}};
  const MhcPreReference ref = mhc_pre(op, in, Mode::faithful);
  const MhcPreBounds b = mhc_pre_bounds(op, in, ref, bm);
  require_size(op.params(), "comb output", out.comb.size(), ref.comb.size());

  r.checks.push_back(at(compare_f32_bounded("hc_post", out.post, ref.post, hc,
                                            bounds_of(b.post,
                                                      "2*(sigma' <= 1/4 on the mix error + "
                                                      "sigma rounding)")),
                        "stream", 0, ""));
  r.checks.push_back(at(compare_bf16_bounded("norm_output (block input)", out.block_in,
                                             ref.block_in, h, bounds_of(b.block_in, b.formula)),
                        "dim", 0, ""));
  r.checks.push_back(comb_entries(op, out.comb, ref));
  r.checks.push_back(comb_column_sums(op, out.comb, ref));
  r.checks.push_back(comb_row_sums(op, out.comb, ref, b, bm));
  r.checks.push_back(comb_class(op, out.comb, ref, b, bm));
  r.checks.push_back(comb_elements(op, out.comb, ref, b, bm));
  r.checks.push_back(count_check(out.diagnostics.nonfinite_tokens, ref.nonfinite_tokens));

  const MhcPreReference exact = mhc_pre(op, in, Mode::exact);
  r.reported.push_back(compare_f64("norm_output (exact-faithful)", ref.block_in, exact.block_in, h,
                                   Tolerance{}, /*asserted=*/false));
  return r;
}

AgreementReport judge_mhc_post(const MhcPostOp& op, const MhcPostInputs& in,
                               std::span<const float> out, const std::string& backend,
                               uint64_t seed, const BoundModel& bm) {
  const uint64_t hc = op.shape().hc, h = op.shape().h;
  AgreementReport r{"hc_post", op.params(), backend, seed, {}, {}};
  const std::vector<double> want = mhc_post(op, in);
  const std::vector<double> bound = mhc_post_bounds(op, in, bm);
  r.checks.push_back(at(compare_f32_bounded("hc_streams (post)", out, want, mul(hc, h),
                                            bounds_of(bound, mhc_post_bounds_formula())),
                        "stream", h, "dim"));
  return r;
}

AgreementReport judge_mhc_head(const MhcHeadOp& op, const MhcHeadInputs& in,
                               const MhcHeadOutputs& out, const std::string& backend, uint64_t seed,
                               const BoundModel& bm) {
  const uint64_t h = op.shape().h;
  AgreementReport r{"hc_head", op.params(), backend, seed, {}, {}};
  const MhcHeadReference ref = mhc_head(op, in, Mode::faithful);
  const std::vector<double> bound = mhc_head_bounds(op, in, ref, bm);
  r.checks.push_back(at(compare_bf16_bounded("hidden_states (head)", out.output, ref.output, h,
                                             bounds_of(bound, mhc_head_bounds_formula())),
                        "dim", 0, ""));
  r.checks.push_back(count_check(out.diagnostics.nonfinite_tokens, ref.nonfinite_tokens));
  const MhcHeadReference exact = mhc_head(op, in, Mode::exact);
  r.reported.push_back(compare_f64("hidden_states (exact-faithful)", ref.output, exact.output, h,
                                   Tolerance{}, /*asserted=*/false));
  return r;
}

AgreementReport judge_mhc_expand(const MhcExpandOp& op, std::span<const uint16_t> input,
                                 std::span<const float> streams, const std::string& backend,
                                 uint64_t seed) {
  const uint64_t hc = op.shape().hc, h = op.shape().h;
  AgreementReport r{"hc_expand", op.params(), backend, seed, {}, {}};
  Tolerance exact;
  exact.formula = "exact: a BF16 value widens to FP32 without rounding";
  r.checks.push_back(
      at(compare_f32("hc_streams (expand)", streams, mhc_expand(op, input), mul(hc, h), exact),
         "stream", h, "dim"));
  return r;
}

// --- low-rank ---------------------------------------------------------------------------------
namespace {

// A stored scratch tensor against oracle values under per-element bounds.
TensorComparison scratch_check(std::string name, const MhcScratch& got,
                               const std::vector<double>& want, uint64_t cols,
                               const MhcStageBounds& b) {
  const ElementBounds eb = bounds_of(b.bound, b.formula);
  return got.bf16.empty() ? compare_f32_bounded(std::move(name), got.f32, want, cols, eb)
                          : compare_bf16_bounded(std::move(name), got.bf16, want, cols, eb);
}

// What a stage read equals what the producing stage stored, bit for bit (NaN meets NaN).
TensorComparison intact(std::string name, const MhcScratch& stored, const MhcScratch& read,
                        uint64_t cols) {
  Tolerance exact;
  exact.formula = "exact: the stage reads what the previous stage stored";
  const std::vector<double> want = stored.values();
  return read.bf16.empty() ? compare_f32(std::move(name), read.f32, want, cols, exact)
                           : compare_bf16(std::move(name), read.bf16, want, cols, exact);
}

}  // namespace

AgreementReport judge_mhc_lowrank(const MhcLowRankRun& run, const MhcLowRankInputs& in,
                                  const std::string& backend, uint64_t seed, const BoundModel& bm) {
  const MhcLowRankDims& d = run.dims;
  const uint64_t W = mul(d.hc, d.h);
  const bool slab = run.path == MhcLowRankPath::slab;
  AgreementReport r{"hc_lowrank",
                    fmt::format("hc_lowrank_{}(rows={},hc={},h={},r={})", to_string(run.path),
                                d.rows, d.hc, d.h, d.r),
                    backend,
                    seed,
                    {},
                    {}};
  const MhcLowRankSlabWeights sw = slab_weights(in.weights);
  const std::vector<double> w_down = slab ? widen_bf16(sw.w_down) : widen(in.weights.w_down);
  const std::vector<double> w_inject = slab ? widen_bf16(sw.w_inject) : widen(in.weights.w_inject);
  const std::vector<double> w_up = slab ? widen_bf16(sw.w_up) : widen(in.weights.w_up);
  auto stored = [&](std::vector<double> v) { return slab ? rounded_bf16(std::move(v)) : v; };
  const MhcLowRankPath path = run.path;

  // norm, on the streams it read.
  uint64_t nonfinite = 0;
  const std::vector<double> n =
      mhc_lowrank_norm(d, run.norm.streams, in.weights.norm_w, &nonfinite);
  r.checks.push_back(at(scratch_check("hc_normed (norm)", run.norm.normed, stored(n), W,
                                      mhc_lowrank_norm_bounds(d, n, in.weights.norm_w, path, bm)),
                        "stream", d.h, "dim"));

  // down (split: and post), on the normed it read.
  const std::vector<double> dn = run.down.normed.values();
  r.checks.push_back(intact("hc_normed intact (down input)", run.norm.normed, run.down.normed, W));
  r.checks.push_back(
      at(scratch_check("hc_low (down)", run.down.low, stored(mhc_lowrank_down(d, dn, w_down)), d.r,
                       mhc_lowrank_down_bounds(d, dn, w_down, path, bm)),
         "k", 0, ""));
  if (!slab) {
    const MhcStageBounds pb = mhc_lowrank_split_post_bounds(d, dn, w_inject, bm);
    r.checks.push_back(
        at(compare_f32_bounded("hc_post (down)", run.down.post,
                               mhc_lowrank_post(d, mhc_lowrank_inject(d, dn, w_inject)), d.hc,
                               bounds_of(pb.bound, pb.formula)),
           "stream", 0, ""));
  } else {
    const std::vector<double> in_n = run.inject.normed.values();
    r.checks.push_back(
        intact("hc_normed intact (inject input)", run.norm.normed, run.inject.normed, W));
    r.checks.push_back(at(scratch_check("hc_inj_pre (inject)", run.inject.inj_pre,
                                        stored(mhc_lowrank_inject(d, in_n, w_inject)), d.hc,
                                        mhc_lowrank_inject_bounds(d, in_n, w_inject, bm)),
                          "stream", 0, ""));
    const std::vector<double> up_low = run.up.low.values();
    r.checks.push_back(intact("hc_low intact (up input)", run.down.low, run.up.low, d.r));
    r.checks.push_back(
        at(scratch_check("hc_up_pre (up)", run.up.up_pre, stored(mhc_lowrank_up(d, up_low, w_up)),
                         W, mhc_lowrank_up_bounds(d, up_low, w_up, bm)),
           "stream", d.h, "dim"));
  }

  // collapse, on what it read.
  const std::vector<double> cn = run.collapse.normed.values();
  r.checks.push_back(
      intact("hc_normed intact (collapse input)", run.norm.normed, run.collapse.normed, W));
  if (!slab) {
    const std::vector<double> cl = run.collapse.low.values();
    r.checks.push_back(
        intact("hc_low intact (collapse input)", run.down.low, run.collapse.low, d.r));
    const MhcStageBounds cb = mhc_lowrank_split_collapse_bounds(d, cn, cl, w_up, bm);
    r.checks.push_back(at(
        compare_bf16_bounded("norm_output (collapse)", run.collapse.block_in,
                             rounded_bf16(mhc_lowrank_collapse(d, cn, mhc_lowrank_up(d, cl, w_up))),
                             d.h, bounds_of(cb.bound, cb.formula)),
        "dim", 0, ""));
  } else {
    const std::vector<double> cu = run.collapse.up_pre.values();
    const std::vector<double> ci = run.collapse.inj_pre.values();
    r.checks.push_back(
        intact("hc_up_pre intact (collapse input)", run.up.up_pre, run.collapse.up_pre, W));
    r.checks.push_back(intact("hc_inj_pre intact (collapse input)", run.inject.inj_pre,
                              run.collapse.inj_pre, d.hc));
    const MhcStageBounds cb = mhc_lowrank_slab_collapse_bounds(d, cn, cu, bm);
    r.checks.push_back(at(compare_bf16_bounded("norm_output (collapse)", run.collapse.block_in,
                                               rounded_bf16(mhc_lowrank_collapse(d, cn, cu)), d.h,
                                               bounds_of(cb.bound, cb.formula)),
                          "dim", 0, ""));
    const MhcStageBounds pb = mhc_lowrank_slab_post_bounds(d, ci, bm);
    r.checks.push_back(
        at(compare_f32_bounded("hc_post (collapse)", run.collapse.post, mhc_lowrank_post(d, ci),
                               d.hc, bounds_of(pb.bound, pb.formula)),
           "stream", 0, ""));
  }
  r.checks.push_back(count_check(run.diagnostics.nonfinite_tokens, nonfinite));

  // The whole chain from the original inputs (reported): faithful vs the backend, exact vs
  // faithful.
  const MhcLowRankReference faithful =
      hc_lowrank(d.rows, d.hc, d.h, d.r, d.rms_eps, in.streams, in.weights, slab, Mode::faithful);
  const MhcLowRankReference exact =
      hc_lowrank(d.rows, d.hc, d.h, d.r, d.rms_eps, in.streams, in.weights, slab, Mode::exact);
  r.reported.push_back(compare_bf16("norm_output (backend vs chain oracle)", run.collapse.block_in,
                                    faithful.block_in, d.h, Tolerance{}, /*asserted=*/false));
  r.reported.push_back(compare_f64("norm_output (exact-faithful)", faithful.block_in,
                                   exact.block_in, d.h, Tolerance{}, /*asserted=*/false));
  return r;
}

TensorComparison compare_mhc_lowrank_paths(const MhcLowRankDims& dims, const MhcLowRankInputs& in,
                                           std::span<const uint16_t> split_block_in,
                                           std::span<const uint16_t> slab_block_in,
                                           const BoundModel& bm) {
  require_size("compare_hc_lowrank_paths", "slab block_in", slab_block_in.size(),
               mul(dims.rows, dims.h));
  const MhcStageBounds b = mhc_lowrank_path_bounds(dims, in.streams, in.weights, bm);
  return at(compare_bf16_bounded("norm_output split vs slab", split_block_in,
                                 widen_bf16(slab_block_in), dims.h, bounds_of(b.bound, b.formula)),
            "dim", 0, "");
}

}  // namespace bufferlab::oracle
