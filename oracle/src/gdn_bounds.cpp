// Derived per-element bounds of the GDN stages (docs/spec/numerics.md §5, §9): a backend's stored
// value against the stage reference of gdn_stages.cpp fed the same stored inputs. Never tuned:
// each is the forward-error bound of the pinned FP32 algorithm (ops/gdn.h), plus one BF16 ULP
// per BF16 store.
//
// Notation (Higham, "Accuracy and Stability of Numerical Algorithms", §3): u is the unit
// roundoff, γ_n = n·u/(1 − n·u). A value computed with at most n roundings (1 + δ)^(±1),
// |δ| ≤ u, lies within γ_n of the exact one (Lemma 3.1); a sum of m terms in any order (any
// tree: sequential, SIMD lanes, blocked) passes every term through at most m − 1 additions, so
// |Σ̂ − Σ| ≤ γ_(m−1)·Σ|terms|. Relative errors compose as (1 + a)(1 + b) − 1 (`grow`).
//
// u is bm.fp32_u + 2^-53: every bound below is a polynomial in u with non-negative
// coefficients and no constant term, hence superadditive: E(u_backend) + E(u_oracle) ≤
// E(u_backend + u_oracle). The oracle's FP64 evaluation has the same structure (or fewer
// roundings), so that one u covers |backend − exact| + |oracle − exact| = the compared
// difference.
//
// Elementary functions: expf, logf, log1pf within exp_ulps FP32 ULPs of the result (glibc < 1,
// CUDA ≤ 2 for expf, ≤ 1 for logf/log1pf): relative fn = 2·exp_ulps·u (one ULP ≤ 2u relative).
// exp of a rounded argument d̂ = d·(1 + δ): exp(d̂) = exp(d)·exp(d·δ), relative
// exp(u·|d|)·(1 + fn) − 1 (`exp_diff_rel`). Lipschitz constants: σ' ≤ 1/4, |silu'| ≤ 1.0998 <
// 1.1, softplus' = σ ≤ 1. silu(s) = s/(1 + expf(−s)): relative γ_(2·exp_ulps+3), and ≤ 2^-120
// absolute where expf(−s) overflows (s < −88.7, |silu| ≤ 89·e^-88.7).
//
// q, k normalisation (ops/gdn.h: x·(1/sqrt(Σx² + 1e-6f)), q then ·kd^-1/2): the norm factor
// r̂ = r·(1 + θ), one scalar per token and head, with Σx² (kd squares and kd − 1 additions:
// γ_kd), + eps (1), sqrtf (1), the reciprocal (1), or rsqrtf's 2 ULPs (4u) for the last two:
// |θ| ≤ ε_r = γ_(kd+6) (the argument's relative error is halved by the square root: counted in
// full). Each component then carries one more rounding (x·r̂), q two (and kd^-1/2's own FP32
// representation, ≤ u, a scalar): scalar ε_rq = (1 + ε_r)(1 + u) − 1, per component γ_2.
// A dot product of two such vectors a, b over kd (`normalised_dot_error`):
//   |fl⟨â, b̂⟩ − ⟨a, b⟩| ≤ ((1 + θa)(1 + θb) − 1)·|⟨a, b⟩|
//                         + (1 + θa)(1 + θb)·((1 + δa)(1 + δb)(1 + γ_kd) − 1)·Σ|a_j·b_j|,
// the scalar factors multiplying the dot itself, the per-component ones the absolute sum.
//
// A stored BF16 value bf16(ŷ) against the faithful bf16(y), |ŷ − y| ≤ e: at most e + one BF16
// ULP at |y| + e (half a ULP on each side; stored_bf16, bounds.h). FP32 stores are the computed
// values.
//
// Underflow (bounds.h's rule): every FP32 rounding whose result is subnormal errs by up to
// 2^-150 absolutely, which no γ term covers (a final state near 7e-41 was judged against a
// relative bound of 3.3e-47, finer than FP32 can hold it). Each bound below adds
// fp32_underflow(n) for its n products, quotients (an FMA: one) and elementary functions,
// each multiplied by the largest factor its rounded intermediate is later multiplied by
// (written next to each count); additions that land in the subnormals are exact. An expf
// whose result is subnormal errs by exp_ulps subnormal steps = 2·exp_ulps·2^-150 (`uf_exp`).
// Normalised components: k̂ = fl(x·r̂) one rounding, q̂ = fl(fl(x·r̂)·kd^-1/2) two.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/gdn_stages.h"
#include "oracle_common.h"

namespace bufferlab::oracle::gdn_detail {
namespace {

// kU64, kSiluAbs, kSiluLipschitz, kSigmoidAbs: oracle_common.h.
constexpr double kAlphaAbs = 0x1p-126;  // α subnormal (or flushed to zero on a device)
// |softplus(x) − x| for x ≥ 20: log1p(e^-20) < 2.1e-9 (the backend's branch may differ from
// the oracle's when x̂ and x straddle 20).
constexpr double kSoftplusJump = 2.1e-9;

double grow(double a, double b) { return (1.0 + a) * (1.0 + b) - 1.0; }

// The roundoffs of one judged backend, plus the oracle's (file comment).
struct Model {
  double u = 0.0;   // bm.fp32_u + 2^-53
  double fn = 0.0;  // 2·exp_ulps·u: one elementary function
  double exp_ulps = 0.0;
  explicit Model(const BoundModel& bm)
      : u(bm.fp32_u + kU64), fn(2.0 * bm.exp_ulps * (bm.fp32_u + kU64)), exp_ulps(bm.exp_ulps) {}
  double g(double n) const { return gamma(n, u); }
  double silu_rel() const { return g(2.0 * exp_ulps + 3.0); }
  double sigmoid_rel() const { return g(2.0 * exp_ulps + 2.0); }
  // exp(d̂) for the FP32 difference d̂ of two exact inputs, |d| = |x − y|.
  double exp_diff_rel(double d) const { return std::expm1(u * std::fabs(d)) * (1.0 + fn) + fn; }
  // Normalisation of q / k (file comment).
  double norm_rel(uint64_t kd) const { return g(static_cast<double>(kd) + 6.0); }
  // The underflow roundings of one expf (file comment), counted in 2^-150 units.
  double uf_exp() const { return 2.0 * exp_ulps; }
};

// |silû(ŝ) − silu(s)| for |ŝ − s| ≤ e_s; the quotient (or the product by the reciprocal,
// which is ≥ 1/2) is the one rounding that can underflow.
double silu_error(double s, double e_s, const Model& m) {
  const double lip = kSiluLipschitz * e_s;
  return fp32_bound(lip + m.silu_rel() * (std::fabs(silu(s)) + lip) + kSiluAbs, 1.0);
}

// File comment: the dot of two normalised vectors with scalar errors ta, tb and per-component
// ones da, db over kd terms.
double normalised_dot_error(double dot, double abs_dot, double ta, double tb, double da, double db,
                            uint64_t kd, const Model& m) {
  const double s = grow(ta, tb);
  return s * std::fabs(dot) +
         (1.0 + s) * grow(grow(da, db), m.g(static_cast<double>(kd))) * abs_dot;
}

double abs_dot(const double* a, const double* b, uint64_t n) {
  double s = 0.0;
  for (uint64_t j = 0; j < n; ++j) s += std::fabs(a[j] * b[j]);
  return s;
}

}  // namespace

// --- conv1d ---------------------------------------------------------------------------------
//
// s = Σ_j w_j·x_j over K taps, BF16 × BF16 products exact in FP32, K − 1 additions:
// |ŝ − s| ≤ γ_K·Σ|w_j·x_j|; then silu (silu_error). The FP32 store is the computed value.
StageBounds conv_bounds(const GdnDims& d, std::span<const uint16_t> deint,
                        std::span<const uint16_t> conv_w, std::span<const uint16_t> conv_state,
                        const ConvRef& ref, const BoundModel& bm) {
  const Model m(bm);
  const GdnGeometry& g = d.geom;
  const uint64_t C = g.conv_dim, K = g.kernel, T = K - 1;
  StageBounds r;
  r.bound.assign(ref.out.size(), 0.0);
  for (uint64_t b = 0; b < d.sequences; ++b)
    for (uint64_t c = 0; c < C; ++c) {
      auto x = [&](int64_t i) { return conv_input(d, deint, conv_state, b, c, i); };
      for (uint64_t t = 0; t < d.L; ++t) {
        double s = 0.0, a = 0.0;
        for (uint64_t j = 0; j < K; ++j) {
          const double p = static_cast<double>(bf16_bits_to_f32(conv_w[c * K + j])) *
                           x(static_cast<int64_t>(t + j) - static_cast<int64_t>(T));
          s += p;
          a += std::fabs(p);
        }
        // K products, each later only added (amplifier 1).
        const double e_s = fp32_bound(m.g(static_cast<double>(K)) * a, static_cast<double>(K));
        r.bound[(b * d.L + t) * C + c] = silu_error(s, e_s, m);
      }
    }
  r.formula =
      fmt::format("silu' <= 1.1 on gamma_K*sum|w*x| (K = {}) + gamma_(2*exp_ulps+3) silu", K);
  return r;
}

// --- gates ----------------------------------------------------------------------------------
//
// β = 1/(1 + expf(−b)), b exact: expf (fn), 1 + ê (adding 1 to a positive value keeps its
// relative error), the division: relative γ_(2·exp_ulps+2), + 2^-126 absolute.
// α = expf(−A·sp), A = expf(A_log), sp = softplus(x), x = a + dt_bias (a, dt_bias exact):
//   x̂: e_x = u·|x| (one addition);
//   sp: x > 20: sp = x, e_sp = e_x; else log1pf(expf(x̂)): softplus' ≤ 1 carries e_x, expf's
//       relative η moves log1p(y) by log1p(η·y/(1 + y)) ≤ η, log1pf's own rounding fn·|sp|:
//       e_sp = e_x + fn + fn·(sp + e_x + fn); + 2.1e-9 when x̂ may straddle 20;
//   g = Â·ŝp·(1 + δ): e_g = A·(((1 + fn)(1 + u) − 1)·(sp + e_sp) + e_sp);
//   α̂ = exp(−ĝ)·(1 + fn): |α̂ − α| ≤ α·(exp(e_g)·(1 + fn) − 1) + 2^-126 (subnormal α) —
//   the relative error of α is ≈ |log α|·(few u) + few u.
StageBounds gates_bounds(const GdnDims& d, std::span<const uint16_t> ba,
                         std::span<const float> a_log, std::span<const float> dt_bias,
                         std::span<const double> gates, const BoundModel& bm) {
  const Model m(bm);
  const uint64_t nv = d.geom.nv, rows = d.rows();
  StageBounds r;
  r.bound.assign(gates.size(), 0.0);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t v = 0; v < nv; ++v) {
      const double beta = gates[(t * nv + v) * 2], alpha = gates[(t * nv + v) * 2 + 1];
      r.bound[(t * nv + v) * 2] = m.sigmoid_rel() * beta + kSigmoidAbs;
      const double a = bf16_bits_to_f32(ba[t * 2 * nv + nv + v]);
      const double x = a + dt_bias[v], e_x = m.u * std::fabs(x);
      // ±Inf is exact in FP32: softplus(+Inf) = +Inf → α = 0; softplus(−Inf) = 0 → α = 1.
      if (std::isinf(x)) {
        r.bound[(t * nv + v) * 2 + 1] = kAlphaAbs;
        continue;
      }
      const double sp = softplus(x);
      double e_sp = x > 20.0 ? e_x : e_x + m.fn + m.fn * (sp + e_x + m.fn);
      if (std::fabs(x - 20.0) <= e_x) e_sp += kSoftplusJump;
      const double A = std::exp(static_cast<double>(a_log[v]));
      const double e_g = A * (grow(m.fn, m.u) * (sp + e_sp) + e_sp);
      r.bound[(t * nv + v) * 2 + 1] = alpha * (std::exp(e_g) * (1.0 + m.fn) - 1.0) + kAlphaAbs;
    }
  r.formula =
      "beta: gamma_(2*exp_ulps+2)*beta; alpha: alpha*(exp(e_g)*(1+fn)-1), e_g from u|a+dt_bias|, "
      "softplus and exp(A_log) roundings";
  return r;
}

// --- gc (wu) --------------------------------------------------------------------------------
//
// gc_i = Σ_{j≤i} ℓ_j, ℓ_j = logf(max(α_j, 1e-30f)) from the stored α (exact; the max is
// exact): |ℓ̂_j − ℓ_j| ≤ fn·|ℓ_j|; a prefix sum in any order passes each term through at most
// i additions: |ĝc_i − gc_i| ≤ fn·Σ|ℓ_j| + γ_i·(1 + fn)·Σ|ℓ_j|, + the underflow floor of the
// i + 1 logf (none is subnormal in practice: |ℓ| ≥ 2^-25 or ℓ = 0). Rows past a partial
// chunk: 0.
StageBounds gc_bounds(const GdnDims& d, std::span<const double> gates, const BoundModel& bm) {
  const Model m(bm);
  const ChunkGrid grid(d);
  const uint64_t nv = d.geom.nv;
  StageBounds r;
  r.bound.assign(mul(grid.regions(), kChunk), 0.0);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t c = 0; c < grid.cps; ++c)
      for (uint64_t v = 0; v < nv; ++v) {
        double a = 0.0;
        for (uint64_t i = 0; i < grid.rows_in(c); ++i) {
          a += std::fabs(log_alpha(gates[(grid.token(b, c, i) * nv + v) * 2 + 1]));
          r.bound[grid.region(b, c, v) * kChunk + i] =
              fp32_bound(m.fn * a + m.g(static_cast<double>(i)) * (1.0 + m.fn) * a, i + 1.0);
        }
      }
  r.formula = "fn*sum|log alpha| + gamma_i*sum|log alpha| (prefix sum of i+1 logf values)";
  return r;
}

// --- W, U (wu) --------------------------------------------------------------------------------
//
// Per region (n rows): T = I + L, L_il = β_i·E_il·⟨k_i, k_l⟩ (l < i), E_il = exp(g_i − g_l)
// from the stored gc g; T·U = diag(β)·V, T·W = diag(β·exp(g))·K, both solved by forward
// substitution in FP32.
// The backend's L̂: ⟨k̂_i, k̂_l⟩ errs by e_dot (normalised_dot_error, scalars ε_r, components
// u), Ê by ε_E = exp_diff_rel(g_i − g_l), two products (γ_2):
//   |L̂_il − L_il| ≤ ΔL_il = β_i·E_il·(((1 + ε_E)(1 + γ_2) − 1)·(|⟨k_i, k_l⟩| + e_dot) + e_dot).
// Forward substitution x̂_i = fl(b̂_i − Σ_{l<i} L̂_il·x̂_l): i + 1 terms, one product each:
//   x̂_i + Σ_l L̂_il·(1 + θ_il)·x̂_l = b̂_i·(1 + θ_i0), |θ| ≤ γ_n
// (Higham Thm 8.5 with a unit diagonal: no division). So T·x̂ = b + ρ with
//   |ρ| ≤ ε'_b·|b| + Λ·|x̂|,  Λ = ΔL + γ_n·(|L| + ΔL),  ε'_b = (1 + ε_b)(1 + γ_n) − 1,
// ε_b the right-hand side's own error: U: β·v, one product (u); W: β·expf(g)·k̂, fn, the
// normalisation of k (ε_r and u) and two products (γ_2). Hence
//   |x̂ − x| ≤ |T⁻¹|·(ε'_b·|b| + Λ·|x̂|) ≤ e0 + B·|x̂ − x|,  e0 = |T⁻¹|·(ε'_b·|b| + Λ·|x|),
// B = |T⁻¹|·Λ ≥ 0 with ρ = ‖B‖∞ < 1: |x̂ − x| ≤ Σ_k B^k·e0 ≤ e0 + ρ/(1 − ρ)·max e0 (per
// column; B acts on the rows). |T⁻¹| is computed explicitly in FP64 per region (its own FP64
// error is a relative 1e-15 of a bound). Then the BF16 store (one ULP).
namespace {

struct RegionSolve {
  uint64_t n = 0;
  std::vector<double> Z;       // |T⁻¹|, n×n (row stride kChunk)
  std::vector<double> Lambda;  // Λ, n×n
  double rho = 0.0;            // ‖|T⁻¹|·Λ‖∞
};

// e for every element of one region's solution x [n][cols] with right-hand side b; abs_b: the
// absolute (underflow) part of ρ per element.
void solve_bound(const RegionSolve& s, const double* x, const double* b, uint64_t cols,
                 double eps_b, double abs_b, double* out) {
  const uint64_t n = s.n;
  std::vector<double> y(n * cols, 0.0), e0(n * cols, 0.0);
  for (uint64_t m = 0; m < n; ++m)
    for (uint64_t col = 0; col < cols; ++col) {
      double v = eps_b * std::fabs(b[m * cols + col]) + abs_b;
      for (uint64_t l = 0; l < m; ++l) v += s.Lambda[m * kChunk + l] * std::fabs(x[l * cols + col]);
      y[m * cols + col] = v;
    }
  for (uint64_t i = 0; i < n; ++i)
    for (uint64_t m = 0; m <= i; ++m) {
      const double z = s.Z[i * kChunk + m];
      if (z == 0.0) continue;
      for (uint64_t col = 0; col < cols; ++col) e0[i * cols + col] += z * y[m * cols + col];
    }
  const double tail = s.rho < 1.0 ? s.rho / (1.0 - s.rho) : INFINITY;
  for (uint64_t col = 0; col < cols; ++col) {
    double top = 0.0;
    for (uint64_t i = 0; i < n; ++i) top = std::max(top, e0[i * cols + col]);
    for (uint64_t i = 0; i < n; ++i) {
      const double e = e0[i * cols + col] + (top > 0.0 ? tail * top : 0.0);
      out[i * cols + col] = stored_bf16(x[i * cols + col], e);
    }
  }
}

}  // namespace

WuBounds wu_bounds(const GdnDims& d, const Qk& qk, std::span<const double> conv,
                   std::span<const double> gates, std::span<const double> gc, const Wu& ref,
                   const BoundModel& bm) {
  const Model m(bm);
  const GdnGeometry& g = d.geom;
  const ChunkGrid grid(d);
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv, v0 = 2 * g.nk * kd;
  const double eps_r = m.norm_rel(kd);
  WuBounds r;
  r.W.bound.assign(ref.W.size(), 0.0);
  r.U.bound.assign(ref.U.size(), 0.0);
  RegionSolve s;
  s.Z.assign(kChunk * kChunk, 0.0);
  s.Lambda.assign(kChunk * kChunk, 0.0);
  std::vector<double> L(kChunk * kChunk, 0.0), bW(kChunk * kd), bU(kChunk * vd);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t c = 0; c < grid.cps; ++c)
      for (uint64_t v = 0; v < nv; ++v) {
        const uint64_t reg = grid.region(b, c, v), n = grid.rows_in(c), h = key_head(g, v);
        const double* gr = gc.data() + reg * kChunk;
        const double gn = m.g(static_cast<double>(n));
        auto key = [&](uint64_t i) { return k_row(qk, g, grid.token(b, c, i), h); };
        auto beta = [&](uint64_t i) { return gates[(grid.token(b, c, i) * nv + v) * 2]; };
        s.n = n;
        for (uint64_t i = 0; i < n; ++i)
          for (uint64_t l = 0; l < i; ++l) {
            const double dk = dot(key(i), key(l), kd), ak = abs_dot(key(i), key(l), kd);
            const double e_dot = normalised_dot_error(dk, ak, eps_r, eps_r, m.u, m.u, kd, m);
            const double E = std::exp(gr[i] - gr[l]), eps_E = m.exp_diff_rel(gr[i] - gr[l]);
            const double Lil = beta(i) * E * dk;
            // Underflow: each k̂'s rounding per component (times |k| ≤ 1), kd products, expf
            // (times |⟨k, k⟩| ≤ 1), two products; all times β·E ≤ 1.
            const double uf = fp32_underflow(3.0 * static_cast<double>(kd) + 2.0 + m.uf_exp());
            const double dL =
                beta(i) * E * (grow(eps_E, m.g(2)) * (std::fabs(dk) + e_dot) + e_dot) + uf;
            L[i * kChunk + l] = Lil;
            s.Lambda[i * kChunk + l] = dL + gn * (std::fabs(Lil) + dL);
          }
        // |T⁻¹|: Z = T⁻¹ by forward substitution (unit diagonal), then magnitudes.
        std::vector<double> Zs(n * n, 0.0);
        for (uint64_t i = 0; i < n; ++i) {
          Zs[i * n + i] = 1.0;
          for (uint64_t mcol = 0; mcol < i; ++mcol) {
            double z = 0.0;
            for (uint64_t l = mcol; l < i; ++l) z -= L[i * kChunk + l] * Zs[l * n + mcol];
            Zs[i * n + mcol] = z;
          }
        }
        s.rho = 0.0;
        for (uint64_t i = 0; i < n; ++i) {
          double row = 0.0;
          for (uint64_t mm = 0; mm <= i; ++mm) {
            s.Z[i * kChunk + mm] = std::fabs(Zs[i * n + mm]);
            double lam = 0.0;
            for (uint64_t l = 0; l < mm; ++l) lam += s.Lambda[mm * kChunk + l];
            row += s.Z[i * kChunk + mm] * lam;
          }
          s.rho = std::max(s.rho, row);
        }
        for (uint64_t i = 0; i < n; ++i) {
          const double* vv = conv.data() + grid.token(b, c, i) * g.conv_dim + v0 + v * vd;
          const double bw = beta(i) * std::exp(gr[i]);
          for (uint64_t j = 0; j < kd; ++j) bW[i * kd + j] = bw * key(i)[j];
          for (uint64_t j = 0; j < vd; ++j) bU[i * vd + j] = beta(i) * vv[j];
        }
        const double eps_bU = grow(m.u, gn);
        const double eps_bW = grow(grow(grow(eps_r, m.u), grow(m.fn, m.g(2))), gn);
        // Underflow of ρ: the substitution's n products; U's right-hand side β·v one product;
        // W's β·expf(g)·k̂: k̂'s rounding, expf and two products (each times a factor ≤ 1).
        const double nn = static_cast<double>(n);
        solve_bound(s, ref.W.data() + reg * kChunk * kd, bW.data(), kd, eps_bW,
                    fp32_underflow(nn + 3.0 + m.uf_exp()), r.W.bound.data() + reg * kChunk * kd);
        solve_bound(s, ref.U.data() + reg * kChunk * vd, bU.data(), vd, eps_bU,
                    fp32_underflow(nn + 1.0), r.U.bound.data() + reg * kChunk * vd);
      }
  const std::string f =
      "|T^-1|*(eps_b*|b| + Lambda*|x|)*(1 + rho/(1-rho)) + ulp_bf16, Lambda from the q/k "
      "normalisation (gamma_(kd+6)), gamma_kd dots, exp(gc_i-gc_l) and gamma_n substitution";
  r.W.formula = "W: " + f;
  r.U.formula = "U: " + f;
  return r;
}

// --- state pass ------------------------------------------------------------------------------
//
// The oracle carries S_{c+1} = a·S_c + Σ_i k_i·d_i·uc_i with the BACKEND's stored uc (Carry::
// given), a = exp(g_last), d_i = exp(g_last − g_i); the backend carries Ŝ the same way in
// FP32 from the same stored uc. E_c bounds |Ŝ_c − S_c| elementwise; E_0 = 0 (the entry state
// is an exact input). Per element of the carry: n + 1 terms (a·S, n products k̂_i·d̂_i·uc_i of
// two roundings each), at most n + 1 additions: each term within (1 + γ_(n+3)). With â
// within fn, d̂_i within ε_E,i = exp_diff_rel(g_last − g_i), k̂ within ε_k = (1 + ε_r)(1 + u)
// − 1 (per component, the scalar included):
//   E_{c+1} = a·f_a·E_c + (f_a − 1)·a·|S_c| + Σ_i |k_ij|·d_i·|uc_i|·((1 + ε_k)(1 + ε_E,i)
//             (1 + γ_(n+3)) − 1),  f_a = (1 + fn)(1 + γ_(n+3)).
// Because both carries use the same uc, no W·E coupling appears: the companion is a
// per-element contraction (a ≤ 1) plus the chunk's own roundings.
// Snapshot c: the backend stores bf16(Ŝ_c): E_c + one BF16 ULP.
// uc_i = U_i − Σ_j W_ij·Ŝ_j (W, U exact stored inputs; kd products, kd additions):
//   |uĉ − uc| ≤ Σ_j |W_ij|·E_j + γ_(kd+1)·(|U_i| + Σ_j |W_ij|·(|S_j| + E_j)) + kd·2^-150,
// + one BF16 ULP.
// Underflow of the carry (bounds.h), per element and chunk: â (expf) times |S|, â·S, and per
// row i: k̂'s rounding, k̂·d̂ and d̂ (expf), each times |uc_i| (k, d ≤ 1), and the product with
// uc_i: (2·exp_ulps·|S| + 1 + Σ_i ((2 + 2·exp_ulps)·|uc_i| + 1))·2^-150.
// Final state: E_C (an FP32 store).
StateBounds state_bounds(const GdnDims& d, const Qk& qk, std::span<const double> W,
                         std::span<const double> U, std::span<const double> gc,
                         std::span<const double> stored_uc, const StatePass& pass,
                         const BoundModel& bm) {
  const Model m(bm);
  const GdnGeometry& g = d.geom;
  const ChunkGrid grid(d);
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv;
  const double eps_k = grow(m.norm_rel(kd), m.u), g_uc = m.g(static_cast<double>(kd) + 1.0);
  StateBounds r;
  r.S.bound.assign(pass.S.size(), 0.0);
  r.uc.bound.assign(pass.uc.size(), 0.0);
  r.state.bound.assign(pass.state.size(), 0.0);
  std::vector<double> E(kd * vd), next(kd * vd), eW(vd), mag(vd), rel(kChunk), dec(kChunk), suc(vd);
  for (uint64_t b = 0; b < grid.sequences; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      std::fill(E.begin(), E.end(), 0.0);
      const uint64_t h = key_head(g, v);
      for (uint64_t c = 0; c < grid.cps; ++c) {
        const uint64_t reg = grid.region(b, c, v), n = grid.rows_in(c);
        const double* S = pass.S.data() + reg * kd * vd;
        for (uint64_t e = 0; e < kd * vd; ++e)
          r.S.bound[reg * kd * vd + e] = stored_bf16(S[e], E[e]);
        const double* Wr = W.data() + reg * kChunk * kd;
        const double* Ur = U.data() + reg * kChunk * vd;
        for (uint64_t i = 0; i < n; ++i) {
          std::fill(eW.begin(), eW.end(), 0.0);
          std::fill(mag.begin(), mag.end(), 0.0);
          for (uint64_t j = 0; j < kd; ++j) {
            const double w = std::fabs(Wr[i * kd + j]);
            if (w == 0.0) continue;
            for (uint64_t col = 0; col < vd; ++col) {
              eW[col] += w * E[j * vd + col];
              mag[col] += w * (std::fabs(S[j * vd + col]) + E[j * vd + col]);
            }
          }
          for (uint64_t col = 0; col < vd; ++col) {
            const uint64_t e = reg * kChunk * vd + i * vd + col;
            const double e_uc = eW[col] + g_uc * (std::fabs(Ur[i * vd + col]) + mag[col]);
            r.uc.bound[e] = stored_bf16(pass.uc[e], fp32_bound(e_uc, static_cast<double>(kd)));
          }
        }
        // The carry's companion.
        const double* gr = gc.data() + reg * kChunk;
        const double last = gr[n - 1], a = std::exp(last);
        const double gsum = m.g(static_cast<double>(n) + 3.0), fa = 1.0 + grow(m.fn, gsum);
        std::fill(suc.begin(), suc.end(), 0.0);
        for (uint64_t i = 0; i < n; ++i)
          for (uint64_t col = 0; col < vd; ++col)
            suc[col] += std::fabs(stored_uc[reg * kChunk * vd + i * vd + col]);
        for (uint64_t e = 0; e < kd * vd; ++e) {
          const double uf = m.uf_exp() * std::fabs(S[e]) + 1.0 + (2.0 + m.uf_exp()) * suc[e % vd] +
                            static_cast<double>(n);
          next[e] = a * fa * E[e] + (fa - 1.0) * a * std::fabs(S[e]) + fp32_underflow(uf);
        }
        for (uint64_t i = 0; i < n; ++i) {
          dec[i] = std::exp(last - gr[i]);
          rel[i] = grow(grow(eps_k, m.exp_diff_rel(last - gr[i])), gsum);
        }
        for (uint64_t i = 0; i < n; ++i) {
          const double* k = k_row(qk, g, grid.token(b, c, i), h);
          const double* uc = stored_uc.data() + reg * kChunk * vd + i * vd;
          for (uint64_t j = 0; j < kd; ++j) {
            const double f = std::fabs(k[j]) * dec[i] * rel[i];
            if (f == 0.0) continue;
            for (uint64_t col = 0; col < vd; ++col) next[j * vd + col] += f * std::fabs(uc[col]);
          }
        }
        E.swap(next);
      }
      std::copy(E.begin(), E.end(), r.state.bound.begin() + (b * nv + v) * kd * vd);
    }
  r.S.formula = "E_c + ulp_bf16, E_c the carry's error companion (contraction a = exp(gc_last))";
  r.uc.formula = "sum|W|*E_c + gamma_(kd+1)*(|U| + sum|W|*(|S_c|+E_c)) + ulp_bf16";
  r.state.formula = "E_C: a*f_a*E + (f_a-1)*a*|S| + sum_i |k|*d_i*|uc_i|*rel_i per chunk";
  return r;
}

// --- output -----------------------------------------------------------------------------------
//
// O_i = t_0 + Σ_{l≤i} t_l, t_0 = exp(g_i)·A, A = Σ_j q_ij·S_j, t_l = M_il·P_il·uc_l with
// M_il = exp(g_i − g_l), P_il = ⟨q_i, k_l⟩, from the stored S, uc, gc (exact inputs) and q, k
// normalised in FP32 by the backend:
//   Â: scalar ε_rq on |A| + (1 + ε_rq)·((1 + γ_2)(1 + γ_kd) − 1)·Σ|q||S|; then expf (fn) and
//      one product: e_0 = exp(g_i)·(((1 + fn)(1 + u)(1 + ε_rq) − 1)·|A| + (1 + fn)(1 + u)
//      (1 + ε_rq)·((1 + γ_2)(1 + γ_kd) − 1)·Σ|q||S|);
//   P̂: e_P = normalised_dot_error (scalars ε_rq, ε_r; components γ_2, u);
//   t̂_l = M̂·P̂·uc·(two products): e_l = M·|uc_l|·(((1 + ε_M)(1 + γ_2) − 1)(|P| + e_P) + e_P),
//      ε_M = exp_diff_rel(g_i − g_l);
//   the sum of i + 2 terms: |Ô − O| ≤ (1 + γ_(i+1))·Σ e + γ_(i+1)·(|t_0| + Σ|t_l|);
// + the underflow floor (bounds.h), in 2^-150 units: Â: q̂'s two roundings per component
//   times |S_j|, kd products, times exp(g_i) ≤ 1, then expf times |A| and the product; t̂_l:
//   q̂'s two and k̂'s one rounding per component (times |k|, |q| ≤ 1), kd products, M̂ (expf)
//   times |P|, M·P: all times |uc_l|; the product with uc_l;
// then the BF16 store.
StageBounds output_bounds(const GdnDims& d, const Qk& qk, std::span<const double> S,
                          std::span<const double> uc, std::span<const double> gc,
                          std::span<const double> out, const BoundModel& bm) {
  const Model m(bm);
  const GdnGeometry& g = d.geom;
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv;
  const double eps_r = m.norm_rel(kd), eps_rq = grow(eps_r, m.u);
  const double comp_qS = grow(m.g(2), m.g(static_cast<double>(kd)));
  const double f0 = grow(grow(m.fn, m.u), eps_rq);
  StageBounds r;
  r.bound.assign(out.size(), 0.0);
  std::vector<double> A(vd), aA(vd), err(vd), mag(vd), uf(vd), sS(vd), P(kChunk), eP(kChunk);
  const double kdd = static_cast<double>(kd);
  for_each_output_row(d, qk, S, uc, gc, [&](const OutputRow& row) {
    const auto [Sr, ur, gr] = row.at;
    const double* q = row.q;
    std::fill(A.begin(), A.end(), 0.0);
    std::fill(aA.begin(), aA.end(), 0.0);
    std::fill(sS.begin(), sS.end(), 0.0);
    for (uint64_t j = 0; j < kd; ++j)
      for (uint64_t col = 0; col < vd; ++col) {
        A[col] += q[j] * Sr[j * vd + col];
        aA[col] += std::fabs(q[j] * Sr[j * vd + col]);
        sS[col] += std::fabs(Sr[j * vd + col]);
      }
    const double e = std::exp(gr[row.i]);
    for (uint64_t col = 0; col < vd; ++col) {
      err[col] = e * (f0 * std::fabs(A[col]) + (1.0 + f0) * comp_qS * aA[col]);
      mag[col] = e * std::fabs(A[col]);
      uf[col] = e * (2.0 * sS[col] + kdd) + m.uf_exp() * std::fabs(A[col]) + 1.0;
    }
    for (uint64_t l = 0; l <= row.i; ++l) {
      const double* k = k_row(qk, g, row.token_of(l), row.h);
      const double p = dot(q, k, kd), ap = abs_dot(q, k, kd);
      const double ep = normalised_dot_error(p, ap, eps_rq, eps_r, m.g(2), m.u, kd, m);
      const double M = std::exp(gr[row.i] - gr[l]);
      const double rel = grow(m.exp_diff_rel(gr[row.i] - gr[l]), m.g(2));
      const double per = M * (rel * (std::fabs(p) + ep) + ep), amp = M * std::fabs(p);
      const double uf_l = 4.0 * kdd + m.uf_exp() * std::fabs(p) + 1.0;
      for (uint64_t col = 0; col < vd; ++col) {
        const double a = std::fabs(ur[l * vd + col]);
        err[col] += per * a;
        mag[col] += amp * a;
        uf[col] += uf_l * a + 1.0;
      }
    }
    const double gs = m.g(static_cast<double>(row.i) + 1.0);
    const uint64_t at = row.t * nv * vd + row.v * vd;
    for (uint64_t col = 0; col < vd; ++col)
      r.bound[at + col] = stored_bf16(
          out[at + col], (1.0 + gs) * err[col] + gs * mag[col] + fp32_underflow(uf[col]));
  });
  r.formula =
      "exp(gc)*(eps*|qS| + gamma_(kd+2)*sum|q||S|) + sum_l M*|uc|*(eps*|<q,k>| + gamma_(kd+3)*"
      "sum|q||k|) + gamma_(i+1) sum + ulp_bf16";
  return r;
}

// --- recurrence -------------------------------------------------------------------------------
//
// The FP32 step from the backend's carry X = Ŝ_{t−1} (ops/gdn.h): y = Xᵀk̂, w = v − α·y,
// δ = β·w, S_t = α·X + k̂·δᵀ. In exact arithmetic from X the step is linear in X:
// S_t(X) = A_t·X + β·k·vᵀ, A_t = α·(I − β·k·kᵀ), symmetric with eigenvalues α and
// α·(1 − β‖k‖²): ‖A_t‖₂ = α·max(1, |1 − β‖k‖²|) ≤ 1 for β ∈ [0, 1], ‖k‖ ≤ 1. An elementwise
// |·| companion would lose the cancellation in I − β·k·kᵀ (‖I + β|k||k|ᵀ‖ = 1 + β: growth 2^t),
// so the carry's error is tracked as a 2-norm per value column: with ε_{t−1} ≥ ‖X − S_{t−1}‖₂
// (column col),
//   ‖Ŝ_t − S_t‖₂ ≤ ‖A_t‖₂·ε_{t−1} + ‖local‖₂ =: ε_t,
// where local is the rounding of the step itself from X, elementwise (|X_j| ≤ |S_j| + ε):
//   ŷ: e_y = (F − 1)·Σ|k||X|, F = (1 + ε_k)(1 + γ_(kd+1)) (ε_k: k̂'s per-element error; the +1
//      lets α associate with the dot);
//   ŵ: e_w = α·e_y·(1 + γ_2) + γ_2·(|v| + α·|y(X)|), |y(X)| ≤ |y| + ‖k‖₂·ε;
//   δ̂: e_δ = β·e_w·(1 + u) + u·β·|w(X)|, |w(X)| ≤ |w| + α‖k‖₂ε;
//   Ŝ_j: local_j = γ_2·α·|X_j| + (1 + ε_k)(1 + γ_2)·|k_j|·e_δ + ((1 + ε_k)(1 + γ_2) − 1)·
//        |k_j|·|δ(X)|, |δ(X)| ≤ |δ| + βα‖k‖₂ε.
//   + the underflow floor (bounds.h), in 2^-150 units: ŷ's k̂ (one rounding per component,
//        times |X_j|) and kd products; α·ŷ, δ̂ one each; Ŝ_j: α·X_j, k̂_j (times |δ|) and
//        k̂_j·δ — every later factor (α, β, |k_j|) ≤ 1: Σ|X| + kd + 4 + |δ(X)|.
// So the error accumulates linearly in the tokens (a contraction plus per-token γ terms).
// Output o = Ŝ_tᵀq̂ (kd terms): |ô − o| ≤ F_q·‖q‖₂·ε_t + (F_q − 1)·(Σ|q||S_t| + ‖q‖₁·ε_t),
// F_q = (1 + ε_q)(1 + γ_kd), ε_q = (1 + ε_rq)(1 + γ_2) − 1, + the underflow of q̂'s two
// roundings per component times |S_j| and the kd products: (2·Σ|S| + kd)·2^-150;
// then the BF16 store. Final state:
// ε_T bounds every element of its column (FP32 store).
RecurrenceBounds recurrence_bounds(const GdnDims& d, const Qk& qk, std::span<const double> conv,
                                   std::span<const double> gates, std::span<const double> state_in,
                                   const BoundModel& bm, bool bf16_output) {
  const Model m(bm);
  const GdnGeometry& g = d.geom;
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv, v0 = 2 * g.nk * kd;
  const double eps_r = m.norm_rel(kd), eps_k = grow(eps_r, m.u);
  const double eps_q = grow(grow(eps_r, m.u), m.g(2));
  const double F = 1.0 + grow(eps_k, m.g(static_cast<double>(kd) + 1.0));  // factors, not
  const double Fq = 1.0 + grow(eps_q, m.g(static_cast<double>(kd)));       // errors
  const double g2 = m.g(2), fk = grow(eps_k, g2), kdd = static_cast<double>(kd);
  RecurrenceBounds r;
  r.o.bound.assign(mul(d.rows(), nv * vd), 0.0);
  r.state.bound.assign(state_in.size(), 0.0);
  std::vector<double> S(kd * vd), eps(vd), next(vd), ed(vd), ad(vd), delta(vd);
  for (uint64_t b = 0; b < d.sequences; ++b)
    for (uint64_t v = 0; v < nv; ++v) {
      std::copy(state_in.begin() + (b * nv + v) * kd * vd,
                state_in.begin() + (b * nv + v + 1) * kd * vd, S.begin());
      std::fill(eps.begin(), eps.end(), 0.0);
      const uint64_t h = key_head(g, v);
      for (uint64_t t = b * d.L; t < (b + 1) * d.L; ++t) {
        const double* k = k_row(qk, g, t, h);
        const double* q = q_row(qk, g, t, h);
        const double* vv = conv.data() + t * g.conv_dim + v0 + v * vd;
        const double beta = gates[(t * nv + v) * 2], alpha = gates[(t * nv + v) * 2 + 1];
        double k1 = 0.0, k22 = 0.0, q1 = 0.0, q22 = 0.0;
        for (uint64_t j = 0; j < kd; ++j) {
          k1 += std::fabs(k[j]), k22 += k[j] * k[j];
          q1 += std::fabs(q[j]), q22 += q[j] * q[j];
        }
        const double k2 = std::sqrt(k22), q2 = std::sqrt(q22);
        const double normA = alpha * std::max(1.0, std::fabs(1.0 - beta * k22));
        for (uint64_t col = 0; col < vd; ++col) {
          double y = 0.0, ky = 0.0;
          for (uint64_t j = 0; j < kd; ++j) {
            y += S[j * vd + col] * k[j];
            ky += std::fabs(S[j * vd + col] * k[j]);
          }
          ky += k1 * eps[col];
          const double e_y = (F - 1.0) * ky, ay = std::fabs(y) + k2 * eps[col];
          const double w = vv[col] - alpha * y;
          const double e_w = alpha * e_y * (1.0 + g2) + g2 * (std::fabs(vv[col]) + alpha * ay);
          const double aw = std::fabs(w) + alpha * k2 * eps[col];
          delta[col] = beta * w;
          ed[col] = beta * e_w * (1.0 + m.u) + m.u * beta * aw;
          ad[col] = std::fabs(delta[col]) + beta * alpha * k2 * eps[col];
        }
        for (uint64_t col = 0; col < vd; ++col) {
          double sx = 0.0;  // Σ_j |X_j| ≤ Σ_j |S_j| + kd·ε
          for (uint64_t j = 0; j < kd; ++j) sx += std::fabs(S[j * vd + col]) + eps[col];
          const double uf = fp32_underflow(sx + kdd + 4.0 + ad[col]);
          double local2 = 0.0;
          for (uint64_t j = 0; j < kd; ++j) {
            const double ak = std::fabs(k[j]);
            const double l = g2 * alpha * (std::fabs(S[j * vd + col]) + eps[col]) +
                             (1.0 + fk) * ak * ed[col] + fk * ak * ad[col] + uf;
            local2 += l * l;
          }
          next[col] = normA * eps[col] + std::sqrt(local2);
        }
        eps.swap(next);
        for (uint64_t j = 0; j < kd; ++j)
          for (uint64_t col = 0; col < vd; ++col)
            S[j * vd + col] = alpha * S[j * vd + col] + k[j] * delta[col];
        const uint64_t row = t * nv * vd + v * vd;
        for (uint64_t col = 0; col < vd; ++col) {
          double o = 0.0, ao = 0.0, as = 0.0;
          for (uint64_t j = 0; j < kd; ++j) {
            o += S[j * vd + col] * q[j];
            ao += std::fabs(S[j * vd + col] * q[j]);
            as += std::fabs(S[j * vd + col]) + eps[col];
          }
          const double e = Fq * q2 * eps[col] + (Fq - 1.0) * (ao + q1 * eps[col]) +
                           fp32_underflow(2.0 * as + kdd);
          r.o.bound[row + col] = bf16_output ? stored_bf16(o, e) : e;
        }
      }
      for (uint64_t j = 0; j < kd; ++j)
        for (uint64_t col = 0; col < vd; ++col)
          r.state.bound[(b * nv + v) * kd * vd + j * vd + col] = eps[col];
    }
  r.o.formula =
      "F_q*|q|_2*eps_t + (F_q-1)*(sum|q||S_t| + |q|_1*eps_t) + ulp_bf16, eps_t the 2-norm error "
      "companion per value column (||A_t|| <= alpha)";
  r.state.formula = "eps_T: eps_t = ||A_t||*eps_(t-1) + ||local rounding||_2 per value column";
  return r;
}

// --- gated norm --------------------------------------------------------------------------------
//
// y_j = o_j·r·w_j·silu(z_j), o, z, w exact BF16 inputs: r = 1/sqrt(Σo²/vd + eps) with the vd
// squares exact (BF16 × BF16), vd − 1 additions, the division by vd, eps → FP32 and its add,
// sqrtf and the reciprocal (or rsqrtf, 4u): relative γ_(vd+6) (counted in full, not halved);
// silu relative γ_(2·exp_ulps+3) and 2^-120 absolute; three products γ_3:
//   |ŷ − y| ≤ ((1 + γ_(vd+6))(1 + γ_(2·exp_ulps+3))(1 + γ_3) − 1)·|y| + |o·r·w|·2^-120·(1 + ...),
// + the underflow floor (bounds.h) of silu's quotient and the three products, each later
// multiplied by at most F = Π max(1, |factor|) over o, r, w, silu(z): 4·F·2^-150 (r's own
// sum is ≥ eps ≥ FLT_MIN: normal); then the BF16 store.
StageBounds gated_norm_bounds(const GdnDims& d, std::span<const double> core,
                              std::span<const uint16_t> norm_w, std::span<const double> normed,
                              const BoundModel& bm) {
  const Model m(bm);
  const GdnGeometry& g = d.geom;
  const uint64_t nv = g.nv, vd = g.vd;
  const double rel_r = m.g(static_cast<double>(vd) + 6.0);
  const double rel = grow(grow(rel_r, m.silu_rel()), m.g(3));
  StageBounds r;
  r.bound.assign(normed.size(), 0.0);
  for (uint64_t t = 0; t < d.rows(); ++t)
    for (uint64_t v = 0; v < nv; ++v) {
      const double* o = core.data() + t * nv * vd + v * vd;
      const double rr = 1.0 / std::sqrt(dot(o, o, vd) / static_cast<double>(vd) + d.eps);
      for (uint64_t j = 0; j < vd; ++j) {
        const uint64_t e = t * nv * vd + v * vd + j;
        const double w = bf16_bits_to_f32(norm_w[j]), orw = std::fabs(o[j] * rr * w);
        // |silu(z)| = |y| / |o·r·w| (doubled: y is the reference's rounded value).
        const double zs = orw > 0.0 ? 2.0 * std::fabs(normed[e]) / orw : 0.0;
        const double F = std::max(1.0, std::fabs(o[j])) * std::max(1.0, rr) *
                         std::max(1.0, std::fabs(w)) * std::max(1.0, zs);
        r.bound[e] =
            stored_bf16(normed[e], rel * std::fabs(normed[e]) + orw * kSiluAbs * (1.0 + rel) +
                                       fp32_underflow(4.0 * F));
      }
    }
  r.formula = fmt::format(
      "((1+gamma_(vd+6))(1+gamma_(2*exp_ulps+3))(1+gamma_3)-1)*|y| + |o*r*w|*2^-120 + ulp_bf16 "
      "(vd = {})",
      vd);
  return r;
}

}  // namespace bufferlab::oracle::gdn_detail
