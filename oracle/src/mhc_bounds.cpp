// Derived per-element bounds of the mHC ops (docs/spec/numerics.md §3–§4, §9): a backend's stored
// value against the oracle fed the same stored inputs.
//
// Notation (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1): u is the unit
// roundoff of the backend's FP32 math (bm.fp32_u) or of its BF16 GEMM accumulation
// (bm.gemm_u), γ_n = n·u/(1 − n·u), u64 = 2^-53 for the oracle's own FP64. A computed value
// that is the exact one times at most n factors (1 + δ)^(±1), |δ| ≤ u, is within γ_n of it
// (Lemma 3.1); a sum of K products in any order (sequential, SIMD lanes, blocked GEMV, warp
// trees) holds at most K − 1 additions on every path, so |Σ̂ − Σ| ≤ γ_K·Σ|terms| with the
// product rounding counted (BF16 × BF16 products are exact in FP32: γ_(K−1) ≤ γ_K).
// Gradual underflow adds at most 2^-150 per operation whose result is subnormal: K·2^-149
// covers a dot product of length K.
//
// Elementary functions (the backends' FP32 forms, cpu_mhc_common.h / mhc_kernels.h):
//   σ(z) = 1/(1 + expf(−z)): expf within exp_ulps ULPs (≤ 2·exp_ulps·u relative), the add
//     and the division: σ̂ = σ·(1 + θ), |θ| ≤ γ_(2·exp_ulps+2) =: ε_σ; expf(−z) overflowing
//     (z < −88.7) returns 0 for σ < 2^-127: absolute 2^-126 covers it.
//   silu(z) = z/(1 + expf(−z)) or z·σ(z): |θ| ≤ γ_(2·exp_ulps+3) =: ε_silu; absolute 2^-120
//     covers the overflow branch (|silu| ≤ 89·e^-88.7 < 2^-120).
//   Lipschitz constants: σ' ≤ 1/4, |silu'| ≤ 1.0998 < 1.1.
//   rsqrt(a): CPU 1/sqrtf (2 roundings), CUDA rsqrtf (≤ 2 ULP = 4u): 4 factors.
//
// A stored BF16 value bf16(ŷ) against the faithful bf16(y), |ŷ − y| ≤ e:
//   |bf16(ŷ) − bf16(y)| ≤ e + ulp_bf16(|y| + e) (half a ULP on each side: the "one ULP of the
//   storage format per stored value" of docs/spec/numerics.md §9). FP32 stores are the computed
//   values.
//
// Domain: every value and partial sum below FLT_MAX (an FP32 overflow is outside any bound),
// rms_eps ≥ 2^-100 (it then dominates the underflow of tiny squares).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mhc.h"
#include "mhc_common.h"

namespace bufferlab::oracle {

namespace {

// kU64, kSigmoidAbs, kSiluAbs, kSiluLipschitz, silu_rel, dot_error: oracle_common.h.
constexpr double kBf16Unit = kBf16UnitRoundoff;
constexpr double kSigmoidLipschitz = 0.25;
// The oracle's own FP64 evaluation of any chain here: a few dozen roundings at most, relative.
constexpr double kOracleRel = 64.0 * kU64;

double sigma_rel(const BoundModel& bm) { return gamma(2.0 * bm.exp_ulps + 2.0, bm.fp32_u); }

// |σ̂(ẑ) − σ(z)| for |ẑ − z| ≤ e_z: the Lipschitz step, σ's rounding at the perturbed point,
// the overflow branch, the underflow of the quotient (bounds.h: one rounding, 2^-150).
double sigma_error(double z, double e_z, const BoundModel& bm) {
  const double lip = kSigmoidLipschitz * e_z;
  return fp32_bound(lip + sigma_rel(bm) * (sigmoid(z) + lip) + kSigmoidAbs, 1.0);
}

// |silû(ĝ) − silu(g)| for |ĝ − g| ≤ e_g; + the quotient's underflow (bounds.h).
double silu_error(double g, double e_g, const BoundModel& bm) {
  const double lip = kSiluLipschitz * e_g;
  return fp32_bound(lip + silu_rel(bm) * (std::fabs(silu(g)) + lip) + kSiluAbs, 1.0);
}

// The error of ẑ = fl(fl(m̂·s) + b) (or an FMA) for |m̂ − m| ≤ e_m: (m̂ − m)·s·(1 + δ1)(1 + δ2)
// + m·s·(δ1 + δ2 + δ1δ2) + b·δ2, + the product's underflow (bounds.h; a subnormal sum is
// exact).
double affine_error(double m, double e_m, double s, double b, double u) {
  return fp32_bound(std::fabs(s) * e_m * (1.0 + gamma(2.0, u)) + gamma(2.0, u) * std::fabs(m * s) +
                        u * std::fabs(b),
                    1.0);
}

// z = v / hc (or v·(1/hc): 2 roundings) for |v̂ − v| ≤ e_v; + the quotient's (or product's)
// underflow (bounds.h).
double scaled_error(double v, double e_v, uint64_t hc, double u) {
  const double n = static_cast<double>(hc);
  return fp32_bound(e_v / n * (1.0 + gamma(2.0, u)) + gamma(2.0, u) * std::fabs(v / n), 1.0);
}

// --- the flattened RMS and the mix GEMV (pre and head) -----------------------------------------
//
// The backends read x̂ = x·2^-max(e, 0) (exact; max|x| = m·2^e), rs = rsqrt(Σx̂²/n + eps·2^-2e)
// and mix_m = rs·Σ_k fn_mk·x̂_k (= r·(fn·x), r = rs·2^-max(e,0)), n = K = hc·h. Factors
// (1 + δ) in r: the n squares and n − 1 additions (n), /n (1), eps → FP32 (1), + eps (1),
// rsqrt (4): n + 7 (a relative error of the argument of rsqrt is halved by it; counted in
// full). The dot product: γ_n·Σ|fn·x̂|. The final product rs·dot: 1. Every factor multiplies
// each term of r·Σ|fn·x| alike, so |m̂ − m| ≤ γ_(2n+8)·r·Σ_k|fn_mk·x_k|; tiny squares below
// FLT_MIN err by 2^-149 absolute each, ≤ 2^-149/eps relative to the mean + eps: counted as one
// more relative term. Underflow in the dot: n·2^-149 in the scaled domain, times rs.
struct MixError {
  double r = 0.0;         // the exact RMS factor
  double rs_scale = 1.0;  // rs = r·2^max(e, 0): the factor of the scaled domain
};
MixError token_rms(const float* x, uint64_t K, double eps) {
  MixError m;
  m.r = rms_factor(x, K, eps);
  float top = 0.0f;
  for (uint64_t k = 0; k < K; ++k) top = std::max(top, std::fabs(x[k]));
  int e = 0;
  (void)std::frexp(top, &e);
  m.rs_scale = m.r * std::ldexp(1.0, std::max(e, 0));
  return m;
}

double mix_error(const float* x, uint64_t K, const float* fn_row, const MixError& m, double eps,
                 const BoundModel& bm) {
  double abs_sum = 0.0;
  for (uint64_t k = 0; k < K; ++k) abs_sum += std::fabs(static_cast<double>(fn_row[k]) * x[k]);
  const double n2 = 2.0 * static_cast<double>(K) + 8.0;
  const double rel = gamma(n2, bm.fp32_u) + 0x1p-149 / eps + gamma(n2, kU64);
  return rel * m.r * abs_sum + m.rs_scale * static_cast<double>(K) * kUnderflowPerOp;
}

// Block input y_d = Σ_i p_i·x_id from weights p̂_i within e_p[i]: |ŷ − y| ≤ Σ_i e_p,i·|x_id|·
// (1 + γ_hc) + γ_hc·Σ_i p_i·|x_id| (hc products, hc − 1 additions) + hc·2^-149, plus the
// oracle's γ_hc(u64)·Σ p|x|; then one BF16 ULP for the store.
void block_in_bounds(const float* x, const double* pre, const double* e_pre, uint64_t hc,
                     uint64_t h, double y_scale_u, const double* y, double* out) {
  const double g = gamma(static_cast<double>(hc), y_scale_u) + gamma(static_cast<double>(hc), kU64);
  for (uint64_t d = 0; d < h; ++d) {
    double e = static_cast<double>(hc) * kUnderflowPerOp;
    for (uint64_t i = 0; i < hc; ++i) {
      const double ax = std::fabs(static_cast<double>(x[i * h + d]));
      e += e_pre[i] * ax * (1.0 + g) + g * pre[i] * ax;
    }
    out[d] = stored_bf16(y[d], e);
  }
}

// Pre weights p_i = σ(z_i) + hc_eps with z_i = mix_i·s + b_i: e_σ, then + hc_eps (its FP32
// rounding u·eps and the add: u·(σ + eps + e_σ)).
double pre_weight_error(double mix, double e_mix, double s, double b, double hc_eps,
                        const BoundModel& bm) {
  const double u = bm.fp32_u;
  const double z = mix * s + b;
  const double e_s = sigma_error(z, affine_error(mix, e_mix, s, b, u), bm);
  return (1.0 + u) * e_s + u * (sigmoid(z) + 3.0 * hc_eps);
}

}  // namespace

// --- mhc_pre ---------------------------------------------------------------------------------
//
// post_i = 2σ(z), z = mix_(hc+i)·s1 + b: 2·e_σ (×2 is exact), FP32 store = the computed value.
// block_in: block_in_bounds with e_pre,i = pre_weight_error.
// comb_log_error (per token, the max over the hc rows): the logits l_ij = mix·s2 + b err by
// e_l (affine_error); log-softmax is 2-Lipschitz in the max norm (|Δ log p_j| ≤ |Δl_j| +
// max_k |Δl_k|): 2·max_j e_l. The backend's softmax rounds l − M (absolute u·|l − M| in the
// exponent), expf (2·exp_ulps·u), the sum of hc terms (hc − 1), the division (1), hc_eps →
// FP32 (1) and its add (1; adding eps > 0 to p can only shrink a relative error of p): a
// relative θ ≤ γ_(2·exp_ulps+hc+2), i.e. |log(1 + θ)| ≤ −log(1 − θ). The oracle's FP64 K errs
// by the same with u64.
MhcPreBounds mhc_pre_bounds(const MhcPreOp& op, const MhcPreInputs& in, const MhcPreReference& ref,
                            const BoundModel& bm) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h, K = mul(hc, h), mix = s.mix;
  const std::string p = op.params();
  require_size(p, "streams", in.streams.size(), mul(rows, K));
  require_size(p, "fn", in.fn.size(), mul(mix, K));
  require_size(p, "reference mix", ref.mix.size(), mul(rows, mix));
  const double u = bm.fp32_u;
  const double s0 = in.scale[0], s1 = in.scale[1], s2 = in.scale[2];
  const double softmax_rel =
      -std::log1p(-gamma(2.0 * bm.exp_ulps + static_cast<double>(hc) + 2.0, u)) -
      std::log1p(-gamma(2.0 * bm.exp_ulps + static_cast<double>(hc) + 2.0, kU64));

  MhcPreBounds b;
  b.post.assign(mul(rows, hc), 0.0);
  b.block_in.assign(mul(rows, h), 0.0);
  b.comb_log_error.assign(rows, 0.0);
  std::vector<double> e_mix(mix), e_pre(hc);
  for (uint64_t t = 0; t < rows; ++t) {
    const float* x = in.streams.data() + t * K;
    const double* m = ref.mix.data() + t * mix;
    if (!all_finite(x, K)) continue;  // NaN token: compared as NaN, bound unused
    const MixError me = token_rms(x, K, op.rms_eps);
    for (uint64_t r = 0; r < mix; ++r)
      e_mix[r] = mix_error(x, K, in.fn.data() + r * K, me, op.rms_eps, bm);
    for (uint64_t i = 0; i < hc; ++i) {
      e_pre[i] = pre_weight_error(m[i], e_mix[i], s0, in.bias[i], op.hc_eps, bm);
      const double z = m[hc + i] * s1 + in.bias[hc + i];
      const double e_z = affine_error(m[hc + i], e_mix[hc + i], s1, in.bias[hc + i], u);
      b.post[t * hc + i] = 2.0 * sigma_error(z, e_z, bm) + kOracleRel * 2.0 * sigmoid(z);
    }
    block_in_bounds(x, ref.pre.data() + t * hc, e_pre.data(), hc, h, u, ref.block_in.data() + t * h,
                    b.block_in.data() + t * h);
    double k = 0.0;
    for (uint64_t i = 0; i < hc; ++i) {
      double e_max = 0.0, lo = INFINITY, hi = -INFINITY;
      for (uint64_t j = 0; j < hc; ++j) {
        const uint64_t r = 2 * hc + i * hc + j;
        const double l = m[r] * s2 + in.bias[r];
        e_max = std::max(e_max, affine_error(m[r], e_mix[r], s2, in.bias[r], u));
        lo = std::min(lo, l);
        hi = std::max(hi, l);
      }
      k = std::max(k, 2.0 * e_max + (u + kU64) * (hi - lo + 2.0 * e_max) + softmax_rel);
    }
    b.comb_log_error[t] = k;
  }
  b.formula = fmt::format(
      "mix: gamma_(2n+8)(u)*r*sum|fn*x| (n = hc*h = {}, u = {:.3g}); pre/post: sigma' <= 1/4 + "
      "gamma_(2*exp_ulps+2) sigma rounding; block_in: sum_i e_pre*|x| + gamma_hc*sum pre*|x| + "
      "ulp_bf16; comb log error: 2*max e_logit + u*range + gamma_(2*exp_ulps+hc+2)",
      K, u);
  return b;
}

// --- Sinkhorn class check -------------------------------------------------------------------
//
// Every normalisation divides a whole row or column by one (rounded) number: a diagonal
// scaling, whatever its error, plus one rounding per entry (the division, or the multiply by
// a rounded reciprocal). Over the 2·iters normalisations (first column, iters − 1 rounds,
// final exact column) that is K∘E with |log E| ≤ (2·iters + 1)·u' (one spare), u' = u/(1 − u),
// on top of the backend's K within k = comb_log_error of the oracle's. In the cross ratio
// the diagonals cancel and four E's remain: |X| ≤ 4·(k + (2·iters + 1)·u'). FP64 evaluation of
// X (four quotients, four logs, three additions): ≤ 8·u64·Σ|terms| + 8·u64.
// The per-rounding relative error u' holds for normal FP32 values only (bounds.h's underflow
// rule): a subnormal (below 2^-126) is rounded to an absolute 2^-150, a relative error up to
// 2^-150/|c| (4% at 3.8e-44, reached at comb logit ranges ~60). Cross ratios that involve a
// subnormal entry (fp32_subnormal) are therefore not judged here; those entries stay checked
// by "entries >= 0" and the column sums (absolute checks).
namespace {
bool subnormal(float c) { return fp32_subnormal(c); }
}  // namespace

SinkhornClassCheck sinkhorn_class_check(const MhcPreOp& op, std::span<const float> comb,
                                        const MhcPreReference& ref, const MhcPreBounds& bounds,
                                        const BoundModel& bm) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc;
  require_size(op.params(), "comb", comb.size(), mul(rows, hc * hc));
  const double up = bm.fp32_u / (1.0 - bm.fp32_u);
  SinkhornClassCheck out;
  std::vector<double> lr(hc * hc);
  for (uint64_t t = 0; t < rows; ++t) {
    const double* K = ref.kernel.data() + t * hc * hc;
    if (std::isnan(K[0])) continue;  // non-finite token
    const float* C = comb.data() + t * hc * hc;
    bool bad_entry = false;
    uint64_t bi = 0, bj = 0;
    for (uint64_t k = 0; k < hc * hc; ++k) {
      const double c = C[k];
      if (!(c > 0.0) || !std::isfinite(c)) {
        if (!bad_entry) bi = k / hc, bj = k % hc;
        bad_entry = true;
        continue;
      }
      lr[k] = std::log(c / K[k]);
    }
    const double bound =
        4.0 * (bounds.comb_log_error[t] + (2.0 * static_cast<double>(s.iters) + 1.0) * up);
    double worst = 0.0;
    uint64_t wi = 0, wj = 0;
    if (bad_entry) {
      worst = INFINITY, wi = bi, wj = bj;
    } else {
      for (uint64_t i = 0; i < hc; ++i)
        for (uint64_t j = 0; j < hc; ++j) {
          if (subnormal(C[i * hc + j]) || subnormal(C[i * hc]) || subnormal(C[j]) ||
              subnormal(C[0]))
            continue;
          const double x = lr[i * hc + j] - lr[i * hc] - lr[j] + lr[0];
          const double eval = 8.0 * kU64 *
                              (std::fabs(lr[i * hc + j]) + std::fabs(lr[i * hc]) +
                               std::fabs(lr[j]) + std::fabs(lr[0]) + 1.0);
          const double ratio = std::fabs(x) / (bound + eval);
          if (ratio > worst) worst = ratio, wi = i, wj = j;
        }
    }
    if (worst > 1.0) ++out.violations;
    if (worst > out.worst_ratio) out.worst_ratio = worst, out.token = t, out.i = wi, out.j = wj;
  }
  return out;
}

// --- hc_post --------------------------------------------------------------------------------
//
// Sinkhorn form: out = post_j·b + Σ_i comb_ij·x_i, hc + 1 products and hc additions in FP32:
// |ô − o| ≤ γ_(hc+1)·(|post_j·b| + Σ_i|comb_ij·x_i|) + (2·hc + 1)·2^-150, plus the oracle's
// γ_(hc+1)(u64)·the same sum. Low-rank form: x + post·b: γ_2·(|x| + |post·b|) + 2·2^-150.
// The FP32 store is the computed value.
std::vector<double> mhc_post_bounds(const MhcPostOp& op, const MhcPostInputs& in,
                                    const BoundModel& bm) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h;
  require_post_inputs(op, in);
  const double n = s.lowrank ? 2.0 : static_cast<double>(hc) + 1.0;
  const double g = gamma(n, bm.fp32_u) + gamma(n, kU64);
  std::vector<double> out(in.streams.size());
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t j = 0; j < hc; ++j)
      for (uint64_t d = 0; d < h; ++d) {
        const double b = bf16_value(in.block_out[t * h + d]);
        double a = std::fabs(static_cast<double>(in.post[t * hc + j]) * b);
        if (s.lowrank) {
          a += std::fabs(static_cast<double>(in.streams[(t * hc + j) * h + d]));
        } else {
          for (uint64_t i = 0; i < hc; ++i)
            a += std::fabs(static_cast<double>(in.comb[(t * hc + i) * hc + j]) *
                           in.streams[(t * hc + i) * h + d]);
        }
        out[(t * hc + j) * h + d] = g * a + n * kUnderflowPerOp;
      }
  return out;
}

std::string mhc_post_bounds_formula() {
  return "gamma_(hc+1)(u)*(|post_j*b| + sum_i |comb_ij*x_i|) (Sinkhorn form) or "
         "gamma_2(u)*(|x| + |post*b|) (low-rank form), + FP64 oracle and underflow terms";
}

// --- mhc_head --------------------------------------------------------------------------------
//
// As the pre step's block input: mix rows = the hc rows of fn [hc, hc·h] (mix_error),
// p_i = σ(mix_i·s0 + b_i) + hc_eps (pre_weight_error), y = Σ p_i·x_i (block_in_bounds).
std::vector<double> mhc_head_bounds(const MhcHeadOp& op, const MhcHeadInputs& in,
                                    const MhcHeadReference& ref, const BoundModel& bm) {
  const auto& s = op.shape();
  const uint64_t rows = s.rows, hc = s.hc, h = s.h, K = mul(hc, h);
  const std::string p = op.params();
  require_size(p, "streams", in.streams.size(), mul(rows, K));
  require_size(p, "fn", in.fn.size(), mul(hc, K));
  require_size(p, "reference mix", ref.mix.size(), mul(rows, hc));
  std::vector<double> out(mul(rows, h), 0.0), e_pre(hc);
  for (uint64_t t = 0; t < rows; ++t) {
    const float* x = in.streams.data() + t * K;
    if (!all_finite(x, K)) continue;
    const MixError me = token_rms(x, K, op.rms_eps);
    for (uint64_t i = 0; i < hc; ++i) {
      const double e_mix = mix_error(x, K, in.fn.data() + i * K, me, op.rms_eps, bm);
      e_pre[i] =
          pre_weight_error(ref.mix[t * hc + i], e_mix, in.scale[0], in.bias[i], op.hc_eps, bm);
    }
    block_in_bounds(x, ref.pre.data() + t * hc, e_pre.data(), hc, h, bm.fp32_u,
                    ref.output.data() + t * h, out.data() + t * h);
  }
  return out;
}

std::string mhc_head_bounds_formula() {
  return "mix: gamma_(2n+8)(u)*r*sum|fn*x|; pre: sigma' <= 1/4 + gamma_(2*exp_ulps+2); "
         "y: sum_i e_pre*|x| + gamma_hc*sum pre*|x| + ulp_bf16";
}

// --- low-rank stages --------------------------------------------------------------------------
namespace {

// Σ_k |w[o, k]·in[t, k]| for W [outs, ins].
std::vector<double> abs_products(uint64_t rows, uint64_t ins, uint64_t outs,
                                 std::span<const double> in, std::span<const double> w) {
  return row_products(rows, ins, outs, in, w, [](double p) { return std::fabs(p); });
}

// The bound of a value with error e as `path` stores it: BF16 on the slab path, else FP32.
double stored_on_path(double value, double e, MhcLowRankPath path) {
  return path == MhcLowRankPath::slab ? stored_bf16(value, e) : e;
}

// Relative error count of the per-stream norm n = ((x·2^-e)·rs)·(1 + w): rs as in the mix
// (h squares and additions, /h, eps, + eps, rsqrt: h + 7), the product by rs (1), 1 + w (1),
// the product (1): γ_(h+10)·|n|. Subnormal intermediates: x·2^-e and its product by rs at
// most 2·2^-150 each in magnitude, scaled by rs·|1 + w| ≤ 2·sqrt(h)·|1 + w| (the scaled
// maximum is ≥ 1/2), and the result's own 2^-150.
double norm_error(double n, double w, uint64_t h, double u) {
  const double hh = static_cast<double>(h);
  const double rel = gamma(hh + 10.0, u) + gamma(hh + 10.0, kU64);
  const double sub = (4.0 * 2.0 * std::sqrt(hh) * std::fabs(1.0 + w) + 1.0) * 0x1p-150;
  return rel * std::fabs(n) + sub;
}

// (1/hc)·Σ_i g_i·n_i from gates within e_g and normed values within e_n (either may be 0):
// hc products, hc − 1 additions, the scaling by 1/hc (divide, or multiply by a rounded
// reciprocal: 2): (1/hc)·[Σ_i (e_g,i·|n_i| + g_i·e_n,i + e_g,i·e_n,i)·(1 + γ) + γ·Σ_i g_i·|n_i|]
// with γ = γ_(hc+2), + hc·2^-149.
double collapse_error(const double* gate, const double* e_gate, const double* n, const double* e_n,
                      uint64_t hc, uint64_t stride, double u) {
  const double g =
      gamma(static_cast<double>(hc) + 2.0, u) + gamma(static_cast<double>(hc) + 2.0, kU64);
  double e = 0.0, a = 0.0;
  for (uint64_t i = 0; i < hc; ++i) {
    const double ni = std::fabs(n[i * stride]), en = e_n[i * stride];
    e += e_gate[i] * ni + gate[i] * en + e_gate[i] * en;
    a += gate[i] * ni;
  }
  return (e * (1.0 + g) + g * a) / static_cast<double>(hc) +
         static_cast<double>(hc) * kUnderflowPerOp;
}

}  // namespace

MhcStageBounds mhc_lowrank_norm_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                       std::span<const float> norm_w, MhcLowRankPath path,
                                       const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  require_size("hc_lowrank_norm_bounds", "normed", normed.size(), mul(d.rows, W));
  require_size("hc_lowrank_norm_bounds", "norm_w", norm_w.size(), W);
  MhcStageBounds b;
  b.bound.resize(normed.size());
  for (uint64_t k = 0; k < normed.size(); ++k) {
    const double n = normed[k];
    b.bound[k] = stored_on_path(n, norm_error(n, norm_w[k % W], d.h, bm.fp32_u), path);
  }
  b.formula = fmt::format("gamma_(h+10)(u)*|n| (h = {}){}", d.h,
                          path == MhcLowRankPath::slab ? " + ulp_bf16" : "");
  return b;
}

// low = silu(g/hc), g = W_down·normed: e_g = γ_K·Σ|W·n| (K = hc·h; FP32 products on the
// split path with u = fp32_u, exact BF16 products on the slab path with u = gemm_u), the
// scaling (scaled_error), silu (silu_error); slab: + the BF16 store.
MhcStageBounds mhc_lowrank_down_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                       std::span<const double> w_down, MhcLowRankPath path,
                                       const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  require_size("hc_lowrank_down_bounds", "normed", normed.size(), mul(d.rows, W));
  require_size("hc_lowrank_down_bounds", "w_down", w_down.size(), mul(d.r, W));
  const double u = path == MhcLowRankPath::slab ? bm.gemm_u : bm.fp32_u;
  const std::vector<double> abs = abs_products(d.rows, W, d.r, normed, w_down);
  MhcStageBounds b;
  b.bound.resize(abs.size());
  for (uint64_t t = 0; t < d.rows; ++t)
    for (uint64_t k = 0; k < d.r; ++k) {
      double v = 0.0;
      for (uint64_t c = 0; c < W; ++c) v += w_down[k * W + c] * normed[t * W + c];
      const double e_g = scaled_error(v, dot_error(abs[t * d.r + k], W, u), d.hc, bm.fp32_u);
      const double g1 = v / static_cast<double>(d.hc);
      b.bound[t * d.r + k] = stored_on_path(
          silu(g1), silu_error(g1, e_g, bm) + kOracleRel * std::fabs(silu(g1)), path);
    }
  b.formula = fmt::format(
      "silu' <= 1.1 on (gamma_K(u)*sum|W_down*n|)/hc, K = {}, + gamma_(2*exp_ulps+3) silu{}", W,
      path == MhcLowRankPath::slab ? " + ulp_bf16" : "");
  return b;
}

MhcStageBounds mhc_lowrank_inject_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                         std::span<const double> w_inject, const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  require_size("hc_lowrank_inject_bounds", "normed", normed.size(), mul(d.rows, W));
  require_size("hc_lowrank_inject_bounds", "w_inject", w_inject.size(), mul(d.hc, W));
  const std::vector<double> v = mhc_lowrank_inject(d, normed, w_inject);
  const std::vector<double> abs = abs_products(d.rows, W, d.hc, normed, w_inject);
  MhcStageBounds b;
  b.bound.resize(v.size());
  for (size_t k = 0; k < v.size(); ++k)
    b.bound[k] = stored_bf16(v[k], dot_error(abs[k], W, bm.gemm_u));
  b.formula = fmt::format("gamma_K(u_gemm)*sum|W_inject*n| + ulp_bf16, K = {}", W);
  return b;
}

MhcStageBounds mhc_lowrank_up_bounds(const MhcLowRankDims& d, std::span<const double> low,
                                     std::span<const double> w_up, const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  const std::vector<double> v = mhc_lowrank_up(d, low, w_up);
  const std::vector<double> abs = abs_products(d.rows, d.r, W, low, w_up);
  MhcStageBounds b;
  b.bound.resize(v.size());
  for (size_t k = 0; k < v.size(); ++k)
    b.bound[k] = stored_bf16(v[k], dot_error(abs[k], d.r, bm.gemm_u));
  b.formula = fmt::format("gamma_r(u_gemm)*sum|W_up*low| + ulp_bf16, r = {}", d.r);
  return b;
}

namespace {
// The gated collapse's bound per output (t, c): gate σ(up_k) at the hc inputs k = t·W + i·h + c,
// up_k known within e_up(k) (sigma_error), y = (1/hc)·Σ gate·n (collapse_error, n exact: the
// stored input), then the BF16 store of y. Shared by the split and slab collapses.
template <class UpError>
std::vector<double> collapse_bounds(const MhcLowRankDims& d, std::span<const double> normed,
                                    std::span<const double> up, std::span<const double> y,
                                    const BoundModel& bm, UpError e_up) {
  const uint64_t W = mul(d.hc, d.h);
  std::vector<double> bound(y.size()), gate(d.hc), e_gate(d.hc), zero(W, 0.0);
  for (uint64_t t = 0; t < d.rows; ++t)
    for (uint64_t c = 0; c < d.h; ++c) {
      for (uint64_t i = 0; i < d.hc; ++i) {
        const uint64_t k = t * W + i * d.h + c;
        gate[i] = sigmoid(up[k]);
        e_gate[i] = sigma_error(up[k], e_up(k), bm);
      }
      const double e = collapse_error(gate.data(), e_gate.data(), normed.data() + t * W + c,
                                      zero.data(), d.hc, d.h, bm.fp32_u);
      bound[t * d.h + c] = stored_bf16(y[t * d.h + c], e);
    }
  return bound;
}
}  // namespace

// Split collapse: up = W_up·low computed inside in FP32 (γ_r(fp32_u)·Σ|W_up·low|), the gate
// σ(up) within sigma_error, y = (1/hc)·Σ gate·n (collapse_error, n exact: the stored input),
// then the BF16 store.
MhcStageBounds mhc_lowrank_split_collapse_bounds(const MhcLowRankDims& d,
                                                 std::span<const double> normed,
                                                 std::span<const double> low,
                                                 std::span<const double> w_up,
                                                 const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  const std::vector<double> up = mhc_lowrank_up(d, low, w_up);
  const std::vector<double> abs = abs_products(d.rows, d.r, W, low, w_up);
  const std::vector<double> y = mhc_lowrank_collapse(d, normed, up);
  MhcStageBounds b;
  b.bound = collapse_bounds(d, normed, up, y, bm,
                            [&](uint64_t k) { return dot_error(abs[k], d.r, bm.fp32_u); });
  b.formula = fmt::format(
      "sigma' <= 1/4 on gamma_r(u)*sum|W_up*low| (r = {}) + gamma_(2*exp_ulps+2); "
      "(1/hc)*sum e_gate*|n| + gamma_(hc+2); + ulp_bf16",
      d.r);
  return b;
}

// Slab collapse: gate = σ(up_pre) on the stored BF16 up_pre (only σ's rounding), then as above.
MhcStageBounds mhc_lowrank_slab_collapse_bounds(const MhcLowRankDims& d,
                                                std::span<const double> normed,
                                                std::span<const double> up_pre,
                                                const BoundModel& bm) {
  const std::vector<double> y = mhc_lowrank_collapse(d, normed, up_pre);
  MhcStageBounds b;
  b.bound = collapse_bounds(d, normed, up_pre, y, bm, [](uint64_t) { return 0.0; });
  b.formula =
      "gamma_(2*exp_ulps+2) sigma on stored up_pre; (1/hc)*sum e_gate*|n| + "
      "gamma_(hc+2)*sum gate*|n|; + ulp_bf16";
  return b;
}

// Split post: inj = W_inject·normed in FP32 (γ_K(fp32_u)), z = inj/hc (scaled_error),
// post = 2σ(z): 2·sigma_error.
MhcStageBounds mhc_lowrank_split_post_bounds(const MhcLowRankDims& d,
                                             std::span<const double> normed,
                                             std::span<const double> w_inject,
                                             const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  const std::vector<double> inj = mhc_lowrank_inject(d, normed, w_inject);
  const std::vector<double> abs = abs_products(d.rows, W, d.hc, normed, w_inject);
  MhcStageBounds b;
  b.bound.resize(inj.size());
  for (size_t k = 0; k < inj.size(); ++k) {
    const double z = inj[k] / static_cast<double>(d.hc);
    const double e_z = scaled_error(inj[k], dot_error(abs[k], W, bm.fp32_u), d.hc, bm.fp32_u);
    b.bound[k] = 2.0 * sigma_error(z, e_z, bm) + kOracleRel * 2.0 * sigmoid(z);
  }
  b.formula = fmt::format(
      "2*(sigma' <= 1/4 on (gamma_K(u)*sum|W_inject*n|)/hc + sigma "
      "rounding), K = {}",
      W);
  return b;
}

MhcStageBounds mhc_lowrank_slab_post_bounds(const MhcLowRankDims& d,
                                            std::span<const double> inj_pre, const BoundModel& bm) {
  require_size("hc_lowrank_slab_post_bounds", "inj_pre", inj_pre.size(), mul(d.rows, d.hc));
  MhcStageBounds b;
  b.bound.resize(inj_pre.size());
  for (size_t k = 0; k < inj_pre.size(); ++k) {
    const double z = inj_pre[k] / static_cast<double>(d.hc);
    b.bound[k] = 2.0 * sigma_error(z, scaled_error(inj_pre[k], 0.0, d.hc, bm.fp32_u), bm) +
                 kOracleRel * 2.0 * sigmoid(z);
  }
  b.formula = "2*(sigma' <= 1/4 on the /hc rounding + sigma rounding) on stored inj_pre";
  return b;
}

// --- split path vs slab path ------------------------------------------------------------------
//
// Both paths approximate the exact definition y* with the FP32 model weights (n, g = W_down·n,
// low = silu(g/hc), up = W_up·low, gate = σ(up), y* = (1/hc)·Σ gate·n, in FP64). Each path's
// error is propagated stage by stage (β = 2^-8, the BF16 unit roundoff, for each BF16 store and
// each BF16 weight on the slab path; 0 on the split path):
//   n̂:   e_n = norm_error(n) [+ β·(|n| + e_n) + 2^-134 stored BF16]
//   ĝ:   Σ_c (β_w·|W|·(|n| + e_n) + |W|·e_n) + γ_K(u)·(1 + β_w)·Σ|W|·(|n| + e_n) + K·2^-149
//        (|Ŵ n̂ − W n| ≤ |Ŵ − W|·|n̂| + |W|·|n̂ − n|, then the accumulation on |Ŵ|·|n̂|)
//   low: silu_error on scaled_error(g, e_g) [+ BF16 store]
//   up:  the same product rule over r terms with W_up [+ BF16 store]
//   gate: sigma_error(up, e_up);  y: collapse_error(gate, e_gate, n, e_n)
// with u = gemm_u on the slab path's GEMMs and fp32_u elsewhere. Two stored BF16 values a, b
// with |a' − y*| ≤ e1, |b' − y*| ≤ e2 before their stores: |a − b| ≤ e1 + e2 + ulp(|y*| + max e).
namespace {

struct PathModel {
  double beta_store = 0.0;   // BF16 stores of normed, low, up_pre
  double beta_weight = 0.0;  // BF16 weights
  double gemm_u = 0.0;       // accumulation of W_down·n and W_up·low
};

double store_error(double v, double e, double beta) {
  return beta > 0.0 ? e + beta * (std::fabs(v) + e) + 0x1p-134 : e;
}

// Σ_k |Ŵ x̂ − W x| + accumulation, for Ŵ within β_w·|W| (+ 2^-134) and x̂ within e_x.
double product_error(const float* w, const double* x, const double* e_x, uint64_t K,
                     uint64_t x_stride, const PathModel& pm) {
  double first = 0.0, mag = 0.0;
  for (uint64_t k = 0; k < K; ++k) {
    const double aw = std::fabs(static_cast<double>(w[k]));
    const double wbits = pm.beta_weight > 0.0 ? 0x1p-134 : 0.0;
    const double ax = std::fabs(x[k * x_stride]) + e_x[k * x_stride];
    first += (pm.beta_weight * aw + wbits) * ax + aw * e_x[k * x_stride];
    mag += (aw * (1.0 + pm.beta_weight) + wbits) * ax;
  }
  return first + dot_error(mag, K, pm.gemm_u);
}

// e_y for every block_in element of one path.
std::vector<double> path_error(const MhcLowRankDims& d, const std::vector<double>& n,
                               const MhcLowRankWeights& w, const std::vector<double>& low,
                               const std::vector<double>& up, const PathModel& pm,
                               const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  std::vector<double> e_n(n.size()), e_low(low.size()), e_up(up.size()), out(mul(d.rows, d.h));
  for (size_t k = 0; k < n.size(); ++k)
    e_n[k] = store_error(n[k], norm_error(n[k], w.norm_w[k % W], d.h, bm.fp32_u), pm.beta_store);
  std::vector<double> gate(d.hc), e_gate(d.hc);
  for (uint64_t t = 0; t < d.rows; ++t) {
    if (std::isnan(n[t * W])) {
      for (uint64_t c = 0; c < d.h; ++c) out[t * d.h + c] = 0.0;
      continue;
    }
    for (uint64_t k = 0; k < d.r; ++k) {
      double g = 0.0;
      for (uint64_t c = 0; c < W; ++c) g += static_cast<double>(w.w_down[k * W + c]) * n[t * W + c];
      const double e_g =
          product_error(w.w_down.data() + k * W, n.data() + t * W, e_n.data() + t * W, W, 1, pm);
      const double g1 = g / static_cast<double>(d.hc);
      e_low[t * d.r + k] =
          store_error(low[t * d.r + k], silu_error(g1, scaled_error(g, e_g, d.hc, bm.fp32_u), bm),
                      pm.beta_store);
    }
    for (uint64_t c = 0; c < W; ++c) {
      const double e = product_error(w.w_up.data() + c * d.r, low.data() + t * d.r,
                                     e_low.data() + t * d.r, d.r, 1, pm);
      e_up[t * W + c] = store_error(up[t * W + c], e, pm.beta_store);
    }
    for (uint64_t c = 0; c < d.h; ++c) {
      for (uint64_t i = 0; i < d.hc; ++i) {
        const uint64_t k = t * W + i * d.h + c;
        gate[i] = sigmoid(up[k]);
        e_gate[i] = sigma_error(up[k], e_up[k], bm);
      }
      out[t * d.h + c] = collapse_error(gate.data(), e_gate.data(), n.data() + t * W + c,
                                        e_n.data() + t * W + c, d.hc, d.h, bm.fp32_u);
    }
  }
  return out;
}

}  // namespace

MhcStageBounds mhc_lowrank_path_bounds(const MhcLowRankDims& d, std::span<const float> streams,
                                       const MhcLowRankWeights& w, const BoundModel& bm) {
  const uint64_t W = mul(d.hc, d.h);
  require_size("hc_lowrank_path_bounds", "w_down", w.w_down.size(), mul(d.r, W));
  require_size("hc_lowrank_path_bounds", "w_up", w.w_up.size(), mul(W, d.r));
  const std::vector<double> n = mhc_lowrank_norm(d, streams, w.norm_w);
  const std::vector<double> low = mhc_lowrank_down(d, n, widen(w.w_down));
  const std::vector<double> up = mhc_lowrank_up(d, low, widen(w.w_up));
  const std::vector<double> y = mhc_lowrank_collapse(d, n, up);
  const std::vector<double> e_split =
      path_error(d, n, w, low, up, PathModel{0.0, 0.0, bm.fp32_u}, bm);
  const std::vector<double> e_slab =
      path_error(d, n, w, low, up, PathModel{kBf16Unit, kBf16Unit, bm.gemm_u}, bm);
  MhcStageBounds b;
  b.bound.resize(y.size());
  for (size_t k = 0; k < y.size(); ++k) {
    const double e = std::max(e_split[k], e_slab[k]);
    b.bound[k] = std::isnan(y[k]) ? 0.0 : e_split[k] + e_slab[k] + bf16_ulp_at(std::fabs(y[k]) + e);
  }
  b.formula =
      "e_split + e_slab + ulp_bf16: each path's error against the exact FP32-weight definition, "
      "propagated through norm, W_down, silu, W_up, sigma, collapse (slab: 2^-8 per BF16 store "
      "and weight, gamma_K(u_gemm) accumulation)";
  return b;
}

}  // namespace bufferlab::oracle
