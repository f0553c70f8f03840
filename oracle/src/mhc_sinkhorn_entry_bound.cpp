// The per-entry bound of a rounded Sinkhorn (docs/spec/numerics.md §3 step 4) against the exact
// one, tracked through the scaling vectors, and its domain (no FP32 gradual underflow).
//
// Why not entry by entry: a normalisation divides an entry by a sum of entries of its line, so an
// elementwise relative error e becomes ~2e; after 2·iters normalisations the bound is 4^iters
// times the rounding, which is useless above a few iterations (the "a-priori bound blows up"
// that left the elementwise comparison reported only). Tracking the two scaling vectors instead
// makes the errors add per step.
//
// Notation. L = log K (the oracle's K, exact), u the unit roundoff, λ = −log(1 − u) ≥ |log(1 + δ)|
// for |δ| ≤ u, γ_n = n·u/(1 − n·u), ℓ = −log(1 − γ_(hc+1)). Every iterate of the exact iteration
// is C = diag(e^a)·K·diag(e^b), i.e. log C_ij = a_i + L_ij + b_j (start a = b = 0).
//
// The computed iterate, written the same way. Let Ĉ be the backend's matrix after step n. A
// column step computes d̂_j = fl(fl(eps) + fl(Σ_i Ĉ_ij)) and Ĉ'_ij = fl(Ĉ_ij / d̂_j) = Ĉ_ij/d̂_j·
// (1 + δ_ij), |δ_ij| ≤ u (IEEE division; a normal result). Define b̂'_j = b̂_j − log d̂_j and fold
// (1 + δ_ij) into a drifting L̂: L̂'_ij = L̂_ij + log(1 + δ_ij). Then log Ĉ_ij = â_i + L̂_ij + b̂_j
// holds exactly at every step (row steps: the same with â), with â = b̂ = 0 and L̂ = log K̂ at the
// start. |L̂ − L| ≤ Λ_n := k + n·λ after n steps (k = k_log_error: |log K̂ − log K| ≤ k).
//
// The rounded denominator. All terms are positive: the sum of hc terms carries ≤ hc − 1
// roundings per term, eps its conversion to FP32 (1; the backends hold fl32(hc_eps), the oracle
// the double) and the add (1) on every term: d̂_j = (eps + Σ_i Ĉ_ij)·(1 + η_j) with
// |log(1 + η_j)| ≤ ℓ (γ_(hc+1) ≥ γ_max(hc, 2); the final exact column step has no eps: fewer).
//
// One step is non-expansive in the sup norm. For column j, with v_i = a_i + L_ij:
//   b'_j = g(v, b_j) = b_j − log(eps + e^(b_j)·Σ_i e^(v_i)),
//   ∂g/∂v_i = −w_ij, w_ij = C_ij/(eps + s_j) ≥ 0;  ∂g/∂b_j = eps/(eps + s_j) ≥ 0,
// and Σ_i w_ij + eps/(eps + s_j) = 1 at EVERY point (s_j = Σ_i C_ij), for any eps ≥ 0 and any
// K. So along the segment between the exact and the computed arguments
//   |ĝ − g| ≤ max(max_i |δv_i|, |δb_j|) ≤ max(‖δa‖ + Λ_n, ‖δb‖),
// whatever the logit range (the weights need not be bounded below: no contraction is used).
// With the denominator's rounding: B_(n+1) ≤ max(A_n + Λ_n, B_n) + ℓ, A unchanged; a row step
// symmetrically A_(n+1) ≤ max(B_n + Λ_n, A_n) + ℓ, B unchanged (A = ‖â − a‖∞, B = ‖b̂ − b‖∞).
// Over the 2·iters normalisations (the first column, iters − 1 × (row, column), the final exact
// column) this is linear in iters (Λ_n grows by λ per step, so the λ part is ~2·iters²·λ).
//
// The entries: |log Ĉ_ij − log C_ij| = |δa_i + δL_ij + δb_j| ≤ A + B + Λ =: β(u, k) after the
// last step. Both sides are compared with the exact Sinkhorn of the oracle's K: the backend with
// (u = 2^-24, k = comb_log_error), the FP64 oracle's own comb with (2^-53, 0); so
// |Ĉ − C64| ≤ |Ĉ − C| + |C − C64| ≤ C·(expm1(β32) + expm1(β64)) and C ≤ C64·e^(β64).
//
// Domain. The relative rounding |δ| ≤ u holds for normal results only: a division whose FP32
// result lies below 2^-126 has an absolute error up to 2^-150 (bounds.h), i.e. an unbounded
// relative one (and a flush to 0 sticks). Every computed iterate satisfies Ĉ ≥ C·e^(−β) ≥
// C64·e^(−β32 − 2·β64) (β grows with n, so the final β covers every step), so when every entry of
// every FP64 iterate (K itself included) is at least 2^-126·e^(β32 + 2·β64) no FP32 value of the
// backend's Sinkhorn is subnormal and the bound holds; a token outside the domain is not judged
// by this bound (it arises with hc_eps = 0 at comb logit ranges near 60, where entries of
// ~1e-44 occur; the Sinkhorn class check excludes the same subnormal values). All entries stay
// ≤ 1 after the first step (each line is divided by eps + its sum ≥ any of its entries): no
// overflow.
//
// Evaluation: the recursion adds and compares ≤ 8·iters + 8 positive FP64 numbers: the result
// is widened by 1 + γ_(8·iters+8)(2^-53).
#include <algorithm>
#include <cmath>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mhc.h"

namespace bufferlab::oracle {

double sinkhorn_entry_log_bound(uint64_t hc, uint64_t iters, double unit_roundoff,
                                double k_log_error) {
  if (hc == 0) throw Error("sinkhorn_entry_log_bound: hc must be at least 1");
  if (iters == 0) throw Error("sinkhorn_entry_log_bound: iters must be at least 1");
  const double u = unit_roundoff;
  const double ell = -std::log1p(-gamma(static_cast<double>(hc) + 1.0, u));
  const double lambda = -std::log1p(-u);
  const uint64_t steps = 2 * iters;  // first column, iters − 1 × (row, column), final column
  double a = 0.0, b = 0.0, big_lambda = k_log_error;
  for (uint64_t s = 0; s < steps; ++s) {
    const bool column = s % 2 == 0 || s + 1 == steps;
    if (column)
      b = std::max(a + big_lambda, b) + ell;
    else
      a = std::max(b + big_lambda, a) + ell;
    big_lambda += lambda;
  }
  const double beta = a + b + big_lambda;
  const double eval = gamma(8.0 * static_cast<double>(iters) + 8.0, kFp64UnitRoundoff);
  return std::isfinite(beta) ? beta * (1.0 + eval) : INFINITY;
}

double sinkhorn_min_iterate(std::span<const double> K, uint64_t hc, uint64_t iters, double eps) {
  if (K.size() != hc * hc || hc == 0)
    throw Error("sinkhorn_min_iterate: K must hold hc·hc elements, hc ≥ 1");
  if (iters == 0) throw Error("sinkhorn_min_iterate: iters must be at least 1");
  std::vector<double> C(K.begin(), K.end());
  double lo = *std::min_element(C.begin(), C.end());
  // One normalisation of the lines: rows (line = hc, step = 1) or columns (1, hc).
  auto normalise = [&](uint64_t line, uint64_t step, double e) {
    for (uint64_t a = 0; a < hc; ++a) {
      double s = 0.0;
      for (uint64_t b = 0; b < hc; ++b) s += C[a * line + b * step];
      for (uint64_t b = 0; b < hc; ++b) C[a * line + b * step] /= e + s;
    }
    lo = std::min(lo, *std::min_element(C.begin(), C.end()));
  };
  normalise(1, hc, eps);
  for (uint64_t t = 1; t < iters; ++t) {
    normalise(hc, 1, eps);
    normalise(1, hc, eps);
  }
  normalise(1, hc, 0.0);
  return lo;
}

}  // namespace bufferlab::oracle
