// Derived per-element bounds of the Mamba-2 stages (docs/spec/numerics.md §6, §9): a backend's
// stored value against the oracle fed the same stored inputs.
//
// Notation (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1): u is the unit
// roundoff of the backend's FP32 element-wise math (bm.fp32_u) or of its sums and products
// (sum_u = max(bm.gemm_u, bm.fp32_u): the chunk products may run on a device's tensor cores),
// γ_n = n·u/(1 − n·u), u64 = 2^-53 for the oracle's own FP64. A value computed with at most n
// roundings (1 + δ)^(±1), |δ| ≤ u, on every path is within γ_n of the exact one (Lemma 3.1);
// a sum of K terms in ANY order (sequential, SIMD lanes, trees, blocked products) holds at
// most K − 1 additions on each path, so |Σ̂ − Σ| ≤ γ_(K−1+m)·Σ|terms| when each term is a
// product of m + 1 factors. BF16 × BF16 products are exact in FP32 (8 + 8 significant bits).
// Gradual underflow adds at most 2^-150 per operation whose result is subnormal: ops·2^-149.
//
// Elementary functions (FP32 on the backends):
//   expf within exp_ulps ULPs: relative η = 2·exp_ulps·u (an ULP is ≤ 2u of the value); an
//     argument that underflows (< −87.3) may give a subnormal or, flushed, 0: absolute 2^-126.
//   log1pf within kLog1pUlps ULPs (glibc ≤ 1–2, CUDA ≤ 1): relative η_log = 2·kLog1pUlps·u.
//   silu(z) = z/(1 + expf(−z)) or z·σ(z): relative ε_silu = γ_(2·exp_ulps+3), absolute 2^-120
//     (the overflow branch: |silu| ≤ 89·e^-88.7 < 2^-120); |silu'| ≤ 1.0998 < 1.1.
//   rsqrt: CPU 1/sqrtf (2 roundings), CUDA rsqrtf (≤ 2 ULP = 4u): 4u relative.
//
// A stored BF16 value bf16(ŷ) against the faithful bf16(y), |ŷ − y| ≤ e:
//   |bf16(ŷ) − bf16(y)| ≤ e + ulp_bf16(|y| + e) (half a ULP on each side: the one ULP of the
//   storage format of docs/spec/numerics.md §9). FP32 stores (dt, dA_cumsum, CB, the state) are the
//   backend's computed values: no extra term; the faithful oracle keeps them in FP64.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/mamba2_stages.h"
#include "oracle_common.h"

namespace bufferlab::oracle::mamba2_detail {
namespace {

constexpr double kLog1pUlps = 2.0;
constexpr double kExpUnderflowAbs = 0x1p-126;
// softplus(x) − x = log1p(e^−x) ≤ log1p(e^−20) < 2.1e-9 at the threshold: the two branches
// of softplus meet within it, so x and x̂ landing on different sides of 20 cost at most that.
constexpr double kSoftplusBranchGap = 2.1e-9;
// Below this argument expf of the backend's argument (within u·|arg|) and e^arg are both below
// 2^-126 (e^-104 < 2^-149): |Ê − E| ≤ 2^-126 with no relative part (expm1(u·|arg|) is
// meaningless for huge |arg| — dt up to 1e9 — and E = 0 there anyway).
constexpr double kExpNegligibleArg = -110.0;

}  // namespace

double sum_u(const BoundModel& bm) { return std::max(bm.gemm_u, bm.fp32_u); }

// --- exp factors -------------------------------------------------------------------------------
//
// E = e^arg with arg ≤ 0. The backend evaluates expf(â): â = arg exactly when it reads a
// stored value (cs_t), â = arg·(1 + δ), |δ| ≤ u, when it subtracts two stored values
// (cs_t − cs_s: one FP32 rounding; min(·, 0) is 1-Lipschitz and keeps the sign, rounding being
// monotone). |e^â − e^arg| ≤ e^arg·expm1(u·|arg|), then expf's own η:
//   Ê = E·(1 + rel) ± abs, rel = expm1(u·|arg|)·(1 + η) + η, abs = 2^-126.
ExpError exp_error(double arg, bool rounded, const BoundModel& bm) {
  if (arg < kExpNegligibleArg) return {0.0, kExpUnderflowAbs};
  const double eta = 2.0 * bm.exp_ulps * bm.fp32_u;
  const double d = rounded ? bm.fp32_u * std::fabs(arg) : 0.0;
  return {std::expm1(d) * (1.0 + eta) + eta, kExpUnderflowAbs};
}

// --- conv1d ------------------------------------------------------------------------------------
//
// a = bias + Σ_{j<K} w_j·x_j in FP32: K + 1 terms, products exact (BF16 × BF16), K additions:
// |â − a| ≤ γ_(K+1)·(|bias| + Σ|w·x|) + K·2^-149 =: e_a. silu at â: the Lipschitz step
// 1.1·e_a, silu's own rounding ε_silu·(|silu(a)| + 1.1·e_a), the overflow branch 2^-120. The
// oracle's FP64 (the same sum and a libm exp): γ_(K+8)(u64)·(1.1·Σ|terms| + |silu|). Then the
// BF16 store.
std::vector<double> conv_bounds(const ConvResult& conv, const BoundModel& bm, uint64_t kernel) {
  require_size("conv terms", conv.abs_sum.size(), conv.out.size());
  const double K = static_cast<double>(kernel);
  const double ga = gamma(K + 1.0, bm.fp32_u), g64 = gamma(K + 8.0, kU64);
  std::vector<double> b(conv.out.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const double e_a = ga * conv.abs_sum[i] + K * kUnderflowPerOp;
    const double lip = kSiluLipschitz * e_a, y = conv.out[i];
    const double e = lip + silu_rel(bm) * (std::fabs(y) + lip) + kSiluAbs +
                     g64 * (kSiluLipschitz * conv.abs_sum[i] + std::fabs(y));
    b[i] = stored_bf16(y, e);
  }
  return b;
}

std::string conv_bounds_formula() {
  return "1.1*(g_(K+1)*(|b|+sum|w*x|) + K*2^-149) + g_(2e+3)*|silu| + 2^-120 + 1 BF16 ulp";
}

// --- dt ----------------------------------------------------------------------------------------
//
// x = dt_raw + dt_bias is exact in FP64 (the argument); the backend's x̂ = fl(x): e_x = u·|x|
// (a sum that lands in the subnormals is exact: no underflow floor, bounds.h).
//   x − e_x > 20: both take softplus = x: |x̂ − x| ≤ e_x.
//   else, log1pf(expf(x̂)): softplus' = σ ≤ 1 and increasing, so the argument moves it by
//     ≤ σ(x + e_x)·e_x; expf's η moves log1p(e^x̂) by log1p(σ(x̂)·η) ≤ σ(x + e_x)·η/(1 − η);
//     log1pf rounds by η_log relative; an expf underflow costs 2^-126 absolute:
//     e = σ(x + e_x)·(e_x + η/(1 − η)) + η_log·(softplus(x) + that) + 2^-126.
//   |x − 20| ≤ e_x: either branch may be taken on either side: max(e, e_x) + log1p(e^-20).
// The clamp to [1e-9, 1e9] (the same FP32 constants on both sides) is 1-Lipschitz. The
// oracle's FP64 softplus: γ_4(u64)·(|x| + softplus). The FP32 store is the computed value.
std::vector<double> dt_bounds(std::span<const double> argument, const BoundModel& bm) {
  const double u = bm.fp32_u, eta = 2.0 * bm.exp_ulps * u, eta_log = 2.0 * kLog1pUlps * u;
  const double threshold = static_cast<double>(kSoftplusThreshold), g64 = gamma(4.0, kU64);
  std::vector<double> b(argument.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const double x = argument[i], e_x = u * std::fabs(x);
    const double sp = x > threshold ? x : std::log1p(std::exp(x));
    double e = 0.0;
    if (x - e_x > threshold) {
      e = e_x;
    } else {
      const double moved = sigmoid_fp64(x + e_x) * (e_x + eta / (1.0 - eta));
      e = moved + eta_log * (sp + moved) + kExpUnderflowAbs;
      if (x + e_x > threshold) e = std::max(e, e_x) + kSoftplusBranchGap;
    }
    b[i] = e + g64 * (std::fabs(x) + sp);
  }
  return b;
}

std::string dt_bounds_formula() {
  return "x-e_x>20: e_x=u|x|; else s(x+e_x)*(e_x+eta) + eta_log*softplus + 2^-126 "
         "(+2.1e-9 at the threshold)";
}

// --- dA_cumsum ---------------------------------------------------------------------------------
//
// Â = −expf(A_log) = A·(1 + θ), |θ| ≤ η. cs_i = Σ_{j≤i} fl(dt_j·Â) (stored dt, j ascending —
// or any scan: every prefix is a tree over the same i + 1 terms): one product and at most i
// additions on each path: |ĉs_i − cs_i| ≤ ((1 + η)(1 + γ_(i+1)) − 1)·Σ_{j≤i}|dt_j·A| +
// (2i + 1)·2^-149. The oracle: (γ_(i+1)(u64) + 2u64)·Σ (its exp and sum).
std::vector<double> cumsum_bounds(const Mamba2Dims& dims, std::span<const double> dt_chunks,
                                  std::span<const double> A, const BoundModel& bm) {
  const uint64_t H = dims.geom.H, nch = chunks_of(dims.L);
  require_size("dt chunks", dt_chunks.size(), mul(mul(H, nch), kChunk));
  const double u = bm.fp32_u, eta = 2.0 * bm.exp_ulps * u;
  std::vector<double> b(dt_chunks.size(), 0.0);
  for_each_head_chunk(dims, [&](uint64_t h, uint64_t c, uint64_t base) {
    double S = 0.0;
    for (uint64_t i = 0; i < kChunk && chunk_row_valid(dims, c, i); ++i) {
      S += std::fabs(dt_chunks[base + i] * A[h]);
      const double n = static_cast<double>(i + 1);
      b[base + i] = ((1.0 + eta) * (1.0 + gamma(n, u)) - 1.0) * S +
                    (2.0 * n - 1.0) * kUnderflowPerOp + (gamma(n, kU64) + 2.0 * kU64) * S;
    }
  });
  return b;
}

std::string cumsum_bounds_formula() {
  return "((1+eta)(1+g_(i+1)) - 1)*sum_(j<=i)|dt_j*A| from the stored dt (+ underflow)";
}

// --- CB ----------------------------------------------------------------------------------------
//
// CB[t][s] = Σ_n C_t[n]·B_s[n]: N exact products, N − 1 additions: γ_N·Σ|C_t[n]·B_s[n]| +
// N·2^-149; the oracle's γ_N(u64)·Σ.
std::vector<double> bmm_bounds(const Mamba2Dims& dims, std::span<const double> xbc,
                               const BoundModel& bm) {
  const Columns col = Columns::of(dims);
  const uint64_t L = dims.L, nch = chunks_of(L), N = col.N;
  require_size("xbc", xbc.size(), mul(L, col.d_xbc));
  const double gN = gamma(static_cast<double>(N), sum_u(bm)) + gamma(static_cast<double>(N), kU64);
  std::vector<double> b(mul(mul(nch, col.G), kChunk * kChunk), 0.0);
  for_each_cb_pair(dims, xbc, [&](uint64_t at, const double* Ct, const double* Bs) {
    double S = 0.0;
    for (uint64_t n = 0; n < N; ++n) S += std::fabs(Ct[n] * Bs[n]);
    b[at] = gN * S + static_cast<double>(N) * kUnderflowPerOp;
  });
  return b;
}

std::string bmm_bounds_formula() { return "g_N*sum_n|C_t[n]*B_s[n]| from the stored xBC"; }

// --- scan (computed alongside the values in scan_fp64, mamba2_stages.cpp)
// -------------------------
//
// On STORED dt, cs = dA_cumsum, CB, xBC (exact inputs: no error of their own) and, per chunk,
// the backend's carried FP32 state ĥ0 with |ĥ0 − h0| ≤ E (E = 0 at the first chunk: the stored
// state_in is the input).
// Output y_t[p]: the leaves are N inter-chunk terms e_t·C_t[n]·ĥ0[p][n] (2 products), t + 1
// intra terms CB[t][s]·e_ts·dt_s·x_s[p] (3 products) and D·x_t[p] (1): N + t + 2 leaves, at most
// N + t + 1 additions and 3 products on a path: γ_m, m = N + t + 4. Each exp factor Ê = E·(1 +
// rel) ± abs (exp_error; e_t reads cs_t as stored, e_ts rounds cs_t − cs_s). Hence
//   |ŷ − y| ≤ (e_t(1 + rel_t) + abs)(1 + γ_m)·Σ_n|C_t[n]|·E[p][n]          (the carry's error)
//          + Σ_n|C_t[n]·h0[p][n]|·(e_t((1 + rel_t)(1 + γ_m) − 1) + abs(1 + γ_m))
//          + Σ_s |CB·e_ts·dt_s·x_s|·((1 + rel_ts)(1 + γ_m) − 1) + abs·|CB·dt_s·x_s|(1 + γ_m)
//          + γ_m·|D·x_t| + (2N + 4(t+1) + 3)·2^-149
//          + (γ_m(u64) + 4u64)·(Σ|inter| + Σ|intra| + |D·x_t|)                  (the oracle)
// then the BF16 store of y.
// Carry h0'[p][n] = e_l·h0[p][n] + Σ_s e_ls·dt_s·x_s[p]·B_s[n] over the chunk's rc rows: rc + 1
// leaves (1 and 3 products), rc additions: γ_g, g = rc + 3, and the companion recursion
//   E'[p][n] = (e_l(1 + rel_l) + abs)(1 + γ_g)·E[p][n]
//            + |h0[p][n]|·(e_l((1 + rel_l)(1 + γ_g) − 1) + abs(1 + γ_g))
//            + Σ_s (e_ls·dt_s((1 + rel_ls)(1 + γ_g) − 1) + abs·dt_s(1 + γ_g))·|x_s[p]·B_s[n]|
//            + (4rc + 2)·2^-149 + (γ_g(u64) + 4u64)·(e_l|h0| + Σ_s e_ls·dt_s|x_s B_s|)
// — a contraction in E (e_l ≤ 1) that grows by the chunk's own rounding terms. The final
// state's bound is E after the last chunk (FP32 store: the computed value).
std::string scan_bounds_formula() {
  return "from stored dt/dA/CB/xBC/state_in: carry companion E_(c+1) = e^cs_last*E_c*(1+g) + "
         "g_(rc+3) terms; y: e^cs_t*|C|*E_c + g_(N+t+4)*(sum|terms|) + exp ulps + 1 BF16 ulp";
}

// --- recurrence (computed alongside the values in recurrence_fp64, mamba2_reference.cpp) ---------
//
// The backend computes its own dt̂ within e_dt of the oracle's FP64 dt (dt_bounds), Â within
// η|A|, â = expf(fl(dt̂·Â)): the argument errs by Δ = |A|·e_dt(1 + η)(1 + u) + |dt·A|·((1 + η)
// (1 + u) − 1), so â = a·(1 + ε_a) ± 2^-126 with ε_a = expm1(Δ)(1 + η) + η (no relative part
// once dt·A + Δ < −110: both below 2^-126). h_t = a·h + dt·x·B: 2 leaves (1 and 2 products),
// 1 addition: γ_3. With |ĥ − h| ≤ E:
//   E' = (1 + γ_3)·[(a(1 + ε_a) + 2^-126)·E + (a·ε_a + 2^-126)·|h| + e_dt·|x·B|]
//      + γ_3·(a|h| + dt|x·B|) + 3·2^-149 + (γ_3(u64) + 4u64)·(a|h| + dt|x·B|)
// — a contraction (a ≤ 1): the bound accumulates token by token, never compounds past
// (1 + γ_3)(1 + ε_a) per token. y_t[p] = Σ_n ĥ_t[p][n]·C_t[n] + D·x_t[p]: N + 1 leaves,
// γ_(N+2): (1 + γ)·Σ_n|C_n|·E'[p][n] + γ·(Σ|h·C| + |D·x|) + (2N + 2)·2^-149 + the oracle's
// γ_(N+2)(u64)·(Σ|h·C| + |D·x|), then the BF16 store. The final state: E after the last token.
std::string recurrence_bounds_formula() {
  return "per token: E_t = (1+g3)*[(a(1+eps_a))*E_(t-1) + a*eps_a*|h| + e_dt*|xB|] + "
         "g3*(a|h|+dt|xB|); y: (1+g_(N+2))*|C|*E_t + g_(N+2)*sum|terms| + 1 BF16 ulp";
}

// --- gated norm --------------------------------------------------------------------------------
//
// From the STORED y (BF16), z, w, over a group of gs columns:
//   ĝ_i = fl(y_i·silû(z_i)) = g_i(1 + θ_g) ± a_i, θ_g = (1 + ε_silu)(1 + u) − 1,
//     a_i = |y_i|·2^-120 (1 + u);
//   Σĝ² over gs terms: relative (1 + θ_g)²(1 + γ_gs) − 1 =: ρ_s, absolute Σ(2|g|a + a²)(1 + γ);
//   /gs (or ·(1/gs)): 2 roundings; eps → FP32 and + eps: 2 more; with m = Σg²/gs + eps ≥ eps:
//   m̂ = m(1 + ρ_m), ρ_m = (1 + ρ_s)(1 + u)^4 − 1 + abs/(gs·m);
//   r̂ = rsqrt(m̂)(1 + 4u) = r(1 + θ_r), |θ_r| ≤ (1 − ρ_m)^-1/2·(1 + 4u) − 1;
//   out = ĝ·r̂·w (2 roundings): |out̂ − out| ≤ |w|·r·[(θ_g|g| + a)(1 + θ_r)(1 + γ_2) +
//     |g|((1 + θ_r)(1 + γ_2) − 1)] + 2·2^-149;
// the oracle: γ_(gs+16)(u64)·|out|; then the BF16 store.
std::vector<double> gated_norm_bounds(const Mamba2Dims& dims, std::span<const double> y,
                                      std::span<const uint16_t> zxbcdt,
                                      std::span<const uint16_t> norm_w, const BoundModel& bm) {
  const Mamba2Geometry& geo = dims.geom;
  const uint64_t rows = dims.rows(), D = geo.d_inner, gs = D / geo.G;
  require_size("y", y.size(), mul(rows, D));
  require_size("zxbcdt", zxbcdt.size(), mul(rows, geo.in_proj));
  require_size("norm_w", norm_w.size(), D);
  const double u = bm.fp32_u, n = static_cast<double>(gs);
  const double theta_g = (1.0 + silu_rel(bm)) * (1.0 + u) - 1.0;
  const double rho_s = (1.0 + theta_g) * (1.0 + theta_g) * (1.0 + gamma(n, u)) - 1.0;
  const double g2 = gamma(2.0, u), g64 = gamma(n + 16.0, kU64);
  std::vector<double> b(y.size()), gate(gs), abs_g(gs);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t k = 0; k < geo.G; ++k) {
      double ss = 0.0, ss_abs = 0.0;
      for (uint64_t i = 0; i < gs; ++i) {
        const uint64_t col = k * gs + i;
        const double yi = y[r * D + col];
        gate[i] = yi * silu_fp64(bf16_value(zxbcdt[r * geo.in_proj + col]));
        abs_g[i] = std::fabs(yi) * kSiluAbs * (1.0 + u);
        ss += gate[i] * gate[i];
        ss_abs += 2.0 * std::fabs(gate[i]) * abs_g[i] + abs_g[i] * abs_g[i];
      }
      const double m = ss / n + dims.eps, rs = 1.0 / std::sqrt(m);
      const double rho_m = (1.0 + rho_s) * std::pow(1.0 + u, 4.0) - 1.0 +
                           ss_abs * (1.0 + gamma(n, u)) / (n * m) + kUnderflowPerOp * n / m;
      const double theta_r = (1.0 + 4.0 * u) / std::sqrt(1.0 - rho_m) - 1.0;
      const double f = (1.0 + theta_r) * (1.0 + g2);
      for (uint64_t i = 0; i < gs; ++i) {
        const uint64_t col = k * gs + i;
        const double w = std::fabs(bf16_value(norm_w[col])), g = std::fabs(gate[i]);
        const double out = gate[i] * rs * w;
        const double e = w * rs * ((theta_g * g + abs_g[i]) * f + g * (f - 1.0)) +
                         2.0 * kUnderflowPerOp + g64 * std::fabs(out);
        b[r * D + col] = stored_bf16(out, e);
      }
    }
  return b;
}

std::string gated_norm_bounds_formula() {
  return "|w|*r*[(th_g|g|+a)(1+th_r)(1+g2) + |g|((1+th_r)(1+g2)-1)], th_r from g_gs of the mean "
         "square and 4u rsqrt; + 1 BF16 ulp";
}

}  // namespace bufferlab::oracle::mamba2_detail
