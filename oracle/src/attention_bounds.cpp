// Derived per-element bounds of the attention stages (docs/spec/attention.md §5,
// docs/spec/numerics.md §9): a backend's stored value against the oracle fed the same stored
// inputs, for the formulas core ops/attention.h pins.
//
// Notation (Higham, "Accuracy and Stability of Numerical Algorithms", §2.1, §3.1; bounds.h): u is
// the unit roundoff of the backend's FP32 arithmetic (bm.fp32_u; the core's dot products and sums
// use cu = max(bm.gemm_u, bm.fp32_u), so a device accumulating on tensor cores is covered),
// γ_n = n·u/(1 − n·u); a value computed with n roundings (1 + δ)^(±1) on every path is within γ_n
// of the exact one, and a sum of K terms in ANY order has at most K − 1 additions on a path. u64
// is the oracle's own FP64 roundoff; its terms γ(n, u64)·(magnitudes) are added everywhere. BF16
// × BF16 products are exact in FP32 (8 + 8 significant bits); the underflow rule of bounds.h adds
// 2^-150 per rounding whose result is subnormal, and an expf result below 2^-126 (or flushed)
// errs by 2^-126 absolute (kExpUnderflowAbs).
//
// Elementary functions. glibc and CUDA state their errors in ULPs of the correctly rounded
// result, which itself is within half an ULP of the exact value, and an FP32 ULP at v is ≤ 2u·|v|:
// k ULPs give a relative error ≤ (2k + 1)·u (fn_rel). expf: bm.exp_ulps (CUDA 2, glibc < 1);
// cosf / sinf: bm.trig_ulps (the larger of glibc's 1 and CUDA's 2, docs/spec/attention.md §2).
//
// Every stored BF16 value bf16(ŷ) against the faithful bf16(y), |ŷ − y| ≤ e: e + 1 BF16 ULP
// (stored_bf16, bounds.h). The FP32 partials are the backend's computed values: no store term.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "bufferlab/oracle/attention.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

namespace {

double attn_core_u(const BoundModel& bm) { return std::max(bm.gemm_u, bm.fp32_u); }
double dbl(uint64_t n) { return static_cast<double>(n); }

}  // namespace

namespace attn_detail {

double fn_rel(double ulps, const BoundModel& bm) { return (2.0 * ulps + 1.0) * bm.fp32_u; }

// --- stage function: qk_norm -------------------------------------------------------------------
//
// From the BF16 row x (exact) and w (exact), m = Σx²/hd + eps ≥ eps (eps the FP32 value):
//   ŝs = Σ x_i² (products exact, hd − 1 additions, all terms ≥ 0): ss·(1 + γ_(hd−1)), plus
//     hd·2^-150 where a square underflows — relative to m that is ≤ 2^-150/m per element;
//   fl(ŝs / hd), fl(· + eps): two roundings, relative to m (eps exact): θ_m = (1 + γ_(hd−1))
//     (1 + u)² − 1 + 3·2^-150/m;
//   inv = 1/sqrtf(m̂) with IEEE sqrt and division (the header pins them): 1/sqrt(m(1 + θ_m)) and
//     two roundings: θ_inv = (1 − θ_m)^(−1/2)·(1 + γ_2) − 1 (the other side is closer to 1);
//   n_i = fl(fl(x_i·inv)·fl(1 + w_i)): three more roundings: θ_n = (1 + θ_inv)(1 + γ_3) − 1.
// A dimension past rotary_dim stores n_i: θ_n·|n_i| + 3·2^-149 (underflow of x·inv, the product)
// + the oracle's γ(hd + 16, u64)·|n_i|, then the BF16 store. Without qk_norm n_i = x_i: a copy.
double stage_norm_rel(uint64_t hd, double m, const BoundModel& bm) {
  const double u = bm.fp32_u;
  const double theta_m =
      (1.0 + gamma(dbl(hd) - 1.0, u)) * (1.0 + u) * (1.0 + u) - 1.0 + 3.0 * kFp32UnderflowAbs / m;
  if (theta_m >= 1.0) return INFINITY;
  const double theta_inv = (1.0 + gamma(2.0, u)) / std::sqrt(1.0 - theta_m) - 1.0;
  return (1.0 + theta_inv) * (1.0 + gamma(3.0, u)) - 1.0;
}

// --- stage function: RoPE ------------------------------------------------------------------------
//
// θ is the backend's own FP32 angle (the faithful reference reproduces it bit for bit), so cos and
// sin are evaluated at the same argument on both sides: c = af·cos θ, s = af·sin θ with af the
// table's FP32 factor. The backend: ĉ = fl(cosf(θ)·af): |ĉ − c| ≤ |c|·ε_cs + abs_cs, ε_cs =
// (1 + η_t)(1 + u) − 1, η_t = fn_rel(trig_ulps), abs_cs = (trig_ulps + 1)·2^-149·max(1, af)
// (a cosf result in the subnormal range: never for an FP32 θ, kept for the rule). With â =
// a(1 + θ_n):
//   p̂1 = fl(â·ĉ): |p̂1 − a·c| ≤ |a·c|·((1 + θ_n)(1 + ε_cs)(1 + u) − 1)
//                              + |a|(1 + θ_n)(1 + u)·abs_cs + 2^-150 =: E1 (E2 alike for b·s);
//   ŷ = fl(p̂1 ∓ p̂2) (no FMA: the header forbids contraction): |ŷ − y| ≤ (E1 + E2)(1 + u) + u|y|.
// Plus the oracle's γ(hd + 24, u64)·(|a·c| + |b·s| + |y|) (its norm, cos, sin and products), then
// the BF16 store (the caller).
double rope_pair_error(double a, double b, double c, double s, double y, double af, double theta_n,
                       const BoundModel& bm) {
  const double u = bm.fp32_u, eta_t = fn_rel(bm.trig_ulps, bm);
  const double eps_cs = (1.0 + eta_t) * (1.0 + u) - 1.0;
  const double abs_cs = (bm.trig_ulps + 1.0) * 2.0 * kFp32UnderflowAbs * std::max(1.0, af);
  const double grow = (1.0 + theta_n) * (1.0 + eps_cs) * (1.0 + u) - 1.0;
  const double ac = std::fabs(a * c), bs = std::fabs(b * s);
  const double e1 =
      ac * grow + std::fabs(a) * (1.0 + theta_n) * (1.0 + u) * abs_cs + kFp32UnderflowAbs;
  const double e2 =
      bs * grow + std::fabs(b) * (1.0 + theta_n) * (1.0 + u) * abs_cs + kFp32UnderflowAbs;
  return (e1 + e2) * (1.0 + u) + u * std::fabs(y) +
         gamma(static_cast<double>(kMaxAttnHeadDim) + 24.0, kU64) * (ac + bs + std::fabs(y));
}

}  // namespace attn_detail

// --- faithful vs exact: the FP32 angle -----------------------------------------------------------
//
// θ_e = pos·inv_freq (FP64, inv_freq the table's FP32 value); the backend's θ_f = fl(fp32(pos)·
// inv_freq): fp32(pos) is exact up to 2^24 and within u·pos above; the product rounds once:
//   |θ_f − θ_e| ≤ u·|θ_e| (pos ≤ 2^24), ≤ (2 + u)·u·|θ_e| (pos > 2^24), + 2^-150.
// This ABSOLUTE angle error grows with the position: at |θ| = 1e5 (position 1e5, inv_freq 1) it
// is up to 6e-3 rad, i.e. a relative error of up to 6e-3 in the rotated pair — larger than the
// BF16 ULP, and far larger than every rounding of the stage. cos and sin are 1-Lipschitz, so
//   |y_f − y_e| ≤ af·(|a| + |b|)·|θ_f − θ_e| ≤ √2·sqrt(y_a² + y_b²)·|θ_f − θ_e|
// (the rotation keeps a² + b², scaled by af²), plus the two FP64 evaluations' γ(hd + 24, u64).
std::vector<double> attn_stage_angle_bounds(const AttnGeometry& g, const AttnStageInput& in) {
  const AttnValues f = attn_stage_fp64(g, in, Mode::faithful);
  const uint64_t hd = g.hd, half = g.rotary_dim / 2, width = in.heads * hd;
  const double u = kFp32UnitRoundoff, g64 = 2.0 * gamma(dbl(hd) + 24.0, kU64);
  std::vector<double> b(f.value.size(), 0.0);
  for (uint64_t r = 0; r < in.rows; ++r)
    for (uint64_t h = 0; h < in.heads; ++h)
      for (uint64_t i = 0; i < half; ++i) {
        const uint64_t ia = g.rope_interleaved ? 2 * i : i;
        const uint64_t ib = g.rope_interleaved ? 2 * i + 1 : i + half;
        const uint32_t pos = in.positions[attn_rope_stream(g, i) * in.pos_stride + r];
        const double th = static_cast<double>(pos) * static_cast<double>(in.rope[i]);
        const double dth =
            (pos > (1u << 24) ? (2.0 + u) * u : u) * std::fabs(th) + kFp32UnderflowAbs;
        const double ya = f.value[r * width + h * hd + ia], yb = f.value[r * width + h * hd + ib];
        const double rad = std::sqrt(ya * ya + yb * yb);
        b[r * width + h * hd + ia] = std::sqrt(2.0) * rad * dth + g64 * (rad + 1.0);
        b[r * width + h * hd + ib] = b[r * width + h * hd + ia];
      }
  return b;
}

namespace attn_detail {

// --- scores --------------------------------------------------------------------------------------
//
// s = scale·Σ_d q_d·k_d with q, k the BF16 values and scale = fp32(1/sqrt(hd)). The backend's q̂
// is the stored q (X = 0) or, in decode, its own staging with |q̂_d − q_d| ≤ q_err_d:
// |Σ q̂k − Σ qk| ≤ X = Σ q_err_d·|k_d|, and Σ|q̂_d·k_d| ≤ D + X. The dot: exact products (FMA or
// not), hd − 1 additions in any order: γ_(hd−1)(cu)·(D + X) + hd·2^-150. The scale: the pinned
// constant, or 1/sqrtf(hd) in FP32 (two roundings, γ_2 relative), then the product (1 + u):
//   |ŝ − s| ≤ scale·(X + γ_(hd−1)·(D + X) + hd·2^-150)·(1 + γ_2)(1 + u) + |s|·((1 + γ_2)(1 + u) −
//   1)
//           + γ(hd + 2, u64)·scale·D.
double score_error(double s, double D, double X, uint64_t hd, double scale, const BoundModel& bm) {
  const double u = bm.fp32_u, f = (1.0 + gamma(2.0, u)) * (1.0 + u);
  const double dot =
      X + gamma(dbl(hd) - 1.0, attn_core_u(bm)) * (D + X) + dbl(hd) * kFp32UnderflowAbs;
  return scale * dot * f + std::fabs(s) * (f - 1.0) + gamma(dbl(hd) + 2.0, kU64) * scale * D;
}

// --- the online softmax
// ----------------------------------------------------------------------------
//
// K keys in T tiles (the header's reduction: per tile m' = max(m, max ŝ), α = expf(m − m'),
// l = l·α, acc = acc·α, then per key e = expf(ŝ_j − m'), l += e, acc_d += e·v_jd; with a sink at
// the end m'' = max(m, σ), α = expf(m − m''), l = l·α + expf(σ − m''), acc ·= α). Shift
// invariance: every weight of the backend is relative to its own running maxima; with M̂ its final
// maximum, the backend's weight of key j is exp(ŝ_j − M̂)·Φ_j, and a factor common to all keys and
// the sink cancels in o = acc / l. Relative to w_j = exp(s_j − m_ref) (the oracle's) Φ_j collects:
//   (i)   the key's argument fl(ŝ_j − m'_t): u·(m'_t − ŝ_j) ≤ u·(M̂ − ŝ_j);
//   (ii)  the arguments of the α's applied after the key's tile (and the sink's): their exact
//         values telescope to m'_t − M̂, their roundings add ≤ u·(M̂ − m'_t) ≤ u·(M̂ − ŝ_j);
//         with M̂ ≤ M + e_max and ŝ_j ≥ s_j − e_j: (i) + (ii) ≤ 2u·(M − s_j + e_j + e_max);
//   (iii) at most T + 1 expf factors (its own, the later tiles' α, the sink's α): (1 + η)^(T+1),
//         η = fn_rel(exp_ulps);
//   (iv)  the score error: e^(±e_j).
//   ρ_j = e^(e_j + 2u(M − s_j + e_j + e_max))·(1 + η)^(T+1) − 1.
// The sink's weight e^(σ − M̂): argument rounding u·(M − σ + e_max), one expf:
//   ρ_σ = e^(u(M − σ + e_max))(1 + η) − 1.
// The sums: a term of l passes ≤ K additions (the sink's included) and ≤ T rescalings: γ_(K+T+1);
// a term of acc also its product e·v (or an FMA): γ_(K+T+2) (cu). Hence, with F = (K + 1)·2^-126
// ·e^(max(0, M + e_max − m_ref)) for the expf results that underflow (in the m_ref frame):
//   E_L   = Σ_j w_j((1 + ρ_j)(1 + γ_(K+T+1)) − 1) + w_σ((1 + ρ_σ)(1 + γ_(K+T+1)) − 1) + F,
//   E_A,d = Σ_j w_j|v_jd|((1 + ρ_j)(1 + γ_(K+T+2)) − 1) + F·max_j|v_jd|,
// and o_d = A_d / L through quotient_error. The partials store l (FP32): their reference l is
// relative to the backend's stored m (m_ref = m̂, the backend's own M̂: the common factor is 1), so
// |l̂ − L| ≤ E_L + γ(K + 8, u64)·L; their stored m = max ŝ_j: |m̂ − max s_j| ≤ e_max. The oracle's
// own FP64 adds γ(K + hd + T + 16, u64)·(1 + M − min s)·(Σ_j w_j|v_jd| / L + |o_d|).
void softmax_bounds(const SoftmaxTerms& t, const BoundModel& bm, SoftmaxResult& r) {
  const uint64_t K = t.s.size(), T = t.tiles, hd = t.hd;
  r.o_bound.assign(hd, 0.0);
  r.m_bound = 0.0;
  r.l_bound = 0.0;
  if (K == 0 && !t.sink) return;
  const double u = attn_core_u(bm), eta = fn_rel(bm.exp_ulps, bm);
  double M = t.sink ? t.sink_value : -INFINITY, e_max = 0.0, s_min = INFINITY;
  for (uint64_t j = 0; j < K; ++j) {
    M = std::max(M, t.s[j]);
    e_max = std::max(e_max, t.e[j]);
    s_min = std::min(s_min, t.s[j]);
  }
  const double gl = gamma(dbl(K + T + 1), u), ga = gamma(dbl(K + T + 2), u);
  const double eta_T = std::pow(1.0 + eta, dbl(T + 1));
  const double F = dbl(K + 1) * kExpUnderflowAbs * std::exp(std::max(0.0, M + e_max - t.m_ref));
  double E_L = F, L = 0.0;
  std::vector<double> E_A(hd, 0.0), abs_num(hd, 0.0), vmax(hd, 0.0);
  for (uint64_t j = 0; j < K; ++j) {
    const double w = std::exp(t.s[j] - t.m_ref);
    const double rho = std::exp(t.e[j] + 2.0 * u * (M - t.s[j] + t.e[j] + e_max)) * eta_T - 1.0;
    L += w;
    E_L += w * ((1.0 + rho) * (1.0 + gl) - 1.0);
    const double fa = (1.0 + rho) * (1.0 + ga) - 1.0;
    for (uint64_t d = 0; d < hd; ++d) {
      const double av = std::fabs(bf16_value(t.v[j][d]));
      E_A[d] += w * av * fa;
      abs_num[d] += w * av;
      vmax[d] = std::max(vmax[d], av);
    }
  }
  if (t.sink) {
    const double w = std::exp(t.sink_value - t.m_ref);
    const double rho = std::exp(u * (M - t.sink_value + e_max)) * (1.0 + eta) - 1.0;
    L += w;
    E_L += w * ((1.0 + rho) * (1.0 + gl) - 1.0);
  }
  const double span = K == 0 ? 0.0 : M - s_min;
  const double g64 = gamma(dbl(K + hd + T + 16), kU64) * (1.0 + span);
  for (uint64_t d = 0; d < hd; ++d)
    r.o_bound[d] = quotient_error(E_A[d] + F * vmax[d], E_L, r.o[d], L, K + hd + T, bm) +
                   g64 * (abs_num[d] / L + std::fabs(r.o[d]));
  r.m_bound = e_max;
  r.l_bound = E_L + gamma(dbl(K + 8), kU64) * (1.0 + span) * L;
}

// --- the quotient
// ----------------------------------------------------------------------------------
//
// o = N / L from N̂, L̂ with |N̂ − N| ≤ E_N, |L̂ − L| ≤ E_L < L:
//   N̂/L̂ − N/L = (N̂ − N)/L̂ + (N/L)(L − L̂)/L̂  ⇒  |N̂/L̂ − o| ≤ (E_N + |o|·E_L)/(L − E_L) =: q,
// then the FP32 division (1 + u): |ô − o| ≤ q + u(|o| + q) + 2^-150 + γ(terms + 16, u64)·|o|.
// E_L ≥ L leaves no bound (+Inf).
double quotient_error(double err_num, double err_l, double o, double L, uint64_t terms,
                      const BoundModel& bm) {
  if (!(err_l < L)) return INFINITY;
  const double q = (err_num + std::fabs(o) * err_l) / (L - err_l);
  return q + bm.fp32_u * (std::fabs(o) + q) + kFp32UnderflowAbs +
         gamma(dbl(terms) + 16.0, kU64) * std::fabs(o);
}

// --- the split-K merge
// -------------------------------------------------------------------------------
//
// From the STORED partials (exact FP32 values o_k, m_k, l_k; parts with l_k > 0 only) and the
// sink σ: M = max(m_k, σ) is exact (a max of stored values). The backend's part weight
// ŵ_k = fl(l_k·expf(fl(m_k − M))): the argument rounding u·(M − m_k), expf's η, the product's u:
//   ρ_k = e^(u(M − m_k))(1 + η)(1 + u) − 1;     the sink's e^(σ − M): ρ_σ = e^(u(M − σ))(1 + η) −
//   1;
// an expf that underflows: 2^-126·l_k absolute. l = Σ ŵ_k + ŵ_σ and N_d = Σ ŵ_k·o_kd: at most
// S + 1 roundings on a path (the product, S additions): γ_(S+1). So the relative error of a weight
// through the sums is (1 + ρ)(1 + γ_(S+1)) − 1 (this function), E_L = Σ_k w_k·that + the sink's +
// Σ_k 2^-126·l_k, E_N,d = Σ_k (w_k·that + 2^-126·l_k)|o_kd|, then quotient_error and the BF16
// store.
double merge_weight_rel(double gap, uint64_t splits, bool sink, const BoundModel& bm) {
  const double u = bm.fp32_u, eta = fn_rel(bm.exp_ulps, bm);
  const double rho = std::exp(u * gap) * (1.0 + eta) * (sink ? 1.0 : 1.0 + u) - 1.0;
  return (1.0 + rho) * (1.0 + gamma(dbl(splits + 1), u)) - 1.0 + gamma(dbl(splits) + 16.0, kU64);
}

// --- the gate
// ----------------------------------------------------------------------------------------
//
// y = a·σ(g), a and g the stored BF16 values (exact), σ = 1/(1 + e^−g). The backend: ê = expf(−g)
// (negation exact) within η; 1 + ê keeps that relative error (ê ≥ 0) and rounds once:
// d̂ = d(1 + θ_d), θ_d = (1 + η)(1 + u) − 1; σ̂ = fl(1/d̂) = σ(1 + θ_d)^(−1)(1 + u); ŷ = fl(a·σ̂):
//   ε_y = (1 + u)²/(1 − θ_d) − 1,  |ŷ − y| ≤ ε_y·|y| + |a|·2^-126 + 2^-150 + γ_4(u64)·|y|
// (2^-126: expf(−g) overflows to +Inf for g < −88.7 and σ̂ = 0 where σ < 2^-127; 2^-150: the
// product underflows), then the BF16 store.
double gate_error(double a, double y, const BoundModel& bm) {
  const double u = bm.fp32_u, eta = fn_rel(bm.exp_ulps, bm);
  const double theta_d = (1.0 + eta) * (1.0 + u) - 1.0;
  const double eps_y = (1.0 + u) * (1.0 + u) / (1.0 - theta_d) - 1.0;
  return eps_y * std::fabs(y) + std::fabs(a) * kSigmoidAbs + kFp32UnderflowAbs +
         gamma(4.0, kU64) * std::fabs(y);
}

}  // namespace attn_detail

std::string attn_stage_bounds_formula() {
  return "rope: (E1+E2)(1+u)+u|y|, E1 = |a c|((1+th_n)(1+eps_cs)(1+u)-1), eps_cs from "
         "trig_ulps; th_n: g_(hd-1) mean square, IEEE sqrt/div, 3 roundings; + 1 BF16 ulp";
}
std::string attn_core_bounds_formula() {
  return "scores: scale*g_(hd-1)*sum|q k| (+q error); weights: rho_j = e^(e_j+2u(M-s_j+e_j+e_max))"
         "(1+eta)^(T+1)-1, sums g_(K+T+2); (E_A+|o|E_L)/(L-E_L) + u + 1 BF16 ulp";
}
std::string attn_partials_bounds_formula() {
  return "o: the core bound without the store; m: max e_j; l vs the stored m: E_L";
}
std::string attn_merge_bounds_formula() {
  return "from the stored partials: rho_k = e^(u(M-m_k))(1+eta)(1+u)-1, g_(S+1) sums; "
         "(E_N+|o|E_L)/(L-E_L) + u + 1 BF16 ulp";
}
std::string attn_gate_bounds_formula() {
  return "((1+u)^2/(1-th_d)-1)|y| + |a|2^-126, th_d = (1+eta)(1+u)-1; + 1 BF16 ulp";
}

}  // namespace bufferlab::oracle
