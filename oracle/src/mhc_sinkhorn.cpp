// The Sinkhorn reference of docs/spec/numerics.md §3 step 4 and its Birkhoff–Hopf row bound.
//
// Notation: γ_n(u) = n·u/(1 − n·u) (Higham §3.1). osc(v) = log(max v / min v) is the Hilbert
// projective distance of a positive vector v to the all-ones vector.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mhc.h"

namespace bufferlab::oracle {
namespace {

uint64_t square(uint64_t hc) { return (Size(hc) * hc).value(); }

void require_square(const char* what, uint64_t got, uint64_t hc) {
  if (hc == 0) throw Error(fmt::format("{}: hc must be at least 1", what));
  if (got != square(hc))
    throw Error(fmt::format("{}: the matrix holds {} elements, hc = {} needs {}", what, got, hc,
                            square(hc)));
}

void row_normalise(std::vector<double>& C, uint64_t hc, double eps) {
  for (uint64_t i = 0; i < hc; ++i) {
    double s = 0.0;
    for (uint64_t j = 0; j < hc; ++j) s += C[i * hc + j];
    for (uint64_t j = 0; j < hc; ++j) C[i * hc + j] /= eps + s;
  }
}

void col_normalise(std::vector<double>& C, uint64_t hc, double eps) {
  for (uint64_t j = 0; j < hc; ++j) {
    double s = 0.0;
    for (uint64_t i = 0; i < hc; ++i) s += C[i * hc + j];
    for (uint64_t i = 0; i < hc; ++i) C[i * hc + j] /= eps + s;
  }
}

double log_ratio(const std::vector<double>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return std::log(*hi / *lo);
}

}  // namespace

std::vector<double> sinkhorn_kernel(std::span<const double> logits, uint64_t hc, double eps) {
  require_square("sinkhorn_kernel", logits.size(), hc);
  std::vector<double> K(logits.size());
  for (uint64_t i = 0; i < hc; ++i) {
    const double* l = logits.data() + i * hc;
    const double m = *std::max_element(l, l + hc);
    double s = 0.0;
    for (uint64_t j = 0; j < hc; ++j) s += std::exp(l[j] - m);
    for (uint64_t j = 0; j < hc; ++j) K[i * hc + j] = std::exp(l[j] - m) / s + eps;
  }
  return K;
}

std::vector<double> sinkhorn(std::span<const double> K, uint64_t hc, uint64_t iters, double eps,
                             bool final_exact_column) {
  require_square("sinkhorn", K.size(), hc);
  if (iters == 0) throw Error("sinkhorn: iters must be at least 1 (hc_sinkhorn_iters = 0)");
  std::vector<double> C(K.begin(), K.end());
  col_normalise(C, hc, eps);
  for (uint64_t t = 1; t < iters; ++t) {
    row_normalise(C, hc, eps);
    col_normalise(C, hc, eps);
  }
  if (final_exact_column) col_normalise(C, hc, 0.0);
  return C;
}

namespace {
// max over the hc lines a of |Σ_b C[a·line + b·step] − 1| (b ascending), NaN if a sum is NaN:
// the rows with (line, step) = (hc, 1), the columns with (1, hc).
double max_line_sum_error(std::span<const double> C, uint64_t hc, uint64_t line, uint64_t step) {
  double worst = 0.0;
  for (uint64_t a = 0; a < hc; ++a) {
    double s = 0.0;
    for (uint64_t b = 0; b < hc; ++b) s += C[a * line + b * step];
    if (std::isnan(s)) return NAN;
    worst = std::max(worst, std::fabs(s - 1.0));
  }
  return worst;
}
}  // namespace

double max_row_sum_error(std::span<const double> C, uint64_t hc) {
  require_square("max_row_sum_error", C.size(), hc);
  return max_line_sum_error(C, hc, hc, 1);
}

double max_col_sum_error(std::span<const double> C, uint64_t hc) {
  require_square("max_col_sum_error", C.size(), hc);
  return max_line_sum_error(C, hc, 1, hc);
}

double projective_diameter(std::span<const double> K, uint64_t hc) {
  require_square("projective_diameter", K.size(), hc);
  // Δ = max over row pairs (i, j) of max_k log(K_ik/K_jk) + max_l log(K_jl/K_il).
  double delta = 0.0;
  for (uint64_t i = 0; i < hc; ++i)
    for (uint64_t j = 0; j < hc; ++j) {
      double up = -INFINITY, down = -INFINITY;
      for (uint64_t k = 0; k < hc; ++k) {
        const double d = std::log(K[i * hc + k]) - std::log(K[j * hc + k]);
        up = std::max(up, d);
        down = std::max(down, -d);
      }
      delta = std::max(delta, up + down);
    }
  return delta;
}

// Derivation of the bound (docs/spec/numerics.md §3; Birkhoff 1957, Bushell 1973, Franklin & Lorenz
// 1989). d_H(x, y) = osc(x / y) is the Hilbert projective metric on positive vectors.
//
// Structure. Every matrix the iteration produces is D1·K·D2 with positive diagonals (each
// normalisation, with or without eps, divides a whole row or column by one number), so every
// one has the projective diameter Δ(K), and Birkhoff–Hopf gives d_H(Mx, My) ≤ κ·d_H(x, y) and
// d_H(Mᵀx, Mᵀy) ≤ κ·d_H(x, y) with κ = tanh(Δ/4) for all of them. After the final exact column
// normalisation the columns sum to 1, so Σ_i ρ_i = hc: min ρ ≤ 1 ≤ max ρ and
// max_i |ρ_i − 1| ≤ max ρ / min ρ − 1 = exp(osc(ρ)) − 1.
//
// eps = 0: each half step (row sums → column sums → row sums) contracts the oscillation of the
// sums by κ, so after t = iters − 1 rounds osc(ρ) ≤ κ^(2t)·osc(ρ₀): the spec's formula.
//
// eps > 0 — the spec's formula does NOT hold (spec finding; counterexample in the unit test:
// hc = 2, K ≈ [[1, eps], [1, eps]], a column whose sum is ~2·eps). Dividing by (eps + s)
// instead of s leaves the normalised sums at s/(eps + s), not 1: after the first column
// normalisation the column sums σ⁰/(eps + σ⁰) oscillate by b₀ (large when a column of K sums
// to a few eps: every row puts its softmax mass elsewhere), which the formula ignores, and
// near convergence each half step keeps an eps/(eps + s) share of the previous oscillation,
// which dominates κ² when the logit range is small. The corrected recursion, with a = osc of
// the row sums and b = osc of the column sums after a column normalisation (a₀ = osc(ρ₀),
// b₀ = osc(σ⁰/(eps + σ⁰)), σ⁰ the column sums of K):
//   row step N = diag(1/(eps + r))·M:    osc(rowsums N) = osc(r/(eps + r)) ≤ e_r·a, since
//       x ↦ x − log(eps + eˣ) has slope eps/(eps + eˣ) ≤ e_r = eps/(eps + r_lb);
//       colsums σ = Mᵀ(1/(eps + r)): d_H(σ, Mᵀ1) ≤ κ·osc(eps + r) ≤ κ·a and osc(Mᵀ1) = b,
//       so s = osc(σ) ≤ κ·a + b;
//   column step P = N·diag(1/(eps + σ)): b' = osc(σ/(eps + σ)) ≤ e_c·s (e_c = eps/(eps +
//       σ_lb)); row sums N(1/(eps + σ)) are within κ·s of N·1, so a' ≤ κ·s + e_r·a;
//   final exact column step: osc(ρ) ≤ a + κ·b.
// Lower bounds on the sums being normalised (a priori, from K): a row sum after a column
// step is ≥ (previous row-sum bound r_lb/(eps + r_lb)) / (eps + σ_max) with σ_max ≤ hc (the
// row-normalised matrix has row sums below 1); a column sum before a column step is ≥
// (previous column-sum share σ_lb/(eps + σ_lb)) / (eps + r_max) with r_max ≤ hc. Start:
// r_lb = min ρ₀, σ_lb = min σ⁰. With eps = 0 the recursion is the spec's κ^(2t)·osc(ρ₀).
//
// Arithmetic slack for a backend with unit roundoff u (γ = γ_(hc+2)(u)): a normalisation
// computes one sum of hc positive terms (hc − 1 roundings), adds eps (1; eps itself is the
// FP32 rounding of hc_eps: 1 more) and divides each entry (1): every vector of sums it leaves, and
// every vector of sums the next step reads, is within a factor (1 ± γ) of the exact function of the
// matrix it came from — +2γ on every oscillation each time one is formed (a_N, s, b', a' and the
// final one). The per-entry division roundings accumulate into K∘E with |log E| ≤ (2·iters + 1)·u',
// u' = u/(1 − u), which widens Δ by 4·(2·iters + 1)·u'. The final column sums are within γ of 1, so
// Σρ = hc· (1 ± γ): + γ in the exponent. When u > 0 the spec's stated FP32 slack 4·u (absolute, on
// ρ ≈ 1) is added outside.
//
// k_log_error: the backend's K is K∘E with |log E_ij| ≤ k (softmax and logit errors). Then
// Δ(K∘E) ≤ Δ(K) + 4k (four entries in the cross ratio); every term K_ij·E_ij/(eps +
// Σ_i K_ij·E_ij) of ρ₀ moves by a factor within e^(±2k), so osc(ρ₀) grows by at most 4k, and
// σ⁰ by e^(±k) each, so b₀ grows by at most 2k (the map x ↦ x − log(eps + eˣ) is
// 1-Lipschitz); the lower bounds shrink by e^(−2k) and e^(−k).
SinkhornBound sinkhorn_row_bound(std::span<const double> K, uint64_t hc, uint64_t iters, double eps,
                                 double unit_roundoff, double k_log_error) {
  require_square("sinkhorn_row_bound", K.size(), hc);
  if (iters == 0) throw Error("sinkhorn_row_bound: iters must be at least 1");
  const double u = unit_roundoff, k = k_log_error;
  const double n = static_cast<double>(hc);
  const double g = gamma(n + 2.0, u);
  const double entry_log = (2.0 * static_cast<double>(iters) + 1.0) * (u / (1.0 - u));
  // This function's own FP64 evaluation: each log K_ij errs by ≤ 2^-52·|log K_ij|, and the
  // three additions of a cross ratio by 2^-53·Δ each: Δ·(1 + 2^-51) + 2^-50·max|log K|.
  // ρ₀_i and σ⁰_j/(eps + σ⁰_j) are evaluated within a factor (1 ± γ_(2hc+2)(2^-53)) (sums of
  // hc terms, eps add, division, the quotient of the extremes), so their computed
  // log-oscillations err by ≤ 2·γ_(2hc+2)(2^-53): both are added even when u = 0, so the
  // u = 0 bound bounds exact arithmetic on the given K.
  double max_abs_log = 0.0;
  for (double v : K) max_abs_log = std::max(max_abs_log, std::fabs(std::log(v)));
  const double eval = 2.0 * gamma(2.0 * n + 2.0, kFp64UnitRoundoff);
  SinkhornBound b;
  const double delta = projective_diameter(K, hc);
  b.delta = delta * (1.0 + 0x1p-51) + 0x1p-50 * max_abs_log + 4.0 * k + 4.0 * entry_log;
  b.kappa = std::tanh(b.delta / 4.0);

  std::vector<double> sigma(hc, 0.0), rho(hc, 0.0), share(hc);
  for (uint64_t i = 0; i < hc; ++i)
    for (uint64_t j = 0; j < hc; ++j) sigma[j] += K[i * hc + j];
  for (uint64_t i = 0; i < hc; ++i)
    for (uint64_t j = 0; j < hc; ++j) rho[i] += K[i * hc + j] / (eps + sigma[j]);
  for (uint64_t j = 0; j < hc; ++j) share[j] = sigma[j] / (eps + sigma[j]);
  const double log_rho0 = log_ratio(rho);
  const double t = static_cast<double>(iters - 1);
  b.spec_bound = std::expm1(std::pow(std::tanh(delta / 4.0), 2.0 * t) * log_rho0);
  b.log_rho0 = log_rho0 + eval + 4.0 * k;
  b.log_col0 = log_ratio(share) + eval + 2.0 * k;

  const double kappa = b.kappa;
  double r_lb = *std::min_element(rho.begin(), rho.end()) * std::exp(-2.0 * k);
  double s_lb = *std::min_element(sigma.begin(), sigma.end()) * std::exp(-k);
  double a = b.log_rho0 + 2.0 * g, c = b.log_col0 + 2.0 * g;
  for (uint64_t step = 1; step < iters; ++step) {
    const double e_r = eps / (eps + r_lb);
    const double row_share = r_lb / (eps + r_lb);
    s_lb = (s_lb / (eps + s_lb)) / (eps + n);  // before this column step (r_max ≤ hc)
    const double e_c = eps / (eps + s_lb);
    const double a_n = e_r * a + 2.0 * g;
    const double s = kappa * (a + 2.0 * g) + c + 2.0 * g;
    c = e_c * s + 2.0 * g;
    a = kappa * (s + 2.0 * g) + a_n + 2.0 * g;
    r_lb = row_share / (eps + n);  // after this column step (σ_max ≤ hc)
  }
  const double osc = a + kappa * (c + 2.0 * g) + 2.0 * g;
  b.row_bound = std::expm1(osc + g) + 4.0 * u;
  if (std::isnan(b.row_bound)) b.row_bound = INFINITY;
  return b;
}

double col_sum_tolerance_fp32(uint64_t hc) { return (static_cast<double>(hc) + 1.0) * 0x1p-24; }

}  // namespace bufferlab::oracle
