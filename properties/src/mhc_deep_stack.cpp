// The mHC deep stack (mhc_deep_stack.h): the backend run, the faithful FP64 oracle of the same
// stack, and the per-element bound on the final streams, derived below.
//
// ---- The bound -------------------------------------------------------------------------------
// x: the oracle's streams (FP64), x̂: the backend's (FP32); E_l ≥ |x̂ − x| per element after l
// layers. E_0 = 0: mhc_expand copies BF16 values, exact in FP32 and FP64. u = bm.fp32_u, u64 =
// 2^-53, γ_n(u) = n·u/(1 − n·u), ulp(v) the BF16 spacing at |v|. Per token, n = hc·h:
//
// 1. Mix (docs/spec/numerics.md §3 steps 1–2). ρ(x) = sqrt(Σx²/n + eps) is the 2-norm of (x/√n,
// √eps), so
//    |ρ(x̂) − ρ(x)| ≤ ‖E‖₂/√n =: e₂ and ρ(x̂) ≥ ρ̂ := max(ρ − e₂, √eps). The exact mix on x̂
//    against the exact mix on x, m_k = fn_k·x/ρ:
//      |m_k(x̂) − m_k(x)| ≤ Σ|fn_k|·E/ρ̂ + |fn_k·x|·e₂/(ρ·ρ̂);
//    the backend's FP32 mix on x̂ adds γ_(2n+8)(u)·Σ|fn_k|(|x| + E)/ρ̂ (+ its underflow terms;
//    the mix error of oracle/src/mhc_bounds.cpp), the oracle's FP64 mix γ_(2n+8)(u64)·Σ|fn_k||x|/ρ.
//    Their sum is Δm_k.
// 2. Weights (step 3). z = m·s + b errs by Δz = |s|·Δm·(1 + γ₂) + γ₂·(|m·s| + |b|); σ is
//    1/4-Lipschitz and the FP32 σ plus the hc_eps add is within ε_σ = γ_(2·exp_ulps+3) relative
//    (+ 2^-126 for expf's overflow branch): Δp_i = Δz/4 + ε_σ·(p_i + Δz/4) + 2^-126, Δq_j twice
//    that (q = 2σ, the ×2 exact).
// 3. Block input (step 5). Y_d = Σ_i p_i·x_id: |Ŷ − Y| ≤ Σ_i (Δp_i·(|x_id| + E_id) + p_i·E_id)
//    + γ_hc(u)·Σ_i (p_i + Δp_i)(|x_id| + E_id) + γ_hc(u64)·Σ_i p_i|x_id| =: e_Y. Both sides
//    store BF16 and may round to different neighbours (docs/spec/numerics.md §9): |ŷ − y| ≤ e_Y +
//    ulp(|Y| + e_Y) — ONE BF16 ULP of the block input per layer.
// 4. Block (host, identical for both): b = bf16(c·y), c·y exact in FP64:
//    |b̂ − b| ≤ c·|ŷ − y| + ulp(c·|y| + c·|ŷ − y|).
// 5. Comb (step 4): |log(Ĉ_ij / C_ij)| ≤ λ, the Sinkhorn's elementwise forward error derived at
//    sinkhorn_log_error() below, for the backend (its K̂ within k_b of the exact K(x) in log:
//    2·max Δl (log-softmax is 2-Lipschitz in the max norm, Δl the logits' Δz with s2) + the
//    FP32 softmax's relative γ_(2·exp_ulps+hc+2), as oracle mhc_pre_bounds) plus the same for the
//    oracle's FP64 comb against the exact one.
// 6. Post (step 6). x'_jd = q_j·b_d + Σ_i C_ij·x_id. With m_d the midpoint of x_·d over the
//    streams,
//      x̂' − x' = (q̂b̂ − qb) + Σ_i Ĉ_ij(x̂_i − x_i) + Σ_i (Ĉ_ij − C_ij)(x_i − m_d)
//                + m_d·Σ_i (Ĉ_ij − C_ij)
//    so |x̂' − x'| ≤ Δq·|b| + (q + Δq)·Δb + e^λ·Σ_i C_ij·E_i + (e^λ − 1)·Σ_i C_ij·|x_i − m_d|
//                  + |m_d|·(τ + |Σ_i C_ij − 1|) + FP32 post rounding + FP64 post rounding,
//    τ = γ_(hc+2)(u) the backend's column sums after the exact final column normalisation (the
//    sum, the division or reciprocal and product), the roundings γ_(hc+1)(u)·((q + Δq)(|b| + Δb)
//    + e^λ·Σ_i C_ij(|x_i| + E_i)) and γ_(hc+1)(u64)·(q|b| + Σ_i C_ij|x_i|). The mix is
//    column-stochastic, so the propagated Σ_i C_ij·E_i does not grow; the comb's own error acts
//    only on the streams' spread (small: the streams start equal and differ by Σ|Δq·b|) and on
//    their common value through the column sums (a few ULPs).
// So E_(l+1) ≤ G_l·E_l + (terms of layer l), G_l ≈ e^λ + the weights' sensitivity (×|b| ≪ |x|):
// the bound is carried element by element along the oracle's trajectory. Its main per-layer
// terms are the one-ULP block input / output terms, ≈ 2·2^-7·|q·b| ≪ |x|; a BF16 highway (B13)
// loses each layer's whole update instead (|q·b| < 2^-9·|x|: below half a BF16 ULP).
#include "bufferlab/properties/mhc_deep_stack.h"
#include "bufferlab/properties/sinkhorn_log_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/bounded_compare.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/seeded_random.h"

namespace bufferlab::gen {
namespace {

using oracle::gamma;

constexpr double kU64 = 0x1p-53;
constexpr double kRmsEps = 1e-6, kMhcEps = 1e-6;
constexpr double kUnderflow = 0x1p-149;
constexpr double kSigmoidAbs = 0x1p-126;

uint64_t layer_seed(uint64_t seed, uint64_t layer) {
  return oracle::splitmix64_hash(oracle::splitmix64_hash(seed) ^ layer);
}
double uniform(uint64_t z) {
  return static_cast<double>(oracle::splitmix64_hash(z) >> 11) * 0x1p-53;
}

struct Dims {
  uint64_t hc, h, rows, n, mix, iters;
};

ModelConfig stack_config(const DeepStackCase& dc) {
  ModelConfig config;
  config.hidden_size = dc.h;
  config.vocab_size = 16;
  config.hc_mult = dc.hc;
  config.hc_sinkhorn_iters = dc.iters;
  config.hc_eps = kMhcEps;
  config.rms_norm_eps = kRmsEps;
  return config;
}

// One layer's weights: the pre step's fn / scale / bias and the block's diagonal c.
struct Layer {
  oracle::MhcPreInputs pre;  // streams unused (the stack's are uploaded)
  std::vector<float> c;      // [h], in (block_gain/hc)·[3/4, 1)
};

Layer make_layer(const DeepStackCase& dc, const MhcPreOp& op, uint64_t l) {
  const uint64_t seed = layer_seed(dc.seed, l);
  oracle::MhcInputProfile profile;
  profile.logit_range = dc.logit_range;
  Layer layer{oracle::generate_mhc_pre_inputs(op, seed, profile), {}};
  const auto mix = static_cast<float>(dc.mix_scale);
  layer.pre.scale = {mix, mix, static_cast<float>(dc.comb_scale * dc.logit_range)};
  for (uint64_t i = 0; i < 2 * dc.hc; ++i) layer.pre.bias[i] += static_cast<float>(dc.weight_bias);
  const double top = dc.block_gain / static_cast<double>(dc.hc);
  for (uint64_t d = 0; d < dc.h; ++d) {
    const double v = uniform(seed ^ ((d + 1) * 0x51ED27ull));
    layer.c.push_back(static_cast<float>(top * (0.75 + 0.25 * v)));
  }
  return layer;
}

// ---- Sinkhorn elementwise forward error ------------------------------------------------------
//
// The exact iteration on the exact kernel K: every step divides each column (row) by eps + its
// sum, the final step each column by its sum; every iterate is diag·K·diag, so all have the
// projective diameter Δ = Δ(K) and Birkhoff–Hopf contracts with κ = tanh(Δ/4). Write the
// perturbed iterate as Â = diag(e^a)·A·diag(e^b) ∘ e^E, starting from a = b = 0, |E| ≤ k
// (k bounds |log K̂ − log K|). A column step on sums S_j of A, weights w_ij = A_ij / S_j:
//   b'_j = b_j − ψ_j(z_j) − θ_j,  z_j = b_j + L_j,  L_j = log Σ_i w_ij·e^(a_i + E_ij),
//   ψ_j(z) = log((eps + S_j·e^z) / (eps + S_j)),
// θ_j the rounding of the sum and the eps add (|θ| ≤ g := −log(1 − γ_(hc+2)(u)), one factor
// per column) and one rounding of each entry's division into E (ε grows by u' = u/(1 − u)).
// Since 0 < ψ' = S·e^z/(eps + S·e^z) ≤ 1 and 1 − ψ' ≤ eps·e^|z| / S, b'_j = −L_j + ζ_j − θ_j
// with |ζ_j| ≤ |z_j|·eps·e^|z_j| / S_j, |z| ≤ max|a| + max|b| + ε. L_j lies within ε of
// log Σ_i w_ij·e^(a_i), whose oscillation over j is ≤ κ·osc(a) (w is a diagonal scaling of K;
// Birkhoff–Hopf on Wᵀ), and within [min a, max a] ± ε. Hence
//   osc(b') ≤ κ·osc(a) + 2ε + 2ζ + 2g,   max|b'| ≤ max|a| + ε + ζ + g,
// and the row steps alike with a and b swapped. After the final exact column step (no eps):
//   log(Ĉ_ij / C_ij) = (a_i + E_ij) − L_j + log(1 + δ_ij) − θ_j,
//   |log(Ĉ_ij / C_ij)| ≤ osc(a) + 2ε + u' + g.
// The lower bounds on the exact sums S are the a-priori recursion of sinkhorn_row_bound
// (oracle/src/mhc_sinkhorn.cpp): min column sum of K, min row sum after the first column step,
// then share / (eps + hc) per step.
}  // namespace

// Declared in sinkhorn_log_error.h (the golden mHC checks use them too).
SinkhornShape sinkhorn_shape(std::span<const double> K, uint64_t hc, uint64_t iters, double eps,
                             double k_oracle) {
  SinkhornShape s{hc, iters, eps};
  double max_abs_log = 0.0;
  for (double v : K) max_abs_log = std::max(max_abs_log, std::fabs(std::log(v)));
  const double delta =
      oracle::projective_diameter(K, hc) * (1.0 + 0x1p-51) + 0x1p-50 * max_abs_log + 4.0 * k_oracle;
  s.kappa = std::tanh(delta / 4.0);
  std::vector<double> sigma(hc, 0.0), rho(hc, 0.0);
  for (uint64_t i = 0; i < hc; ++i)
    for (uint64_t j = 0; j < hc; ++j) sigma[j] += K[i * hc + j];
  for (uint64_t i = 0; i < hc; ++i)
    for (uint64_t j = 0; j < hc; ++j) rho[i] += K[i * hc + j] / (eps + sigma[j]);
  const double slack = (1.0 - 0x1p-40) * std::exp(-2.0 * k_oracle);
  s.col_lb = *std::min_element(sigma.begin(), sigma.end()) * slack;
  s.row_lb = *std::min_element(rho.begin(), rho.end()) * slack;
  return s;
}

// λ for unit roundoff u and kernel log error k.
double sinkhorn_log_error(const SinkhornShape& s, double k, double u) {
  const double n = static_cast<double>(s.hc);
  const double up = u / (1.0 - u);
  const double g = -std::log1p(-gamma(n + 2.0, u));
  double osc_a = 0.0, osc_b = 0.0, max_a = 0.0, max_b = 0.0, e = k;
  // One normalisation with eps of the side whose scale is (osc_to, max_to), reading the other.
  auto step = [&](double osc_from, double max_from, double max_to, double sum_lb, double& osc_to,
                  double& new_max_to) {
    const double z = max_from + max_to + e;
    const double zeta = s.eps > 0.0 ? z * s.eps * std::exp(z) / sum_lb : 0.0;
    osc_to = s.kappa * osc_from + 2.0 * e + 2.0 * zeta + 2.0 * g;
    new_max_to = max_from + e + zeta + g;
    e += up;
  };
  double col_lb = s.col_lb, row_lb = s.row_lb;
  step(osc_a, max_a, max_b, col_lb, osc_b, max_b);
  for (uint64_t it = 1; it < s.iters; ++it) {
    const double row_share = row_lb / (s.eps + row_lb);
    step(osc_b, max_b, max_a, row_lb, osc_a, max_a);
    col_lb = (col_lb / (s.eps + col_lb)) / (s.eps + n);
    step(osc_a, max_a, max_b, col_lb, osc_b, max_b);
    row_lb = row_share / (s.eps + n);
  }
  const double lambda = osc_a + 2.0 * e + up + g;
  return std::isnan(lambda) ? INFINITY : lambda;
}

namespace {

// ---- the FP64 oracle of one layer, and the bound --------------------------------------------

// The pre step of one token on FP64 streams (docs/spec/numerics.md §3 steps 1–5, as
// oracle::mhc_pre; the oracle's own entry point takes FP32 streams), with the block input before
// its BF16 store.
struct TokenPre {
  std::vector<double> mix, p, q, K, C, Y;
};

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

TokenPre pre_token(const Dims& d, const oracle::MhcPreInputs& w, const double* x) {
  TokenPre o;
  double sum_sq = 0.0;
  for (uint64_t k = 0; k < d.n; ++k) sum_sq += x[k] * x[k];
  const double r = 1.0 / std::sqrt(sum_sq / static_cast<double>(d.n) + kRmsEps);
  o.mix.resize(d.mix);
  for (uint64_t m = 0; m < d.mix; ++m) {
    double s = 0.0;
    for (uint64_t k = 0; k < d.n; ++k) s += static_cast<double>(w.fn[m * d.n + k]) * x[k];
    o.mix[m] = r * s;
  }
  const double s0 = w.scale[0], s1 = w.scale[1], s2 = w.scale[2];
  for (uint64_t i = 0; i < d.hc; ++i) {
    o.p.push_back(sigmoid(o.mix[i] * s0 + w.bias[i]) + kMhcEps);
    o.q.push_back(2.0 * sigmoid(o.mix[d.hc + i] * s1 + w.bias[d.hc + i]));
  }
  std::vector<double> logits(d.hc * d.hc);
  for (uint64_t k = 0; k < d.hc * d.hc; ++k)
    logits[k] = o.mix[2 * d.hc + k] * s2 + w.bias[2 * d.hc + k];
  o.K = oracle::sinkhorn_kernel(logits, d.hc, kMhcEps);
  o.C = oracle::sinkhorn(o.K, d.hc, d.iters, kMhcEps);
  o.Y.assign(d.h, 0.0);
  for (uint64_t c = 0; c < d.h; ++c)
    for (uint64_t i = 0; i < d.hc; ++i) o.Y[c] += o.p[i] * x[i * d.h + c];
  return o;
}

// The oracle's layer on one token: x (in/out, [hc·h]); with `faithful` the block input and
// output are rounded to BF16. Returns the token's pre step and block output.
struct TokenLayer {
  TokenPre pre;
  std::vector<double> block_out;
};

TokenLayer oracle_layer(const Dims& d, const Layer& layer, bool faithful, double* x) {
  TokenPre o = pre_token(d, layer.pre, x);
  std::vector<double> b(d.h);
  for (uint64_t c = 0; c < d.h; ++c) {
    const double y = faithful ? oracle::round_bf16(o.Y[c]) : o.Y[c];
    const double v = static_cast<double>(layer.c[c]) * y;
    b[c] = faithful ? oracle::round_bf16(v) : v;
  }
  std::vector<double> next(d.n);
  for (uint64_t j = 0; j < d.hc; ++j)
    for (uint64_t c = 0; c < d.h; ++c) {
      double v = o.q[j] * b[c];
      for (uint64_t i = 0; i < d.hc; ++i) v += o.C[i * d.hc + j] * x[i * d.h + c];
      next[j * d.h + c] = v;
    }
  std::copy(next.begin(), next.end(), x);
  return {std::move(o), std::move(b)};
}

// The errors of steps 1–2 for one mix row: Δm (everything) and the oracle's own part.
struct MixErr {
  double all = 0.0, oracle = 0.0;
};

struct BoundContext {
  const Dims& d;
  const oracle::BoundModel& bm;
  double u = 0.0;
  double eps_sigma = 0.0;  // ε_σ (FP32 + FP64)
  double g2 = 0.0;         // γ₂(u) + γ₂(u64)
};

// |ẑ − z| for z = m·s + b with |m̂ − m| ≤ dm.
double affine_err(const BoundContext& ctx, double m, double dm, double s, double b) {
  return std::fabs(s) * dm * (1.0 + ctx.g2) + ctx.g2 * (std::fabs(m * s) + std::fabs(b));
}

// |σ̂(ẑ) − σ(z)| (+ the hc_eps add for pre weights) for |ẑ − z| ≤ dz.
double sigma_err(const BoundContext& ctx, double z, double dz) {
  return 0.25 * dz + ctx.eps_sigma * (sigmoid(z) + kMhcEps + 0.25 * dz) + kSigmoidAbs;
}

// Steps 1–6 for one token: E (in/out, [hc·h]) from the token's oracle x (before the layer), its
// pre step `o` and the layer's weights.
void bound_token(const BoundContext& ctx, const Layer& layer, const double* x, const TokenPre& o,
                 double* E) {
  const Dims& d = ctx.d;
  const double u = ctx.u, n = static_cast<double>(d.n), hc = static_cast<double>(d.hc);
  const auto& w = layer.pre;
  // 1. mix
  double sum_sq = 0.0, sum_e2 = 0.0, top = 0.0;
  for (uint64_t k = 0; k < d.n; ++k) {
    sum_sq += x[k] * x[k];
    sum_e2 += E[k] * E[k];
    top = std::max(top, std::fabs(x[k]) + E[k]);
  }
  const double rho = std::sqrt(sum_sq / n + kRmsEps);
  const double e2 = std::sqrt(sum_e2 / n) * (1.0 + 0x1p-50);
  const double rho_hat = std::max(rho - e2, std::sqrt(kRmsEps)) * (1.0 - 0x1p-50);
  int ex = 0;
  (void)std::frexp(top, &ex);
  const double g_mix = gamma(2.0 * n + 8.0, u) + kUnderflow / kRmsEps;
  const double g_mix64 = gamma(2.0 * n + 8.0, kU64);
  std::vector<MixErr> dm(d.mix);
  for (uint64_t m = 0; m < d.mix; ++m) {
    double abs_x = 0.0, abs_e = 0.0, dot = 0.0;
    for (uint64_t k = 0; k < d.n; ++k) {
      const double f = w.fn[m * d.n + k];
      abs_x += std::fabs(f * x[k]);
      abs_e += std::fabs(f) * E[k];
      dot += f * x[k];
    }
    const double oracle_part = g_mix64 * abs_x / rho;
    dm[m].oracle = oracle_part;
    dm[m].all = abs_e / rho_hat + std::fabs(dot) * e2 / (rho * rho_hat) +
                g_mix * (abs_x + abs_e) / rho_hat +
                std::ldexp(1.0, std::max(ex, 0)) * n * kUnderflow / rho_hat + oracle_part;
  }
  // 2. weights
  const double s0 = w.scale[0], s1 = w.scale[1], s2 = w.scale[2];
  std::vector<double> dp(d.hc), dq(d.hc);
  for (uint64_t i = 0; i < d.hc; ++i) {
    const double z0 = o.mix[i] * s0 + w.bias[i];
    dp[i] = sigma_err(ctx, z0, affine_err(ctx, o.mix[i], dm[i].all, s0, w.bias[i]));
    const uint64_t m = d.hc + i;
    const double z1 = o.mix[m] * s1 + w.bias[m];
    dq[i] = 2.0 * sigma_err(ctx, z1, affine_err(ctx, o.mix[m], dm[m].all, s1, w.bias[m]));
  }
  // 5. comb: the kernels' log errors, then λ
  const double exp_ulps = ctx.bm.exp_ulps;
  const double soft = -std::log1p(-gamma(2.0 * exp_ulps + hc + 2.0, u));
  const double soft64 = -std::log1p(-gamma(2.0 * exp_ulps + hc + 2.0, kU64));
  double k_b = 0.0, k_o = 0.0;
  for (uint64_t i = 0; i < d.hc; ++i) {
    double e_all = 0.0, e_o = 0.0, lo = INFINITY, hi = -INFINITY;
    for (uint64_t j = 0; j < d.hc; ++j) {
      const uint64_t m = 2 * d.hc + i * d.hc + j;
      const double l = o.mix[m] * s2 + w.bias[m];
      lo = std::min(lo, l);
      hi = std::max(hi, l);
      e_all = std::max(e_all, affine_err(ctx, o.mix[m], dm[m].all, s2, w.bias[m]));
      e_o = std::max(e_o, std::fabs(s2) * dm[m].oracle +
                              gamma(2.0, kU64) * (std::fabs(o.mix[m] * s2) + std::fabs(w.bias[m])));
    }
    k_b = std::max(k_b, 2.0 * e_all + (u + kU64) * (hi - lo + 2.0 * e_all) + soft + soft64);
    k_o = std::max(k_o, 2.0 * e_o + kU64 * (hi - lo + 2.0 * e_o) + soft64);
  }
  const SinkhornShape shape = sinkhorn_shape(o.K, d.hc, d.iters, kMhcEps, k_o);
  const double lambda = sinkhorn_log_error(shape, k_b, u) + sinkhorn_log_error(shape, k_o, kU64);
  const double grow = std::exp(lambda), drift = std::expm1(lambda);
  // 3–4. block input and block output
  const double g_mhc = gamma(hc, u), g_hc64 = gamma(hc, kU64);
  std::vector<double> b(d.h), db(d.h);
  for (uint64_t c = 0; c < d.h; ++c) {
    double e_y = hc * kUnderflow;
    for (uint64_t i = 0; i < d.hc; ++i) {
      const double ax = std::fabs(x[i * d.h + c]), ee = E[i * d.h + c];
      e_y += dp[i] * (ax + ee) + o.p[i] * ee + g_mhc * (o.p[i] + dp[i]) * (ax + ee) +
             g_hc64 * o.p[i] * ax;
    }
    const double y = oracle::round_bf16(o.Y[c]);
    const double dy = e_y + oracle::bf16_ulp_at(std::fabs(o.Y[c]) + e_y);
    const double cc = layer.c[c];
    b[c] = oracle::round_bf16(cc * y);
    db[c] = cc * dy + oracle::bf16_ulp_at(cc * std::fabs(y) + cc * dy);
  }
  // 6. post
  const double tau = gamma(hc + 2.0, u);
  const double g_post = gamma(hc + 1.0, u), g_post64 = gamma(hc + 1.0, kU64);
  std::vector<double> next(d.n);
  for (uint64_t j = 0; j < d.hc; ++j) {
    double col = 0.0;
    for (uint64_t i = 0; i < d.hc; ++i) col += o.C[i * d.hc + j];
    const double col_dev = std::fabs(col - 1.0) + hc * kU64 * col;
    const double q = o.q[j];
    for (uint64_t c = 0; c < d.h; ++c) {
      double lo = INFINITY, hi = -INFINITY;
      for (uint64_t i = 0; i < d.hc; ++i) {
        lo = std::min(lo, x[i * d.h + c]);
        hi = std::max(hi, x[i * d.h + c]);
      }
      const double mid = 0.5 * (lo + hi);
      double prop = 0.0, spread = 0.0, mag = 0.0, mag64 = 0.0;
      for (uint64_t i = 0; i < d.hc; ++i) {
        const double cij = o.C[i * d.hc + j], xi = x[i * d.h + c], ei = E[i * d.h + c];
        prop += cij * ei;
        spread += cij * std::fabs(xi - mid);
        mag += cij * (std::fabs(xi) + ei);
        mag64 += cij * std::fabs(xi);
      }
      const double ab = std::fabs(b[c]);
      next[j * d.h + c] = dq[j] * ab + (q + dq[j]) * db[c] + grow * prop + drift * spread +
                          std::fabs(mid) * (tau + col_dev) +
                          g_post * ((q + dq[j]) * (ab + db[c]) + grow * mag) +
                          g_post64 * (q * ab + mag64) + (hc + 1.0) * kUnderflow;
    }
  }
  std::copy(next.begin(), next.end(), E);
}

std::string bound_formula() {
  return "deep stack, per layer: dq|b| + (q+dq)*db + e^lambda*sum_i C_ij*E_i + "
         "(e^lambda-1)*sum_i C_ij|x_i-mid| + |mid|*(gamma_(hc+2) + |colsum-1|) + gamma_(hc+1) "
         "roundings; db = c*(e_Y + ulp_bf16) + ulp_bf16 (block input and output stored BF16); "
         "lambda: Sinkhorn forward log error (Birkhoff-Hopf contraction)";
}

}  // namespace

std::string DeepStackCase::describe() const {
  return fmt::format(
      "hc={} h={} rows={} layers={} iters={} logit_range={} block_gain={} weight_bias={} "
      "mix_scale={} comb_scale={} seed={}",
      hc, h, rows, layers, iters, logit_range, block_gain, weight_bias, mix_scale, comb_scale,
      seed);
}

void showValue(const DeepStackCase& c, std::ostream& os) { os << c.describe(); }

rc::Gen<DeepStackCase> deep_stack_case(const DeepStackRanges& r) {
  return rc::gen::exec([r] {
    using U = uint64_t;
    DeepStackCase c;
    c.hc = *rc::gen::inRange<U>(1, r.max_mhc + 1);
    c.h = *rc::gen::inRange<U>(1, r.max_h + 1);
    c.rows = *rc::gen::inRange<U>(1, r.max_rows + 1);
    c.layers = r.layers;
    c.iters = *rc::gen::oneOf(rc::gen::element(U{r.max_iters}, U{1}, U{2}),
                              rc::gen::inRange<U>(1, r.max_iters + 1));
    // L in (0, max]: 1/64 steps, 0.01 at the bottom.
    const int steps = *rc::gen::inRange(0, 65);
    c.logit_range = std::max(0.01, r.max_logit_range * steps / 64.0);
    c.seed = *rc::gen::arbitrary<U>();
    return c;
  });
}

DeepStackResult run_mhc_deep_stack(Backend& backend, const DeepStackCase& dc,
                                   const oracle::BoundModel& bm) {
  const ModelConfig config = stack_config(dc);
  const MhcExpandOp expand = MhcExpandOp::make(config, dc.rows);
  MhcPreOp pre = MhcPreOp::make(config, dc.rows);
  const uint64_t pool = oracle::place_mhc_weights(pre);
  const MhcPostOp post = MhcPostOp::make(config, dc.rows);  // in place: out = streams
  const Dims d{dc.hc, dc.h, dc.rows, dc.hc * dc.h, pre.shape().mix, dc.iters};

  const Workspace ws_expand = oracle::allocate_mhc_footprint(backend, expand, 0);
  const Workspace ws_pre = oracle::allocate_mhc_footprint(backend, pre, pool);
  const Workspace ws_post = oracle::allocate_mhc_footprint(backend, post, 0);

  const std::vector<uint16_t> embedding = oracle::generate_mhc_expand_input(expand, dc.seed);
  std::vector<float> streams = oracle::run_mhc_expand(backend, ws_expand, expand, embedding);
  const std::vector<double> x0 = oracle::mhc_expand(expand, embedding);
  std::vector<double> x = x0, x_exact = x0, E(x0.size(), 0.0);

  const BoundContext ctx{
      d, bm, bm.fp32_u,
      gamma(2.0 * bm.exp_ulps + 3.0, bm.fp32_u) + gamma(2.0 * bm.exp_ulps + 3.0, kU64),
      gamma(2.0, bm.fp32_u) + gamma(2.0, kU64)};
  DeepStackResult res;
  for (uint64_t l = 0; l < dc.layers; ++l) {
    Layer layer = make_layer(dc, pre, l);
    // The backend: pre → host block → post in place.
    layer.pre.streams = streams;
    const oracle::MhcPreOutputs out = oracle::run_mhc_pre(backend, ws_pre, pre, layer.pre);
    std::vector<uint16_t> block_out(d.rows * d.h);
    for (uint64_t t = 0; t < d.rows; ++t)
      for (uint64_t c = 0; c < d.h; ++c) {
        const double y = bf16_bits_to_f32(out.block_in[t * d.h + c]);
        const double v = oracle::round_bf16(static_cast<double>(layer.c[c]) * y);
        block_out[t * d.h + c] = f32_to_bf16_bits(static_cast<float>(v));
      }
    streams = oracle::run_mhc_post(backend, ws_post, post,
                                   {out.post, out.comb, block_out, std::move(streams)});
    // The oracle (faithful and exact) and the bound, token by token.
    for (uint64_t t = 0; t < d.rows; ++t) {
      double* xt = x.data() + t * d.n;
      const std::vector<double> before(xt, xt + d.n);
      const TokenLayer o = oracle_layer(d, layer, true, xt);
      bound_token(ctx, layer, before.data(), o.pre, E.data() + t * d.n);
      oracle_layer(d, layer, false, x_exact.data() + t * d.n);
      for (uint64_t j = 0; j < d.hc; ++j)
        for (uint64_t c = 0; c < d.h; ++c)
          if (const double v = before[j * d.h + c]; v != 0.0)
            res.block_share_max =
                std::max(res.block_share_max, std::fabs(o.pre.q[j] * o.block_out[c] / v));
    }
  }

  oracle::AgreementReport& rep = res.report;
  rep.op = "mhc_deep_stack";
  rep.params = fmt::format("hc={},h={},rows={},layers={},iters={},L={}", dc.hc, dc.h, dc.rows,
                           dc.layers, dc.iters, dc.logit_range);
  rep.backend = backend.name();
  rep.seed = dc.seed;
  rep.checks.push_back(
      oracle::compare_f32_bounded(kDeepStackCheck, streams, x, d.n, {E, {}, bound_formula()}));
  rep.reported.push_back(oracle::compare_f64("hc_streams (faithful vs exact oracle)", x, x_exact,
                                             d.n, oracle::Tolerance{}, false));

  double sum0 = 0.0, sum1 = 0.0;
  res.growth_min = INFINITY;
  res.worst_ratio = 0.0;
  for (uint64_t k = 0; k < x.size(); ++k) {
    sum0 += x0[k] * x0[k];
    sum1 += x[k] * x[k];
    if (x0[k] != 0.0) {
      const double gr = std::fabs(x[k] / x0[k]);
      res.growth_min = std::min(res.growth_min, gr);
      res.growth_max = std::max(res.growth_max, gr);
    }
    const double err = std::fabs(static_cast<double>(streams[k]) - x[k]);
    const double ratio = std::isnan(err) ? INFINITY : err == 0.0 ? 0.0 : err / E[k];
    res.max_error = std::max(res.max_error, err);
    res.max_bound = std::max(res.max_bound, E[k]);
    if (ratio > res.worst_ratio || k == 0) {
      res.worst_ratio = ratio;
      res.token = k / d.n;
      res.stream = (k % d.n) / d.h;
      res.dim = k % d.h;
      res.backend_value = streams[k];
      res.oracle_value = x[k];
      res.bound = E[k];
    }
  }
  res.rms_growth = sum0 > 0.0 ? std::sqrt(sum1 / sum0) : 1.0;
  if (!std::isfinite(res.growth_min)) res.growth_min = 1.0;
  return res;
}

std::string summarize(const DeepStackResult& r) {
  return fmt::format(
      "worst |error|/bound = {:.3g} at (token {}, stream {}, dim {}): backend {:.9g}, oracle "
      "{:.9g}, bound {:.3g}; max error {:.3g}, max bound {:.3g}; growth x{:.3f} RMS (x{:.3f}.."
      "x{:.3f} per element); block share <= {:.3g} per layer",
      r.worst_ratio, r.token, r.stream, r.dim, r.backend_value, r.oracle_value, r.bound,
      r.max_error, r.max_bound, r.rms_growth, r.growth_min, r.growth_max, r.block_share_max);
}

double deep_stack_oracle_self_check(const DeepStackCase& dc) {
  const ModelConfig config = stack_config(dc);
  const MhcExpandOp expand = MhcExpandOp::make(config, dc.rows);
  const MhcPreOp pre = MhcPreOp::make(config, dc.rows);
  const Dims d{dc.hc, dc.h, dc.rows, dc.hc * dc.h, pre.shape().mix, dc.iters};
  const std::vector<double> x =
      oracle::mhc_expand(expand, oracle::generate_mhc_expand_input(expand, dc.seed));
  Layer layer = make_layer(dc, pre, 0);
  layer.pre.streams.assign(x.begin(), x.end());
  const oracle::MhcPreReference ref = oracle::mhc_pre(pre, layer.pre, oracle::Mode::faithful);
  double worst = 0.0;
  auto diff = [&worst](double a, double b) { worst = std::max(worst, std::fabs(a - b)); };
  for (uint64_t t = 0; t < d.rows; ++t) {
    const TokenPre o = pre_token(d, layer.pre, x.data() + t * d.n);
    for (uint64_t i = 0; i < d.hc; ++i) {
      diff(o.p[i], ref.pre[t * d.hc + i]);
      diff(o.q[i], ref.post[t * d.hc + i]);
    }
    for (uint64_t k = 0; k < d.hc * d.hc; ++k) diff(o.C[k], ref.comb[t * d.hc * d.hc + k]);
    for (uint64_t c = 0; c < d.h; ++c) diff(oracle::round_bf16(o.Y[c]), ref.block_in[t * d.h + c]);
  }
  return worst;
}

}  // namespace bufferlab::gen
